package wal

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lowwater/lowwater/internal/shorten"
)

// Codec tells this package how to read the IDs of one WAL, whose ID type is
// ID. The type itself is the check: an ID is of the WAL when its dynamic
// type is exactly ID, so checking costs one comparison and never calls a
// method of the ID (a foreign implementation's methods may panic).
type Codec[ID MessageID] struct {
	// Unmarshal decodes the bytes Marshal returned. Bytes it cannot decode
	// give an error; a panic is recovered and reported as ErrCorruptID,
	// since stored bytes may be damaged.
	Unmarshal func(b []byte) (ID, error)
	// Parse reads the text String returns, without its leading "name:"
	// (Parse strips it, and accepts the text without it too), so that
	// Parse(name, id.String()) gives back id.
	Parse func(text string) (ID, error)
}

// codec is a registered Codec with its type parameter erased.
type codec struct {
	name      Name
	idType    reflect.Type
	unmarshal func([]byte) (MessageID, error)
	parse     func(string) (MessageID, error)
}

// textOf is an error a codec of a third party returned, as its text alone
// (fmt recovers a panic in its Error): lowwater and its callers ask
// errors.Is of the errors they are given, and such an error may wrap
// itself for good (errors.Is never returns) or panic in its Is. The text
// is cut and quoted as String's: it goes into errors and logs.
func textOf(err error) error { return errors.New(shorten.Value(err)) }

// registry is never changed once published: Register copies it, so readers
// load it with one atomic read and no lock.
type registry struct {
	byName map[Name]*codec
	// codecs is in the order of registration, the built-ins first. NameOf
	// scans it: a map keyed by reflect.Type hashes the interface on every
	// look-up, a few percent of the CPU of a save, where comparing a
	// handful of type words costs next to nothing.
	codecs []*codec
	names  []Name // sorted
}

var (
	registerMu sync.Mutex // serialises Register; readers do not take it
	current    atomic.Pointer[registry]
)

func init() {
	current.Store(&registry{byName: map[Name]*codec{}})
	for _, err := range []error{
		Register(Kafka, Codec[KafkaID]{Unmarshal: unmarshalKafka, Parse: parseKafka}),
		Register(RocksMQ, Codec[RocksMQID]{Unmarshal: unmarshalRocksMQ, Parse: parseRocksMQ}),
		Register(Pulsar, Codec[PulsarID]{Unmarshal: unmarshalPulsar, Parse: parsePulsar}),
		Register(Woodpecker, Codec[WoodpeckerID]{Unmarshal: unmarshalWoodpecker, Parse: parseWoodpecker}),
	} {
		if err != nil {
			panic(err) // a built-in that cannot register is a bug in this file
		}
	}
}

// holdsReference finds a pointer, interface, channel or unsafe pointer in
// t, through its fields and array elements, and says where. An ID holding
// one is not a plain value: whoever holds that reference can change the
// position after an update was acknowledged, behind the actor's back.
// Strings are kept: they cannot be changed.
func holdsReference(t reflect.Type, path string) (where string, kind reflect.Kind, ok bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Chan, reflect.UnsafePointer:
		return path, t.Kind(), true
	case reflect.Array:
		return holdsReference(t.Elem(), path+"[]")
	case reflect.Struct:
		for f := range t.Fields() {
			if where, kind, ok := holdsReference(f.Type, path+"."+f.Name); ok {
				return where, kind, true
			}
		}
	}
	return "", 0, false
}

// referenceKinds names, for an error, each kind holdsReference finds.
var referenceKinds = map[reflect.Kind]string{
	reflect.Pointer: "a pointer", reflect.Interface: "an interface", reflect.Chan: "a channel", reflect.UnsafePointer: "an unsafe.Pointer",
}

// maxNameLen is what a stored record can carry (one length byte).
const maxNameLen = 255

