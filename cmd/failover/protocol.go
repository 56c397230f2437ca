package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/lowwater/lowwater/wal"
)

// A node tells the parent what happens, one JSON object per line on its
// standard output; the parent tells a node what to do, one word per line
// on its standard input.
const (
	evReady     = "ready"     // the session is up and the preferred pchannels are owned
	evOwned     = "owned"     // Own returned: PCh at Term
	evRecovered = "recovered" // the actor recovered: Value is the start (nil: the beginning)
	evPersisted = "persisted" // CheckpointPersisted: Value is durable
	evFailed    = "failed"    // PersistFailed
	evLost      = "lost"      // OwnershipLost
	evStopped   = "stopped"   // the actor stopped: Value is its last persisted
	evBye       = "bye"       // the node released everything and exits

	cmdStandby = "standby" // start waiting to own the other pchannels
	cmdStop    = "stop"    // stop gracefully (so does the end of input)
)

// line is one event of a node.
type line struct {
	Ev   string `json:"ev"`
	Node string `json:"node"`
	// At is the node's clock, in Unix nanoseconds: the parent runs on the
	// same machine, so it measures takeovers on the nodes' timestamps.
	At          int64  `json:"at"`
	PCh         string `json:"pch,omitempty"`
	Term        uint64 `json:"term,omitempty"`
	Value       *int64 `json:"value,omitempty"`
	FromCatalog bool   `json:"fromCatalog,omitempty"`
	Err         string `json:"err,omitempty"`
	PID         int    `json:"pid,omitempty"`
}

func (l line) time() time.Time { return time.Unix(0, l.At) }

// offset is a Kafka checkpoint as it travels between processes.
func offset(id wal.MessageID) *int64 {
	k, ok := id.(wal.KafkaID)
	if !ok {
		return nil
	}
	n := int64(k)
	return &n
}

// emitter writes lines from one goroutine, so that event handlers (which
// run on the actors' goroutines) only enqueue.
type emitter struct {
	ch   chan line
	done chan struct{}
}

func newEmitter(w io.Writer) *emitter {
	e := &emitter{ch: make(chan line, 4096), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		enc := json.NewEncoder(w) // one Write per line
		for l := range e.ch {
			_ = enc.Encode(l)
		}
	}()
	return e
}

func (e *emitter) emit(l line) {
	if l.At == 0 {
		l.At = time.Now().UnixNano()
	}
	e.ch <- l
}

// close writes what is queued and returns.
func (e *emitter) close() {
	close(e.ch)
	<-e.done
}
