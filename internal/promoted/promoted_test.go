package promoted

import "testing"

type inner struct{}

func (*inner) Save() error      { return nil }
func (*inner) StartSave() error { return nil }

// overrides changes Save and keeps the StartSave it embeds.
type overrides struct{ *inner }

func (*overrides) Save() error { return nil }

// forwards changes both.
type forwards struct{ *inner }

func (*forwards) Save() error      { return nil }
func (*forwards) StartSave() error { return nil }

// generic changes Save, as overrides does, on a generic type.
type generic[T any] struct{ *inner }

func (*generic[T]) Save() error { return nil }

// byValue changes Save on its value receiver.
type byValue struct{ *inner }

func (byValue) Save() error { return nil }

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"declares both", &inner{}, false},
		{"embeds both", &struct{ *inner }{&inner{}}, false},
		{"overrides Save, embeds StartSave", &overrides{}, true},
		{"overrides both", &forwards{}, false},
		{"generic, overrides Save", &generic[int]{}, true},
		{"value receiver, given as a value", byValue{}, true},
		// The limit its doc gives: through a pointer, a value receiver's
		// method is a wrapper too.
		{"value receiver, given by pointer", &byValue{}, false},
		{"no such method", 42, false},
		{"nil", nil, false},
	} {
		if got := Split(c.v, "Save", "StartSave"); got != c.want {
			t.Errorf("%s: Split(%T) = %v, want %v", c.name, c.v, got, c.want)
		}
	}
}
