package persistence

import (
	"bytes"
	"context"
	"sync"

	"github.com/lowwater/lowwater/wal"
)

// Memory is a Catalog in process memory, for tests and demos. It keeps
// encoded records, not IDs, so that tests of the layers above go through the
// same encoding and the same corrupt-record paths as a durable store.
type Memory struct {
	mu      sync.Mutex
	closed  bool
	records map[string][]byte
	// history holds every checkpoint a Save stored, per pchannel, in order.
	history map[string][]wal.MessageID
}

var _ Inspector = (*Memory)(nil)

// NewMemory returns an empty, open Memory.
func NewMemory() *Memory {
	return &Memory{
		records: make(map[string][]byte),
		history: make(map[string][]wal.MessageID),
	}
}

// Load implements Catalog.
func (m *Memory) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ready(ctx); err != nil {
		return nil, err
	}
	if err := checkLoadArgs(pchannel); err != nil {
		return nil, err
	}
	raw, ok := m.records[pchannel]
	if !ok {
		return nil, nil
	}
	return decodeStored(pchannel, raw)
}

// Save implements Catalog. A stored record that cannot be decoded is
// reported and kept: overwriting it could lower the checkpoint.
func (m *Memory) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	if err := CheckSaveArgs(pchannel, checkpoint); err != nil {
		return err
	}
	raw, err := EncodeRecord(pchannel, Record{Checkpoint: checkpoint})
	if err != nil {
		return err
	}
	old, found := m.records[pchannel]
	write, err := admit(pchannel, old, found, checkpoint)
	if err != nil {
		return err
	}
	if !write {
		raw = old // as Bolt does: an equal save rewrites nothing
	}
	m.records[pchannel] = raw
	m.history[pchannel] = append(m.history[pchannel], checkpoint)
	return nil
}

// LoadAll implements Catalog.
func (m *Memory) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ready(ctx); err != nil {
		return nil, err
	}
	all := make(map[string]wal.MessageID, len(m.records))
	for pchannel, raw := range m.records {
		id, err := decodeStored(pchannel, raw)
		if err != nil {
			return nil, err
		}
		all[pchannel] = id
	}
	return all, nil
}

// Delete implements Catalog. The History of pchannel is kept.
func (m *Memory) Delete(ctx context.Context, pchannel string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ready(ctx); err != nil {
		return err
	}
	if err := checkDeleteArgs(pchannel); err != nil {
		return err
	}
	delete(m.records, pchannel)
	return nil
}

// Inspect implements Inspector.
func (m *Memory) Inspect(ctx context.Context) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ready(ctx); err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(m.records))
	for pchannel, raw := range m.records {
		entries = append(entries, InspectRecord(pchannel, raw))
	}
	sortEntries(entries)
	return entries, nil
}

// Close implements Catalog. The stored records stay readable through
// History, so a test can inspect a catalog its subject closed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	return nil
}

// History returns every checkpoint a successful Save stored for pchannel, in
// the order the saves happened, so that tests can check that the stored
// value never went backward. A save of the value already stored (a retry
// whose first attempt committed) appears once more. Records planted with Put
// do not appear. It works after Close.
func (m *Memory) History(pchannel string) []wal.MessageID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]wal.MessageID(nil), m.history[pchannel]...)
}

// Put stores raw as the record of pchannel without any check, so that tests
// can plant a corrupt or foreign record. It works after Close.
func (m *Memory) Put(pchannel string, raw []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[pchannel] = bytes.Clone(raw)
}

// ready fails a call on a closed catalog or with a context already done.
// Nothing in Memory blocks, so checking the context once up front is all
// that honouring it takes.
func (m *Memory) ready(ctx context.Context) error {
	if m.closed {
		return ErrClosed
	}
	if ctx == nil {
		return errNilContext
	}
	return ctx.Err()
}
