package saveplan

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Backoff paces retries of failed saves and failed recoveries.
type Backoff struct {
	// Initial is the first wait; no retry comes sooner.
	Initial time.Duration
	// Max caps every wait, jitter included.
	Max time.Duration
	// Multiplier grows the wait after each failure.
	Multiplier float64
	// Jitter spreads waits by up to this fraction, so that pchannels failing
	// together do not retry together. 0 disables it.
	Jitter float64
}

// DefaultBackoff is the schedule of the design lowwater replaces, Milvus'
// pchannelCheckpointManager (the reference, here and below): 100 ms, ×1.5,
// a 10 s cap; with 20 % jitter, and it never gives up.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 1.5, Jitter: 0.2}

// MinInitial is the shortest first wait a Backoff may have: below it, a
// catalog that fails at once would be called in what is a hot loop, a
// thousand times a second and more.
const MinInitial = time.Millisecond

// Validate reports a schedule that cannot work. The float checks are
// written so that NaN fails them too.
func (b Backoff) Validate() error {
	switch {
	case b.Initial <= 0:
		return fmt.Errorf("initial interval %v is not positive%s", b.Initial, fromDefault(b.Initial))
	case b.Initial < MinInitial:
		return fmt.Errorf("initial interval %v is below %v: a failing catalog would be retried in a hot loop", b.Initial, MinInitial)
	case b.Max < b.Initial:
		return fmt.Errorf("max interval %v is below the initial %v%s", b.Max, b.Initial, fromDefault(b.Max))
	case !(b.Multiplier >= 1):
		return fmt.Errorf("multiplier %v is below 1%s", b.Multiplier, fromDefault(b.Multiplier))
	case !(b.Jitter >= 0 && b.Jitter < 1):
		return fmt.Errorf("jitter %v is outside [0, 1)", b.Jitter)
	}
	return nil
}

// fromDefault is the hint for a field left at zero: a Backoff has no
// defaults of its own, and one made with only Initial set is refused for
// its Max.
func fromDefault[T time.Duration | float64](field T) string {
	if field == 0 {
		return " (a field left at zero is not a default: start from DefaultBackoff and change what you need)"
	}
	return ""
}

// New returns a cenkalti ExponentialBackOff that keeps the promises the
// reference broke: MaxElapsedTime is 0, so it never returns Stop; and since
// the library's jitter is symmetric around the current interval, the centre
// is shifted so that no wait falls below Initial nor rises above Max.
func (b Backoff) New() backoff.BackOff {
	lift := 1 / (1 - b.Jitter)
	e := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(time.Duration(float64(b.Initial)*lift)),
		backoff.WithMaxInterval(time.Duration(float64(b.Max)/(1+b.Jitter))),
		backoff.WithMultiplier(b.Multiplier),
		backoff.WithRandomizationFactor(b.Jitter),
		backoff.WithMaxElapsedTime(0),
		backoff.WithClockProvider(noClock{}),
	)
	e.Reset()
	return &bounded{ExponentialBackOff: e, min: b.Initial, max: b.Max}
}

// noClock is the clock of a BackOff that never gives up: the library
// reads one on every Reset and every wait, only to measure the elapsed
// time that MaxElapsedTime 0 never asks about.
type noClock struct{}

func (noClock) Now() time.Time { return time.Time{} }

// bounded clamps the library's float rounding to the promised range.
type bounded struct {
	*backoff.ExponentialBackOff
	min, max time.Duration
}

func (b *bounded) NextBackOff() time.Duration {
	return min(max(b.ExponentialBackOff.NextBackOff(), b.min), b.max)
}
