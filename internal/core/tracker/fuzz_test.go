package tracker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// FuzzCommands feeds the tracker arbitrary sequences of decoded commands,
// valid and invalid, and checks each against the plain model (a map and a
// linear scan): the same error, the same "advanced", no change at all on a
// rejection, and never a panic, whatever the input.
//
// Input layout: byte 0 picks the WAL (mod 4: kafka, pulsar, rocksmq,
// woodpecker); then 3 bytes per command:
//
//	op        mod 4: 0 Add, 1 Update, 2 Drop, 3 Update to the vchannel's
//	          current value plus (arg mod 4), so that the minimum moves
//	vchannel  mod 9: 0 is "", 1..8 are "a".."h"
//	arg       0xF8 nil, 0xF9 an ID of another WAL, 0xFA a typed nil
//	          pointer of this WAL's ID type, 0xFB an ID type package wal
//	          does not know; otherwise the value arg mod 64 with salt
//	          arg >> 6 (Pulsar's partition: bytes, never order)
//
// The seed corpus is in testdata/fuzz/FuzzCommands; make fuzz runs it for
// FUZZTIME.
func FuzzCommands(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 5, 0, 2, 5, 3, 1, 0, 3, 2, 2, 1, 0})
	f.Add([]byte{1, 0, 1, 0x41, 0, 2, 0x81, 1, 1, 0x01, 1, 2, 0xF8, 1, 1, 0xF9, 1, 1, 0xFA, 0, 3, 0xFB})
	f.Add([]byte{3, 0, 0, 1, 1, 0, 1, 2, 0, 1, 2, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		wc := walCases[int(data[0])%len(walCases)]
		tr := newTracker(t, wc.name)
		m := &model{walName: wc.name, cps: map[string]wal.MessageID{}, vals: map[string]int64{}}
		for i := 1; i+2 < len(data); i += 3 {
			op, name := data[i]%4, fuzzNames[int(data[i+1])%len(fuzzNames)]
			cp, v, valid := decodeCheckpoint(wc, data[i+2])
			if op == 3 {
				v = m.vals[name] + int64(data[i+2]%4)
				cp, valid = wc.id(v, int64(data[i+2]>>6)), true
			}
			before := snapshot(tr)
			oldMin := linearMin(m.cps)
			var desc string
			var advanced bool
			var err, want error
			switch op {
			case 0:
				desc = fmt.Sprintf("Add(%q, %s)", name, describeID(cp))
				advanced, err = tr.Add(name, cp)
				want = fuzzValidate(name, cp, valid, func() error { return m.add(name, cp, v) })
			case 1, 3:
				desc = fmt.Sprintf("Update(%q, %s)", name, describeID(cp))
				advanced, err = tr.Update(name, cp)
				want = fuzzValidate(name, cp, valid, func() error { return m.update(name, cp, v) })
			case 2:
				desc = fmt.Sprintf("Drop(%q)", name)
				advanced, err = tr.Drop(name)
				want = m.drop(name)
			}
			if want != nil {
				wantRejected(t, desc, advanced, err, want)
				wantUnchanged(t, desc, tr, before)
				continue
			}
			if err != nil {
				t.Fatalf("%s: unexpected error %v", desc, err)
			}
			if r := rose(oldMin, linearMin(m.cps)); advanced != r {
				t.Fatalf("%s: advanced = %v, want %v", desc, advanced, r)
			}
			if err := checkHeap(tr); err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			if !sameCheckpoints(tr.Checkpoints(), m.cps) {
				t.Fatalf("%s: Checkpoints() = %v, model has %v", desc, tr.Checkpoints(), m.cps)
			}
			if got, lin := tr.Minimum(), linearMin(m.cps); (got == nil) != (lin == nil) || got != nil && !got.EQ(lin) {
				t.Fatalf("%s: Minimum() = %s, linear scan gives %s", desc, wal.String(got), wal.String(lin))
			}
			if tr.Len() != len(m.cps) {
				t.Fatalf("%s: Len() = %d, model has %d", desc, tr.Len(), len(m.cps))
			}
		}
	})
}

var fuzzNames = []string{"", "a", "b", "c", "d", "e", "f", "g", "h"}

// decodeCheckpoint reads one argument byte; valid is false for the four
// special values, whose expected rejection the fuzz target decides itself
// (the model would call methods on a typed nil pointer).
func decodeCheckpoint(wc walCase, b byte) (cp wal.MessageID, v int64, valid bool) {
	switch b {
	case 0xF8:
		return nil, 0, false
	case 0xF9:
		return wc.foreign, 0, false
	case 0xFA:
		return typedNil(wc.name), 0, false
	case 0xFB:
		return fakeID{}, 0, false
	}
	v = int64(b % 64)
	return wc.id(v, int64(b>>6)), v, true
}

func typedNil(walName wal.Name) wal.MessageID {
	switch walName {
	case wal.Kafka:
		return (*wal.KafkaID)(nil)
	case wal.Pulsar:
		return (*wal.PulsarID)(nil)
	case wal.RocksMQ:
		return (*wal.RocksMQID)(nil)
	default:
		return (*wal.WoodpeckerID)(nil)
	}
}

// fuzzValidate is the model's argument check for the special checkpoints,
// then the model's own command.
func fuzzValidate(name string, cp wal.MessageID, valid bool, apply func() error) error {
	switch {
	case name == "":
		return messages.ErrEmptyVChannel
	case cp == nil:
		return messages.ErrNilCheckpoint
	case !valid:
		return wal.ErrWALMismatch
	}
	return apply()
}

// describeID formats an ID without calling the methods of a typed nil.
func describeID(cp wal.MessageID) string {
	switch cp.(type) {
	case nil:
		return "<nil>"
	case *wal.KafkaID, *wal.PulsarID, *wal.RocksMQID, *wal.WoodpeckerID, fakeID:
		return fmt.Sprintf("%T", cp)
	}
	return cp.String()
}

// The decoder's special values must stay rejected as the model says.
func TestFuzzCommandsSpecialCheckpoints(t *testing.T) {
	for _, wc := range walCases {
		tr := newTracker(t, wc.name)
		for _, b := range []byte{0xF8, 0xF9, 0xFA, 0xFB} {
			cp, _, valid := decodeCheckpoint(wc, b)
			if valid {
				t.Fatalf("0x%X decoded as valid", b)
			}
			_, err := tr.Add("a", cp)
			want := fuzzValidate("a", cp, false, nil)
			if !errors.Is(err, want) {
				t.Fatalf("%s: Add(%s) = %v, want %v", wc.name, describeID(cp), err, want)
			}
		}
	}
}
