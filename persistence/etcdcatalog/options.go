package etcdcatalog

import (
	"fmt"
	"strings"

	"github.com/lowwater/lowwater/persistence"
)

const (
	// DefaultPrefix is the key prefix used without WithPrefix.
	DefaultPrefix = "lowwater"
	// DefaultPageSize is the number of keys LoadAll reads per request
	// without WithPageSize.
	DefaultPageSize = 10000
)

// Option configures a Catalog.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix   string
	pageSize int64
}

func buildOptions(opts []Option) (options, error) {
	o := options{prefix: DefaultPrefix, pageSize: DefaultPageSize}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.prefix == "" || strings.HasSuffix(o.prefix, "/") {
		return options{}, fmt.Errorf("etcdcatalog: %w: prefix %q must be non-empty and not end with '/'",
			persistence.ErrInvalidArgument, o.prefix)
	}
	if o.pageSize <= 0 {
		return options{}, fmt.Errorf("etcdcatalog: %w: page size %d must be positive",
			persistence.ErrInvalidArgument, o.pageSize)
	}
	return o, nil
}

// WithPrefix sets the prefix of every key the catalog reads or writes
// (default DefaultPrefix). It must not be empty nor end with '/'.
func WithPrefix(prefix string) Option {
	return optionFunc(func(o *options) { o.prefix = prefix })
}

// WithPageSize sets how many keys LoadAll reads per request (default
// DefaultPageSize). Pages are read at one revision, so the result is one
// consistent snapshot whatever the page size.
func WithPageSize(n int) Option {
	return optionFunc(func(o *options) { o.pageSize = int64(n) })
}
