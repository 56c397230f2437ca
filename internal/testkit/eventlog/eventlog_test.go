package eventlog

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAwaitWakesOnMatchingEvent(t *testing.T) {
	l := New("p")
	done := make(chan messages.Event)
	go func() {
		ev, idx, ok := l.Await(0, time.Minute, func(e messages.Event) bool { _, is := e.(*messages.Stopped); return is })
		if !ok || idx != 2 {
			t.Errorf("Await = %v, %d, %v", ev, idx, ok)
		}
		done <- ev
	}()
	l.Observe(&messages.VChannelAdded{Header: messages.Header{PChannel: "p"}})
	l.Observe(&messages.Stopped{Header: messages.Header{PChannel: "other"}}) // another pchannel: not kept
	l.Observe("not an event")
	l.Observe(&messages.VChannelDropped{Header: messages.Header{PChannel: "p"}})
	l.Pause(true)
	l.Observe(&messages.Stopped{Header: messages.Header{PChannel: "p"}}) // paused: dropped
	l.Pause(false)
	want := &messages.Stopped{Header: messages.Header{PChannel: "p"}}
	l.Observe(want)
	if got := <-done; got != want {
		t.Fatalf("woke on %v", got)
	}
	if l.Len() != 3 || len(l.Since(1)) != 2 {
		t.Fatalf("Len %d, Since(1) %d", l.Len(), len(l.Since(1)))
	}
	if _, _, ok := l.Await(3, time.Millisecond, func(messages.Event) bool { return true }); ok {
		t.Fatal("Await past the end found an event")
	}
}

func TestAllPChannels(t *testing.T) {
	l := New("")
	l.Observe(&messages.VChannelAdded{Header: messages.Header{PChannel: "a"}})
	l.Observe(&messages.VChannelAdded{Header: messages.Header{PChannel: "b"}})
	if l.Len() != 2 {
		t.Fatalf("Len %d", l.Len())
	}
}
