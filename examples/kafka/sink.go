package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RecordID names one Kafka record: its partition and offset.
type RecordID struct {
	Partition int32
	Offset    int64
}

// Sink stands for the system the workers write their output to (a table,
// an index, another topic). It is a bbolt file whose one bucket counts,
// per record, how many times a flush wrote it: at-least-once delivery
// shows as counts of 1, a replay as counts above 1, a loss as no entry.
type Sink struct{ db *bolt.DB }

var sinkBucket = []byte("records")

// OpenSink opens or creates the sink file at path.
func OpenSink(path string) (*Sink, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("kafka: open sink %s: %w", path, err)
	}
	// Flushes of many workers at the same moment share one transaction and
	// one fsync (db.Batch); each still returns only once its write is durable.
	db.MaxBatchDelay = 2 * time.Millisecond
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(sinkBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("kafka: open sink %s: %w", path, err)
	}
	return &Sink{db: db}, nil
}

// Write records the output of offsets of one partition, durably: when it
// returns nil, a crash cannot undo it. A failed write changes nothing.
func (s *Sink) Write(partition int32, offsets []int64) error {
	// db.Batch may run the function again after a failed transaction was
	// rolled back, so the increments below are never applied twice.
	return s.db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(sinkBucket)
		for _, off := range offsets {
			k := sinkKey(RecordID{partition, off})
			n := uint32(0)
			if v := b.Get(k); len(v) == 4 {
				n = binary.BigEndian.Uint32(v)
			}
			if err := b.Put(k, binary.BigEndian.AppendUint32(nil, n+1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the file.
func (s *Sink) Close() error { return s.db.Close() }

// ReadSink returns how many times each record was written to the sink file
// at path. The file must not be open elsewhere (bbolt locks it): read it
// after its node has exited or been killed.
func ReadSink(path string) (map[RecordID]uint32, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("kafka: read sink %s: %w", path, err)
	}
	defer db.Close()
	counts := make(map[RecordID]uint32)
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(sinkBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 12 || len(v) != 4 {
				return errors.New("malformed entry")
			}
			id := RecordID{int32(binary.BigEndian.Uint32(k)), int64(binary.BigEndian.Uint64(k[4:]))}
			counts[id] = binary.BigEndian.Uint32(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: read sink %s: %w", path, err)
	}
	return counts, nil
}

func sinkKey(id RecordID) []byte {
	k := binary.BigEndian.AppendUint32(make([]byte, 0, 12), uint32(id.Partition))
	return binary.BigEndian.AppendUint64(k, uint64(id.Offset))
}
