// Package catalogurl reads the catalog URLs the commands take (--catalog),
// so that the demo and the operator tool accept the same ones:
//
//	bolt:PATH                        a bbolt file
//	bolt                             a bbolt file the command places itself
//	memory                           process memory (the demo only)
//	etcd://HOST:PORT[,HOST:PORT]/P   etcd, keys under prefix P (default lowwater)
package catalogurl

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// Kinds of catalog.
const (
	Bolt   = "bolt"
	Memory = "memory"
	Etcd   = "etcd"
)

// ErrInvalid is the error of a URL that names no catalog.
var ErrInvalid = errors.New("invalid catalog URL")

// ErrCredentials is the error (wrapping ErrInvalid) of an etcd URL that
// carries a user and password: every user of the machine sees a command
// line. A command that logs in to etcd says where they go instead.
var ErrCredentials = fmt.Errorf("%w: a user and password do not go in the URL, where every user of the machine sees them", ErrInvalid)

// URL is a parsed catalog URL.
type URL struct {
	Kind string
	// Path is the bbolt file; empty when the URL names none.
	Path string
	// Endpoints are etcd's client URLs, Prefix its key prefix.
	Endpoints []string
	Prefix    string
}

// Parse reads a catalog URL. It touches no store.
func Parse(spec string) (URL, error) {
	shown := Redacted(spec)             // what an error may show of it
	quoted := shorten.QuotedText(shown) // and quote, cut
	kind, rest, hasRest := strings.Cut(spec, ":")
	switch kind {
	case Bolt:
		return URL{Kind: Bolt, Path: rest}, nil
	case Memory:
		if hasRest {
			return URL{}, fmt.Errorf("%w: %s: memory takes no argument", ErrInvalid, quoted)
		}
		return URL{Kind: Memory}, nil
	case Etcd:
		rest, ok := strings.CutPrefix(rest, "//")
		if credentials(rest) {
			return URL{}, fmt.Errorf("%w: %s", ErrCredentials, quoted)
		}
		hosts, prefix, _ := strings.Cut(rest, "/")
		if !ok || hosts == "" {
			return URL{}, fmt.Errorf("%w: %s: want etcd://host:port[,host:port]/prefix", ErrInvalid, quoted)
		}
		switch {
		case prefix == "":
			prefix = etcdcatalog.DefaultPrefix
		case strings.HasSuffix(prefix, "/"):
			// etcdcatalog.WithPrefix refuses it too; said here, it is a
			// bad command line rather than a catalog that fails to open.
			return URL{}, fmt.Errorf("%w: %s: the prefix %s ends with '/'", ErrInvalid, quoted, shorten.QuotedText(prefix))
		case etcdcatalog.ValidatePrefix(prefix) != nil:
			return URL{}, fmt.Errorf("%w: %s: %w", ErrInvalid, quoted, etcdcatalog.ValidatePrefix(prefix))
		}
		endpoints := strings.Split(hosts, ",")
		for _, e := range endpoints {
			if err := checkHostPort(e); err != nil {
				return URL{}, fmt.Errorf("%w: %s: etcd endpoint %s: %w", ErrInvalid, quoted, shorten.QuotedText(e), err)
			}
		}
		return URL{Kind: Etcd, Endpoints: endpoints, Prefix: prefix}, nil
	case spec:
		if strings.ContainsAny(spec, `/\.`) {
			// No kind at all, and it looks like a path: the usual slip.
			return URL{}, fmt.Errorf("%w: %s: no kind; for a bbolt file, give bolt:%s", ErrInvalid, quoted, shorten.Text(shown))
		}
		fallthrough
	default:
		return URL{}, fmt.Errorf("%w: %s: unknown kind %s: want bolt:PATH, etcd://HOST:PORT/PREFIX or, inside one process, memory", ErrInvalid, quoted, shorten.QuotedText(Redacted(kind)))
	}
}

// credentials reports whether the etcd URL's text after "//" begins with a
// user and password. Any '@' in it is taken for theirs, unless endpoints
// come first and it lies in the prefix after them: a password may hold
// '/' and '@' (base64 does).
func credentials(rest string) bool {
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return false
	}
	hosts, _, _ := strings.Cut(rest, "/")
	if len(hosts) > at {
		return true
	}
	for e := range strings.SplitSeq(hosts, ",") {
		if checkHostPort(e) != nil {
			return true
		}
	}
	return false // the prefix's
}

// Redacted is spec as an error may quote it: what lies between "//" and
// the last '@' after it, a password maybe, is left out.
func Redacted(spec string) string {
	i := strings.Index(spec, "//")
	if i < 0 {
		return spec
	}
	if at := strings.LastIndexByte(spec, '@'); at > i {
		return spec[:i+2] + "…" + spec[at:]
	}
	return spec
}

// checkHostPort checks that addr is host:port with a port number: a typo
// is an error at once, not a connection that times out.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); host == "" || err != nil || n <= 0 || n > 65535 {
		return errors.New("want host:port with a port in 1..65535")
	}
	return nil
}

// String describes the catalog in a few words, for headers and errors.
func (u URL) String() string {
	switch u.Kind {
	case Bolt:
		return "bbolt file " + u.Path
	case Memory:
		return "in memory"
	case Etcd:
		return fmt.Sprintf("etcd at %s, prefix %q", strings.Join(u.Endpoints, ","), u.Prefix)
	default:
		return "no catalog"
	}
}
