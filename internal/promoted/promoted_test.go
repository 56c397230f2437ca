package promoted

import (
	"fmt"
	"testing"
	"time"
)

type store struct{}

func (*store) Save() error      { return nil }
func (*store) StartSave() error { return nil }

// saveOnly changes Save and keeps the StartSave it embeds.
type saveOnly struct{ *store }

func (*saveOnly) Save() error { return nil }

// startOnly changes StartSave and keeps the Save it embeds.
type startOnly struct{ *store }

func (*startOnly) StartSave() error { return nil }

// both changes both.
type both struct{ *store }

func (*both) Save() error      { return nil }
func (*both) StartSave() error { return nil }

// generic changes Save, as saveOnly does, on a generic type.
type generic[T any] struct{ *store }

func (*generic[T]) Save() error { return nil }

// byValue changes Save on its value receiver.
type byValue struct{ *store }

func (byValue) Save() error { return nil }

// mixed changes Save on its pointer receiver and StartSave on its value
// receiver.
type mixed struct{ *store }

func (*mixed) Save() error     { return nil }
func (mixed) StartSave() error { return nil }

// above embeds saveOnly: the change is a field down.
type above struct{ *saveOnly }

// aboveByValue embeds it by value.
type aboveByValue struct{ saveOnly }

// overStart changes Save over startOnly, which changed StartSave.
type overStart struct{ *startOnly }

func (*overStart) Save() error { return nil }

// audit declares Save alone; holder embeds the store.
type audit struct{}

func (*audit) Save() error { return nil }

type holder struct{ *store }

// beside takes Save from one field and StartSave from a deeper one.
type beside struct {
	*audit
	holder
}

// starter is the interface an embedded catalog may be held by.
type starter interface {
	Save() error
	StartSave() error
}

// decorator embeds the interface and changes neither.
type decorator struct{ starter }

// forwards holds the catalog in a named field, out of sight.
type forwards struct{ held starter }

func (f *forwards) Save() error      { return f.held.Save() }
func (f *forwards) StartSave() error { return f.held.StartSave() }

// loop embeds itself: a value of it may point at itself.
type loop struct {
	*loop
	*store
}

func (*loop) Save() error { return nil }

// knotA and knotB embed themselves and each other twice over: a search
// that looked into every path would take 2^32 steps.
type knotA struct {
	*knotA
	*knotB
	*store
}

type knotB struct {
	*knotA
	*knotB
}

func (*knotA) Save() error { return nil }

func TestSplitEndsOnTypesThatEmbedEachOther(t *testing.T) {
	k := &knotB{}
	k.knotB = k
	k.knotA = &knotA{knotB: k}
	k.knotA.knotA = k.knotA
	done := make(chan bool, 1)
	go func() { done <- Split(k, "Save", "StartSave") }()
	select {
	case split := <-done:
		// knotB's Save is knotA's, a field down; its StartSave the
		// store's, two down.
		if !split {
			t.Error("Split(knotB) = false, want true")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Split did not return within 10 s")
	}
}

func TestSplit(t *testing.T) {
	self := &loop{store: &store{}}
	self.loop = self

	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"declares both", &store{}, false},
		{"embeds both", &struct{ *store }{&store{}}, false},
		{"changes Save, embeds StartSave", &saveOnly{&store{}}, true},
		{"changes StartSave, embeds Save", &startOnly{&store{}}, false},
		{"changes both", &both{&store{}}, false},
		{"generic, changes Save", &generic[int]{&store{}}, true},
		{"value receiver, given as a value", byValue{&store{}}, true},
		{"value receiver, given by pointer", &byValue{&store{}}, true},
		{"pointer Save, value StartSave", &mixed{&store{}}, false},
		{"the change a field down", &above{&saveOnly{&store{}}}, true},
		{"the change a field down, by value", &aboveByValue{saveOnly{&store{}}}, true},
		{"Save changed over a changed StartSave", &overStart{&startOnly{&store{}}}, true},
		{"Save beside, StartSave deeper", &beside{&audit{}, holder{&store{}}}, true},
		{"an embedded interface holding the change", &decorator{&saveOnly{&store{}}}, true},
		{"an embedded interface holding a store", &decorator{&store{}}, false},
		// The limit its doc gives: a named field is out of sight.
		{"a named field holding the change", &forwards{&saveOnly{&store{}}}, false},
		{"a nil embedded pointer: its type tells", &saveOnly{}, true},
		{"a nil embedded interface", &decorator{}, false},
		{"a value that embeds itself", self, true},
		{"a nil pointer: its type tells", (*saveOnly)(nil), true},
		{"no such method", 42, false},
		{"nil", nil, false},
	} {
		if got := Split(c.v, "Save", "StartSave"); got != c.want {
			t.Errorf("%s: Split(%T) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
}

func ExampleSplit() {
	fmt.Println(Split(&saveOnly{&store{}}, "Save", "StartSave"))
	fmt.Println(Split(&both{&store{}}, "Save", "StartSave"))
	// Output:
	// true
	// false
}