// Register makes the WAL called name known to every part of lowwater: the
// actors (NewProps with that name), the catalogs (records of it decode),
// events and logs (through String), and Parse. The built-in WALs are
// registered this way.
//
// It fails with ErrInvalidCodec, and changes nothing, when the name is
// empty, longer than 255 bytes, holds anything but letters, digits, '.',
// '_' and '-', or is taken; when a function is missing; when ID is not a
// comparable value type (a pointer could be a typed nil, an interface
// matches no dynamic type), holds a pointer, interface or channel in its
// fields (whoever shares it could move a position already acknowledged),
// or is registered under another name; or when the zero ID's WALName is
// not name. Every ID of it is checked to read back
// through Unmarshal as the same position, compared with LT and EQ without
// a panic, wherever it comes in (an update, a spawn) and wherever it is
// stored (Marshal): one that does not is refused with ErrCorruptID. It is
// safe for concurrent use, but is
// meant for program start: every process sharing a catalog must register
// the same WALs, or records of the others read as corrupt.
func Register[ID MessageID](name Name, c Codec[ID]) error {
	if err := checkName(name); err != nil {
		return err
	}
	if c.Unmarshal == nil || c.Parse == nil {
		return fmt.Errorf("%w: %q: Unmarshal and Parse are both required", ErrInvalidCodec, name)
	}
	t := reflect.TypeFor[ID]()
	switch {
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface:
		return fmt.Errorf("%w: %q: ID type %v is a %v, want a value type", ErrInvalidCodec, name, t, t.Kind())
	case !t.Comparable():
		return fmt.Errorf("%w: %q: ID type %v is not comparable", ErrInvalidCodec, name, t)
	}
	if path, kind, ok := holdsReference(t, t.String()); ok {
		return fmt.Errorf("%w: %q: ID type %v holds %s (%s), want a plain value", ErrInvalidCodec, name, t, referenceKinds[kind], path)
	}
	if got, err := zeroWALName[ID](); err != nil || got != name {
		return fmt.Errorf("%w: %q: %v.WALName() = %s (%v), want %q", ErrInvalidCodec, name, t, shorten.QuotedText(string(got)), err, name)
	}
	// The errors of package wal's own codecs are kept whole; a third
	// party's as their text alone (see textOf).
	keep := func(err error) error { return textOf(err) }
	if BuiltIn(*new(ID)) {
		keep = func(err error) error { return err }
	}
	entry := &codec{
		name:   name,
		idType: t,
		unmarshal: func(b []byte) (MessageID, error) {
			id, err := c.Unmarshal(b)
			if err != nil {
				return nil, keep(err)
			}
			return id, nil
		},
		parse: func(text string) (MessageID, error) {
			id, err := c.Parse(text)
			if err != nil {
				return nil, keep(err)
			}
			return id, nil
		},
	}

	registerMu.Lock()
	defer registerMu.Unlock()
	old := current.Load()
	if _, taken := old.byName[name]; taken {
		return fmt.Errorf("%w: WAL %q is already registered", ErrInvalidCodec, name)
	}
	if other := old.byType(t); other != nil {
		return fmt.Errorf("%w: ID type %v is already registered for WAL %q", ErrInvalidCodec, t, other.name)
	}
	next := &registry{
		byName: make(map[Name]*codec, len(old.byName)+1),
		codecs: append(slices.Clone(old.codecs), entry),
		names:  append(slices.Clone(old.names), name),
	}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	next.byName[name] = entry
	slices.Sort(next.names)
	current.Store(next)
	return nil
}

// byType returns the codec of ID type t, or nil.
func (r *registry) byType(t reflect.Type) *codec {
	for _, c := range r.codecs {
		if c.idType == t {
			return c
		}
	}
	return nil
}

func checkName(name Name) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%w: WAL name %s must be 1 to %d bytes", ErrInvalidCodec, shorten.QuotedText(string(name)), maxNameLen)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%w: WAL name %q: %q is not a letter, digit, '.', '_' or '-'", ErrInvalidCodec, name, r)
		}
	}
	return nil
}

