package metrics

import "time"

// WithClock sets the collector's clock, so that a test reads exact ages.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}
