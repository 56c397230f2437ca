package etcdcatalog

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
)

const (
	// DefaultPrefix is the key prefix used without WithPrefix.
	DefaultPrefix = "lowwater"
	// DefaultPageSize is the number of keys LoadAll reads per request
	// without WithPageSize.
	DefaultPageSize = 10000
	// DefaultMaxConcurrentCalls is how many per-pchannel calls a catalog
	// has in flight at most without WithMaxConcurrentCalls.
	DefaultMaxConcurrentCalls = 512
	// MaxHolderLen bounds the name WithHolder takes, in bytes.
	MaxHolderLen = 256
)

// Option configures a Catalog.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	prefix   string
	pageSize int64
	maxCalls int
	holder   string
}

// MaxPrefixLen is the longest prefix WithPrefix takes: every key holds
// it, and etcd refuses a request past its size limit (1.5 MiB by default),
// a transaction of many keys sooner.
const MaxPrefixLen = 1024

// ValidatePrefix returns nil for a prefix WithPrefix takes, and an error
// wrapping persistence.ErrInvalidArgument for one that is empty, longer
// than MaxPrefixLen, not UTF-8, holds a NUL, ends with '/', or could lie
// under another deployment's pchannels: one that holds "/wal/" or ends
// with "/wal" ("lowwater/wal/tenant-b" puts its records among the
// pchannels of "lowwater", where that catalog's LoadAll reads them as its
// own).
func ValidatePrefix(prefix string) error {
	switch {
	case len(prefix) > MaxPrefixLen:
		return fmt.Errorf("%w: prefix %s: at most %d bytes", persistence.ErrInvalidArgument, shorten.Quoted(prefix), MaxPrefixLen)
	case !isText(prefix):
		return fmt.Errorf("%w: prefix %q is not text: not UTF-8, or holds a NUL", persistence.ErrInvalidArgument, prefix)
	case prefix == "" || strings.HasSuffix(prefix, "/"):
		return fmt.Errorf("%w: prefix %q must be non-empty and not end with '/'", persistence.ErrInvalidArgument, prefix)
	case strings.Contains(prefix, "/wal/") || strings.HasSuffix(prefix, "/wal"):
		return fmt.Errorf("%w: prefix %q holds a %q segment after its first: its keys would lie among the pchannels of the prefix before it",
			persistence.ErrInvalidArgument, prefix, "wal")
	}
	return nil
}

// isText reports whether s is UTF-8 with no NUL: what a prefix and a
// holder must be, as a pchannel name must (persistence.ValidatePChannel).
func isText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func buildOptions(opts []Option) (options, error) {
	o := options{prefix: DefaultPrefix, pageSize: DefaultPageSize, maxCalls: DefaultMaxConcurrentCalls, holder: defaultHolder()}
	for _, opt := range opts {
		if opt == nil {
			// Refused, as by every constructor of the project: a nil
			// taken for "no option" hides an option built wrong.
			return options{}, fmt.Errorf("etcdcatalog: %w: nil option", persistence.ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if err := ValidatePrefix(o.prefix); err != nil {
		return options{}, fmt.Errorf("etcdcatalog: %w", err)
	}
	if o.pageSize <= 0 {
		return options{}, fmt.Errorf("etcdcatalog: %w: page size %d must be positive",
			persistence.ErrInvalidArgument, o.pageSize)
	}
	if len(o.holder) > MaxHolderLen {
		return options{}, fmt.Errorf("etcdcatalog: %w: a holder of %d bytes: at most %d",
			persistence.ErrInvalidArgument, len(o.holder), MaxHolderLen)
	}
	if !isText(o.holder) {
		return options{}, fmt.Errorf("etcdcatalog: %w: holder %q is not text: not UTF-8, or holds a NUL",
			persistence.ErrInvalidArgument, o.holder)
	}
	if o.maxCalls <= 0 {
		return options{}, fmt.Errorf("etcdcatalog: %w: at most %d concurrent calls: must be positive",
			persistence.ErrInvalidArgument, o.maxCalls)
	}
	return o, nil
}

// WithPrefix sets the prefix of every key the catalog reads or writes
// (default DefaultPrefix). ValidatePrefix says which it takes.
func WithPrefix(prefix string) Option {
	return optionFunc(func(o *options) { o.prefix = prefix })
}

// WithPageSize sets how many keys LoadAll reads per request (default
// DefaultPageSize). Pages are read at one revision, so the result is one
// consistent snapshot whatever the page size.
func WithPageSize(n int) Option {
	return optionFunc(func(o *options) { o.pageSize = int64(n) })
}

// WithMaxConcurrentCalls bounds the calls of single pchannels that the
// catalog has in flight at once (default DefaultMaxConcurrentCalls): Load,
// Save, Delete, Own's claim and retake, an Owned's reads of its owner
// key, the reads of the owner keys Owns wait on (a few dozen to a read),
// whether through an Owned or not. A call
// past the bound waits its turn, within its own context; one whose
// context ends first fails with its cause and sends nothing. Close ends
// every wait with persistence.ErrClosed, and an owner's saves and deletes
// stop waiting, fenced, once its Done closes.
//
// Every pchannel saves on its own, so a node with many of them would
// otherwise send etcd one request per pchannel at once. Past some tens of
// thousands, requests queued in the client and the server outlast the
// save timeout; the retries pile onto the queue and few saves ever land.
// Waiting here instead, a save that times out has cost etcd nothing.
// LoadAll and the calls of a Batcher's own transactions (bounded by
// WithMaxInFlight) do not count.
func WithMaxConcurrentCalls(n int) Option {
	return optionFunc(func(o *options) { o.maxCalls = n })
}

// WithHolder names this process in the owner keys its Own and TryOwn put
// (default DefaultHolder), so that whoever finds a pchannel owned can
// tell by whom: Owner.Holder and OwnedError.Holder carry it, and the
// lowwater tool shows it. The node's name in its cluster (a pod's, say)
// serves best. At most MaxHolderLen bytes of UTF-8 text with no NUL; ""
// names none.
func WithHolder(name string) Option {
	return optionFunc(func(o *options) { o.holder = name })
}

// DefaultHolder is the holder a catalog names without WithHolder: "pid
// PID on HOST", or "pid PID" when the host has no name to give.
func DefaultHolder() string { return defaultHolder() }

var defaultHolder = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return fmt.Sprintf("pid %d", os.Getpid())
	}
	return fmt.Sprintf("pid %d on %s", os.Getpid(), host)
})
