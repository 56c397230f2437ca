package invariants

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// FuzzActorCommands sends a real PChannel actor arbitrary sequences of
// decoded commands: valid and invalid Adds, Updates, Drops and batches, nil
// command pointers, messages of no known type, with and without a sender.
// The actor must never panic (a panic would lose the reply and reset its
// state), every reply must be the model's, every rejection published, the
// final state the model's, and every value it saved a minimum it had (I1),
// in rising order (I2).
//
// Input layout: 3 bytes per command:
//
//	op        bit 7: ask for a reply (RequestFuture) rather than Send;
//	          low bits mod 7: 0 Add, 1 Update, 2 Drop, 3 Update to the
//	          vchannel's value plus (arg mod 4), 4 UpdateBatch of (arg mod 5)
//	          entries, each read from the next 2 bytes (vchannel, arg),
//	          5 a nil command (arg mod 5: Add, Update, Drop, Batch,
//	          GetState), 6 a message of no lowwater type
//	vchannel  mod 6: 0 is "", 1..5 are "a".."e"
//	arg       0xF8 nil, 0xF9 a Pulsar ID, 0xFA a typed nil *KafkaID,
//	          0xFB a RocksMQ ID; otherwise kafka:(arg mod 64)
//
// The seed corpus is in testdata/fuzz/FuzzActorCommands.
func FuzzActorCommands(f *testing.F) {
	f.Add([]byte{0x80, 1, 5, 0x80, 2, 7, 0x83, 1, 3, 0x84, 2, 3, 1, 1, 2, 9, 0xF8})
	f.Add([]byte{0x85, 0, 0, 0x85, 0, 1, 0x05, 0, 2, 0x85, 0, 3, 0x85, 0, 4, 0x06, 0, 0})
	f.Add([]byte{0x80, 0, 1, 0x80, 1, 0xF8, 0x80, 1, 0xF9, 0x80, 1, 0xFA, 0x80, 1, 0xFB, 0x82, 3, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzActor(t, data) })
	})
}

var fuzzVChannels = []string{"", "a", "b", "c", "d", "e"}

func fuzzCheckpoint(b byte) wal.MessageID {
	switch b {
	case 0xF8:
		return nil
	case 0xF9:
		return wal.PulsarID{LedgerID: 1}
	case 0xFA:
		return (*wal.KafkaID)(nil)
	case 0xFB:
		return wal.RocksMQID(1)
	}
	return wal.KafkaID(int64(b % 64))
}

func fuzzActor(t *testing.T, data []byte) {
	s := newScene(t)
	s.spawn()
	m := &model{vcs: map[string]int64{}}
	minima := map[int64]bool{}
	rejections := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format, args...)
	}
	for i := 0; i+2 < len(data); i += 3 {
		asked := data[i]&0x80 != 0
		name, arg := fuzzVChannels[int(data[i+1])%len(fuzzVChannels)], data[i+2]
		var cmd messages.Command
		var want error
		var wantBatch []error
		switch data[i] & 0x7F % 7 {
		case 0:
			cp := fuzzCheckpoint(arg)
			cmd, want = &messages.AddVChannel{VChannel: name, Checkpoint: cp}, m.add(name, cp)
		case 1:
			cp := fuzzCheckpoint(arg)
			cmd, want = &messages.UpdateCheckpoint{VChannel: name, Checkpoint: cp}, m.update(name, cp)
		case 2:
			cmd, want = &messages.DropVChannel{VChannel: name}, m.drop(name)
		case 3:
			cp := wal.KafkaID(m.vcs[name] + int64(arg%4))
			cmd, want = &messages.UpdateCheckpoint{VChannel: name, Checkpoint: cp}, m.update(name, cp)
		case 4:
			var updates []messages.VChannelCheckpoint
			for range int(arg % 5) {
				if i+4 >= len(data) {
					break
				}
				u := messages.VChannelCheckpoint{VChannel: fuzzVChannels[int(data[i+3])%len(fuzzVChannels)], Checkpoint: fuzzCheckpoint(data[i+4])}
				updates = append(updates, u)
				wantBatch = append(wantBatch, m.update(u.VChannel, u.Checkpoint))
				i += 2
			}
			cmd = &messages.UpdateBatch{Updates: updates}
		case 5:
			if arg%5 == 4 {
				res, err := s.sys.Root.RequestFuture(s.pid, (*messages.GetState)(nil), time.Minute).Result()
				if st, ok := res.(*messages.State); err != nil || !ok || st.VChannels != len(m.vcs) {
					fail("nil GetState: %v %v", res, err)
				}
				continue
			}
			cmd, want = []messages.Command{(*messages.AddVChannel)(nil), (*messages.UpdateCheckpoint)(nil),
				(*messages.DropVChannel)(nil), (*messages.UpdateBatch)(nil)}[arg%5], messages.ErrNilCommand
		case 6:
			s.sys.Root.Send(s.pid, data[i:i+3])
			continue
		}
		if lo := m.minimum(); lo.ok {
			minima[lo.v] = true
		}
		var nrej int
		if want != nil {
			nrej = 1
		}
		for _, err := range wantBatch {
			if err != nil {
				nrej++
			}
		}
		rejections += nrej
		if !asked {
			s.sys.Root.Send(s.pid, cmd)
			continue
		}
		reply := actors.Request(ctxtest.Within(time.Minute), s.sys.Root, s.pid, cmd)
		switch {
		case want != nil:
			if !errors.Is(reply, want) {
				fail("%T %+v: reply %v, want %v", cmd, cmd, reply, want)
			}
		case nrej > 0:
			var be *messages.BatchError
			if !errors.As(reply, &be) || len(be.Rejected) != nrej {
				fail("batch %+v: reply %v, want %d rejections", cmd, reply, nrej)
			}
			k := 0
			for idx, err := range wantBatch {
				if err == nil {
					continue
				}
				if r := be.Rejected[k]; r.Index != idx || !errors.Is(r.Err, err) {
					fail("batch rejection %d: %+v, want index %d %v", k, r, idx, err)
				}
				k++
			}
		case reply != nil:
			fail("%T %+v: reply %v, want nil", cmd, cmd, reply)
		}
	}
	synctest.Wait()
	st, err := actors.GetState(ctxtest.Within(time.Minute), s.sys.Root, s.pid, actors.IncludeCheckpoints())
	if err != nil {
		fail("GetState: %v", err)
	}
	if got, want := st.Checkpoints, m.checkpoints(); len(got) != len(want) {
		fail("checkpoints %v, model %v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				fail("checkpoints %v, model %v", got, want)
			}
		}
	}
	if st.Minimum != m.minimum().id() {
		fail("minimum %v, model %v", st.Minimum, m.minimum())
	}
	if n := len(ofType[*messages.CommandRejected](s.rec.Since(0))); n != rejections {
		fail("%d CommandRejected, want %d", n, rejections)
	}
	stored, err := s.mem.Load(context.Background(), scenePChannel)
	if err != nil || st.Persisted != stored || st.SaveInFlight {
		fail("persisted %v, stored %v (%v), in flight %v", st.Persisted, stored, err, st.SaveInFlight)
	}
	hist := s.mem.History(scenePChannel)
	for k, id := range hist {
		v := int64(id.(wal.KafkaID))
		if !minima[v] {
			fail("I1: saved %s, never a minimum (%v)", id, minima)
		}
		if k > 0 && !hist[k-1].LT(id) {
			fail("I2: history %v", hist)
		}
	}
}
