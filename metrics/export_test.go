package metrics

import "time"

// WithClock sets the collector's clock, so that a test reads exact ages.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}

// Remembered is how many forgotten pchannels the collector still holds.
func (c *Collector) Remembered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.forgotten)
}

// ForgetHorizon is how long a forgotten pchannel is remembered.
const ForgetHorizon = forgetHorizon
