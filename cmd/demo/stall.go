package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lowwater/lowwater/wal"
)

// defaultStallAfter is --stall-after's default: a stall of the demo's fast
// vchannels shows within a second.
const defaultStallAfter = time.Second

// stallSpec is the --stall fault: one vchannel stops advancing from start
// on, for length (0: to the end of the run).
type stallSpec struct {
	vchannel string
	pchannel string
	index    int // the vchannel's number within its pchannel
	start    time.Duration
	length   time.Duration
}

func (s *stallSpec) String() string {
	out := fmt.Sprintf("%s@%v", s.vchannel, s.start)
	if s.length > 0 {
		out += fmt.Sprintf("+%v", s.length)
	}
	return out
}

// frozen reports whether the vchannel stands still at elapsed since the
// demo started.
func (s *stallSpec) frozen(elapsed time.Duration) bool {
	return elapsed >= s.start && (s.length == 0 || elapsed < s.start+s.length)
}

// minFreeze is how long past --stall-after a freeze must last for the
// stall to be seen: the other vchannels first have to pass the frozen one.
const minFreeze = time.Second

// check validates the spec against the run: the vchannel exists from the
// start, and the freeze lasts long enough within the run for a stall to be
// detected.
func (s *stallSpec) check(pchannels, vchannels int, duration, stallAfter time.Duration) error {
	if n, _ := strconv.Atoi(strings.TrimPrefix(s.pchannel, "p")); n >= pchannels {
		return fmt.Errorf("--stall %v: pchannel %s does not exist (--pchannels %d)", s, s.pchannel, pchannels)
	}
	if s.index >= vchannels {
		return fmt.Errorf("--stall %v: %s is not one of the %d vchannels its pchannel starts with", s, s.vchannel, vchannels)
	}
	end := duration
	if s.length > 0 {
		end = min(end, s.start+s.length)
	}
	if need := stallAfter + minFreeze; end-s.start < need {
		return fmt.Errorf("--stall %v: the freeze lasts %v within the --duration %v run; it needs --stall-after + %v = %v to be seen",
			s, max(0, end-s.start), duration, minFreeze, need)
	}
	return nil
}

// checkRoom refuses a freeze that the end of the offsets would hide. The
// frozen vchannel holds its pchannel's minimum alone only while the others
// can pass it, and none passes lastOffset: it must be below it when it
// freezes. It starts at most spawnSpread above floor (its pchannel's
// stored checkpoint, or 0), and rises at most one offset a round, a round
// a tick, until then.
func (s *stallSpec) checkRoom(floor wal.KafkaID, tick time.Duration) error {
	rise := uint64(spawnSpread) + uint64(s.start/tick) + 1
	if left := room(floor); left <= rise {
		return fmt.Errorf("--stall %v: %s's stored %s is %d below the largest Kafka offset, and %s may be %d above it when it freezes: "+
			"at the end no vchannel can pass it, so no stall would show; stall another pchannel, or lower %s's checkpoint (lowwater set --force)",
			s, s.pchannel, floor, left, s.vchannel, rise, s.pchannel)
	}
	return nil
}

// parseStall reads VCHANNEL@START[+LENGTH], VCHANNEL being pP-vNNN as the
// simulator names them (newVChannel), spelt exactly so.
func parseStall(v string) (*stallSpec, error) {
	name, when, ok := strings.Cut(v, "@")
	if !ok {
		return nil, fmt.Errorf("stall %q: want VCHANNEL@START[+LENGTH], e.g. p0-v003@2s", v)
	}
	p, vc, ok := strings.Cut(name, "-v")
	pn, err1 := strconv.Atoi(strings.TrimPrefix(p, "p"))
	vn, err2 := strconv.Atoi(vc)
	if !ok || err1 != nil || err2 != nil || pn < 0 || vn < 0 || name != fmt.Sprintf("p%d-v%03d", pn, vn) {
		return nil, fmt.Errorf("stall %q: vchannel %q: want pP-vNNN as the demo names them, e.g. p0-v003", v, name)
	}
	a, b, hasLength := strings.Cut(when, "+")
	start, err := time.ParseDuration(a)
	if err != nil || start < 0 {
		return nil, fmt.Errorf("stall %q: start %q: want a duration >= 0", v, a)
	}
	s := &stallSpec{vchannel: name, pchannel: p, index: vn, start: start}
	if hasLength {
		if s.length, err = time.ParseDuration(b); err != nil || s.length <= 0 {
			return nil, fmt.Errorf("stall %q: length %q: want a duration > 0", v, b)
		}
	}
	return s, nil
}

// stallFlag is --stall: at most one.
type stallFlag struct{ spec *stallSpec }

func (f *stallFlag) String() string {
	if f == nil || f.spec == nil {
		return ""
	}
	return f.spec.String()
}

func (f *stallFlag) Set(v string) error {
	if f.spec != nil {
		return fmt.Errorf("stall %q: only one --stall", v)
	}
	s, err := parseStall(v)
	if err != nil {
		return err
	}
	f.spec = s
	return nil
}
