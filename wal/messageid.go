package wal

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/lowwater/lowwater/internal/shorten"
)

// Name names a WAL, as registered in this package. It is a type of its own
// so that a WAL's name and a pchannel's cannot be swapped unnoticed where a
// function takes both.
type Name string

// MessageID is a totally ordered position in one WAL.
type MessageID interface {
	// WALName names the WAL the ID belongs to, as registered in this package.
	WALName() Name
	// LT reports whether the receiver is strictly before other.
	LT(other MessageID) bool
	// LTE reports whether the receiver is before or at other.
	LTE(other MessageID) bool
	// EQ reports whether both IDs name the same position.
	EQ(other MessageID) bool
	// Marshal returns the ID's canonical bytes; Unmarshal with the same WAL
	// name gives back an ID at the same position (EQ), which lowwater
	// checks before it holds or stores one (the package function Marshal).
	// The slice is the caller's: a new one on every call, never written
	// again by the ID. A catalog may keep it as its stored value, and one
	// that a later call rewrote would change a checkpoint already stored.
	Marshal() []byte
	// String is the ID's text form, for logs, humans and the command
	// line: Parse with the same WAL name gives back an equal ID. By
	// convention it starts with the WAL name and a colon ("kafka:42").
	String() string
}

// Names of the built-in WALs.
const (
	Kafka      Name = "kafka"
	Pulsar     Name = "pulsar"
	RocksMQ    Name = "rocksmq"
	Woodpecker Name = "woodpecker"
)

// MaxIDLen is the longest ID, in bytes (MessageID.Marshal), that lowwater
// takes: a catalog's record keeps its length in 16 bits. Marshal refuses
// a longer one (ErrCorruptID), and so does every way an ID comes in,
// rather than take one whose every save then fails.
const MaxIDLen = 1<<16 - 1

var (
	// ErrUnknownWAL is returned for a WAL name this package has no codec for.
	ErrUnknownWAL = errors.New("wal: unknown WAL name")
	// ErrCorruptID is returned when bytes do not decode to an ID of the WAL.
	ErrCorruptID = errors.New("wal: corrupt message ID")
	// ErrWALMismatch is returned when an ID belongs to another WAL than the
	// one expected, or is not of a registered ID type.
	ErrWALMismatch = errors.New("wal: message ID of another WAL")
	// ErrSentinel is returned by Check for an ID that a WAL's clients read
	// as a place rather than a position: a negative Kafka offset, which
	// they take for the log's end (-1) or start (-2). Kept as a checkpoint,
	// a consumer seeking to it would skip, or replay, every record.
	ErrSentinel = errors.New("wal: a sentinel, not a position")
	// ErrSyntax is returned by Parse for text that is not an ID of the WAL.
	ErrSyntax = errors.New("wal: malformed message ID text")
	// ErrInvalidCodec is returned by Register for a name or codec it cannot
	// take: an empty or taken name, a missing function, an ID type that is
	// not a plain value.
	ErrInvalidCodec = errors.New("wal: invalid codec")
)

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

// String formats an ID that may be nil for an error or a log line, and
// never panics: a registered ID type's String that panics gives
// "<T: String panicked: …>", as fmt prints such a value, so that naming
// the ID cannot crash its writer. Nor can it flood a log, or act on a
// terminal: a registered type's text is cut to its first 128 bytes (the
// length of the whole given, as in "… (5000 bytes)") and Go-quoted when it holds a
// character strconv.IsPrint refuses. The built-in IDs' texts are short
// and printable, and given whole. Text gives any ID's whole text.
func String(id MessageID) string {
	if id == nil || BuiltIn(id) {
		return Text(id)
	}
	return shorten.Text(Text(id))
}

// Text is an ID's whole text, its String, for what must read it back
// (Parse): a dump, a list for a program. Like String it never panics; a
// String that does gives "<T: String panicked: …>", which no codec parses.
func Text(id MessageID) (s string) {
	if id == nil {
		return "<none>"
	}
	if BuiltIn(id) {
		return id.String()
	}
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("<%T: String panicked: %v>", id, r)
		}
	}()
	return id.String()
}

// Compare orders two IDs of one WAL: -1 when a is before b, 0 at the same
// position, +1 after. IDs of two types (two WALs) or a nil give
// ErrWALMismatch. It never panics: an ID type registered outside this
// package may have an LT or EQ that panics on some values (bytes that
// decoded to nonsense, say), and that gives ErrCorruptID, naming the
// panic, so that a caller can refuse the ID instead of crashing. The
// built-in IDs, whose methods cannot panic, are compared without the
// recover. It does not look at registration: two IDs of one type are
// ordered whether it is registered or not (Check tells that).
func Compare(a, b MessageID) (int, error) {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) {
		// Not one WAL's IDs (or a nil, two nils too): no order is
		// meaningful, and a built-in LT would answer one anyway.
		return 0, fmt.Errorf("%w: %T against %T", ErrWALMismatch, a, b)
	}
	if BuiltIn(a) {
		return compare(a, b), nil
	}
	return compareGuarded(a, b)
}

func compareGuarded(a, b MessageID) (c int, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = 0, fmt.Errorf("%w: comparing %s with %s panicked: %s", ErrCorruptID, String(a), String(b), shorten.Value(r))
		}
	}()
	return compare(a, b), nil
}

func compare(a, b MessageID) int {
	switch {
	case a.LT(b):
		return -1
	case a.EQ(b):
		return 0
	}
	return 1
}

// Marshal returns id's bytes, as a catalog stores them. It never panics.
// For an ID type registered outside this package it also checks that the
// bytes read back, through the registered Unmarshal, as the same position:
// a codec that does not (one that truncates, say) would have a checkpoint
// acknowledged and then read at the next recovery as another position,
// lower maybe, or not at all. The ID read back is compared with it, with
// the type's LT and EQ: an ID that cannot be ordered even against itself
// would, stored, stop every save over it. A Marshal that panics, bytes
// longer than MaxIDLen or that do not read back, or a comparison that
// panics give ErrCorruptID; an unregistered type gives ErrWALMismatch.
func Marshal(id MessageID) ([]byte, error) {
	if BuiltIn(id) {
		return id.Marshal(), nil
	}
	c, err := codecOf(id)
	if err != nil {
		return nil, err
	}
	return c.marshal(id)
}

func marshalGuarded(id MessageID) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w: %T.Marshal panicked: %s", ErrCorruptID, id, shorten.Value(r))
		}
	}()
	return id.Marshal(), nil
}

// BuiltIn reports whether id is one of this package's own ID types, whose
// methods never panic: a caller may skip guarding them.
func BuiltIn(id MessageID) bool {
	switch id.(type) {
	case KafkaID, RocksMQID, PulsarID, WoodpeckerID:
		return true
	}
	return false
}