// zeroWALName calls WALName on the zero ID, recovering a panic.
func zeroWALName[ID MessageID]() (name Name, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %s", shorten.Value(r))
		}
	}()
	var zero ID
	return zero.WALName(), nil
}

func lookup(walName Name) (*codec, error) {
	c, ok := current.Load().byName[walName]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownWAL, shorten.QuotedText(string(walName)))
	}
	return c, nil
}

// Names returns the registered WAL names, sorted.
func Names() []Name { return slices.Clone(current.Load().names) }

// Known reports whether walName is registered.
func Known(walName Name) bool {
	_, ok := current.Load().byName[walName]
	return ok
}

// NameOf returns the WAL of id from its dynamic type alone, without calling
// its methods, so that it is safe on any value (a typed nil pointer, a
// foreign implementation): a nil id or a type no WAL registered gives
// ErrWALMismatch.
func NameOf(id MessageID) (Name, error) {
	c, err := codecOf(id)
	if err != nil {
		return "", err
	}
	return c.name, nil
}

// codecOf returns the codec of id's dynamic type, as NameOf describes.
func codecOf(id MessageID) (*codec, error) {
	if id == nil {
		return nil, fmt.Errorf("%w: nil ID", ErrWALMismatch)
	}
	c := current.Load().byType(reflect.TypeOf(id))
	if c == nil {
		return nil, fmt.Errorf("%w: %T is not a registered message ID type", ErrWALMismatch, id)
	}
	return c, nil
}

// Unmarshal decodes the bytes of an ID of the named WAL. It never panics:
// an unknown name gives ErrUnknownWAL, bad bytes give ErrCorruptID.
func Unmarshal(walName Name, b []byte) (MessageID, error) {
	c, err := lookup(walName)
	if err != nil {
		return nil, err
	}
	return c.decode(b)
}

// decode is Unmarshal once the codec is known.
func (c *codec) decode(b []byte) (id MessageID, err error) {
	defer func() {
		if r := recover(); r != nil {
			id, err = nil, fmt.Errorf("%w: %s codec panicked: %s", ErrCorruptID, c.name, shorten.Value(r))
		}
	}()
	id, err = c.unmarshal(b)
	if err != nil && !errors.Is(err, ErrCorruptID) {
		err = fmt.Errorf("%w: %s: %w", ErrCorruptID, c.name, err)
	}
	if err != nil {
		return nil, err
	}
	return id, nil
}

// marshal is Marshal for an ID of the codec's type, registered outside
// this package: its bytes, checked to read back.
func (c *codec) marshal(id MessageID) ([]byte, error) {
	b, err := marshalGuarded(id)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxIDLen {
		return nil, fmt.Errorf("%w: a %s ID of %d bytes, over the %d a catalog stores", ErrCorruptID, c.name, len(b), MaxIDLen)
	}
	back, err := c.decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s does not read back as marshalled: %w", String(id), err)
	}
	// Compared, not tested for equal values: a value that reads back is
	// one that can be ordered too, or it would stop every save over it.
	switch order, err := Compare(back, id); {
	case err != nil:
		return nil, err
	case order != 0:
		return nil, fmt.Errorf("%w: %s reads back as %s", ErrCorruptID, String(id), String(back))
	}
	return b, nil
}

