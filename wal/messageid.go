package wal

import (
	"errors"
	"fmt"
	"reflect"
)

// MessageID is a totally ordered position in one WAL.
type MessageID interface {
	// WALName names the WAL the ID belongs to, as registered in this package.
	WALName() string
	// LT reports whether the receiver is strictly before other.
	LT(other MessageID) bool
	// LTE reports whether the receiver is before or at other.
	LTE(other MessageID) bool
	// EQ reports whether both IDs name the same position.
	EQ(other MessageID) bool
	// Marshal returns the ID's canonical bytes; Unmarshal with the same WAL
	// name gives back an equal ID.
	Marshal() []byte
	// String is for logs and humans, not for parsing.
	String() string
}

// Names of the built-in WALs.
const (
	Kafka      = "kafka"
	Pulsar     = "pulsar"
	RocksMQ    = "rocksmq"
	Woodpecker = "woodpecker"
)

var (
	// ErrUnknownWAL is returned for a WAL name this package has no codec for.
	ErrUnknownWAL = errors.New("wal: unknown WAL name")
	// ErrCorruptID is returned when bytes do not decode to an ID of the WAL.
	ErrCorruptID = errors.New("wal: corrupt message ID")
	// ErrWALMismatch is returned when an ID belongs to another WAL than the
	// one expected, or is not one of this package's ID types.
	ErrWALMismatch = errors.New("wal: message ID of another WAL")
)

// codec knows one WAL's ID type and how to decode it.
type codec struct {
	idType    reflect.Type
	unmarshal func([]byte) (MessageID, error)
}

// codecs is fixed at compile time on purpose: a registry that callers can
// mutate is global state, and a checkpoint store must never meet a WAL name
// that one process knows and another does not.
var codecs = map[string]codec{
	Kafka:      {reflect.TypeFor[KafkaID](), unmarshalKafka},
	RocksMQ:    {reflect.TypeFor[RocksMQID](), unmarshalRocksMQ},
	Pulsar:     {reflect.TypeFor[PulsarID](), unmarshalPulsar},
	Woodpecker: {reflect.TypeFor[WoodpeckerID](), unmarshalWoodpecker},
}

// Names returns the WAL names this package can decode, sorted.
func Names() []string { return []string{Kafka, Pulsar, RocksMQ, Woodpecker} }

// Known reports whether walName has a codec.
func Known(walName string) bool {
	_, ok := codecs[walName]
	return ok
}

// Unmarshal decodes the bytes of an ID of the named WAL. It never panics:
// an unknown name gives ErrUnknownWAL, bad bytes give ErrCorruptID.
func Unmarshal(walName string, b []byte) (MessageID, error) {
	c, ok := codecs[walName]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWAL, walName)
	}
	return c.unmarshal(b)
}

// Check returns nil when id is a non-nil ID of the named WAL and of the type
// this package decodes for it, so that comparing it with other IDs of that
// WAL is meaningful.
func Check(walName string, id MessageID) error {
	c, err := NewChecker(walName)
	if err != nil {
		return err
	}
	return c.Check(id)
}

// Checker is Check bound to one WAL, for hot paths: it looks the WAL up once.
type Checker struct {
	walName string
	idType  reflect.Type
}

// NewChecker returns a Checker for the named WAL.
func NewChecker(walName string) (Checker, error) {
	c, ok := codecs[walName]
	if !ok {
		return Checker{}, fmt.Errorf("%w: %q", ErrUnknownWAL, walName)
	}
	return Checker{walName: walName, idType: c.idType}, nil
}

// WALName returns the name of the WAL the checker accepts.
func (c Checker) WALName() string { return c.walName }

// Check returns nil when id is a non-nil ID of the checker's WAL.
func (c Checker) Check(id MessageID) error {
	if id == nil {
		return fmt.Errorf("%w: nil ID for %q", ErrWALMismatch, c.walName)
	}
	if reflect.TypeOf(id) != c.idType {
		// Format the type only: a foreign implementation's methods may
		// panic (a typed nil pointer, say), and bad input must not.
		return fmt.Errorf("%w: %T where a %s ID was expected", ErrWALMismatch, id, c.walName)
	}
	return nil
}

// Min returns the smaller of two IDs of one WAL, treating nil as absent.
func Min(a, b MessageID) MessageID {
	switch {
	case a == nil:
		return b
	case b == nil || a.LTE(b):
		return a
	default:
		return b
	}
}

// Less reports whether a is strictly before b, with nil (nothing) before
// every ID. It is the order checkpoints follow: no checkpoint < any checkpoint.
func Less(a, b MessageID) bool {
	switch {
	case b == nil:
		return false
	case a == nil:
		return true
	default:
		return a.LT(b)
	}
}

// String formats an ID that may be nil.
func String(id MessageID) string {
	if id == nil {
		return "<none>"
	}
	return id.String()
}