// Parse reads the text form of an ID of the named WAL: what String prints
// ("kafka:42", "pulsar:7:3:0@2"), or the same without the WAL name and its
// colon ("42"). Text that names another registered WAL gives ErrWALMismatch,
// other bad text ErrSyntax, an unknown name ErrUnknownWAL. It never panics.
func Parse(walName Name, text string) (id MessageID, err error) {
	c, err := lookup(walName)
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(text, string(walName)+":")
	if !ok {
		if other, _, found := strings.Cut(text, ":"); found && Known(Name(other)) {
			return nil, fmt.Errorf("%w: %s is a %s ID, not a %s one", ErrWALMismatch, shorten.QuotedText(text), other, walName)
		}
		rest = text
	}
	defer func() {
		if r := recover(); r != nil {
			id, err = nil, fmt.Errorf("%w: %s codec panicked on %s: %s", ErrSyntax, walName, shorten.QuotedText(text), shorten.Value(r))
		}
	}()
	id, err = c.parse(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s as a %s ID: %w", ErrSyntax, shorten.QuotedText(text), walName, err)
	}
	return id, nil
}

// ParseAny reads text that starts with its WAL's name, as String prints it
// ("kafka:42"), for callers that do not know the WAL beforehand.
func ParseAny(text string) (MessageID, error) {
	name, _, ok := strings.Cut(text, ":")
	if !ok {
		return nil, fmt.Errorf("%w: %s does not start with a WAL name and ':'", ErrSyntax, shorten.QuotedText(text))
	}
	return Parse(Name(name), text)
}

// Check returns nil when id is a non-nil ID of the named WAL and of the type
// registered for it, so that comparing it with other IDs of that WAL is
// meaningful, and a position rather than a sentinel (ErrSentinel).
func Check(walName Name, id MessageID) error {
	c, err := NewChecker(walName)
	if err != nil {
		return err
	}
	return c.Check(id)
}

// Checker is Check bound to one WAL, for hot paths: it looks the WAL up
// once, and checks with one type comparison.
type Checker struct {
	walName Name
	idType  reflect.Type
	codec   *codec
}

// NewChecker returns a Checker for the named WAL.
func NewChecker(walName Name) (Checker, error) {
	c, err := lookup(walName)
	if err != nil {
		return Checker{}, err
	}
	return Checker{walName: walName, idType: c.idType, codec: c}, nil
}

// BuiltIn reports whether the checker's WAL is one of this package's own,
// whose IDs' methods never panic (see the package function BuiltIn).
func (c Checker) BuiltIn() bool {
	switch c.idType {
	case reflect.TypeFor[KafkaID](), reflect.TypeFor[RocksMQID](), reflect.TypeFor[PulsarID](), reflect.TypeFor[WoodpeckerID]():
		return true
	}
	return false
}

// Marshal is the package function Marshal for an ID that Check accepts,
// without looking its WAL up: for hot paths.
func (c Checker) Marshal(id MessageID) ([]byte, error) {
	if err := c.Check(id); err != nil {
		return nil, err
	}
	if BuiltIn(id) {
		return id.Marshal(), nil
	}
	return c.codec.marshal(id)
}

// WALName returns the name of the WAL the checker accepts.
func (c Checker) WALName() Name { return c.walName }

// Check returns nil when id is a non-nil ID of the checker's WAL, and a
// position rather than a sentinel (ErrSentinel).
func (c Checker) Check(id MessageID) error {
	if id == nil {
		return fmt.Errorf("%w: nil ID for %q", ErrWALMismatch, c.walName)
	}
	if reflect.TypeOf(id) != c.idType {
		// Format the type only: a foreign implementation's methods may
		// panic (a typed nil pointer, say), and bad input must not.
		return fmt.Errorf("%w: %T where a %s ID was expected", ErrWALMismatch, id, c.walName)
	}
	return CheckPosition(id)
}

// CheckPosition returns ErrSentinel for an ID that a WAL's clients read
// as a place rather than a position (a negative Kafka offset), and nil
// for any other. It needs no WAL name: for callers that take IDs of any.
func CheckPosition(id MessageID) error {
	if k, ok := id.(KafkaID); ok && k < 0 {
		return fmt.Errorf("%w: %v: Kafka's clients read -1 as the end of the log and -2 as its start; "+
			"give a real offset, 0 for the start", ErrSentinel, k)
	}
	return nil
}
