package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/creation"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/shell"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// env is what a command runs with.
type env struct {
	command        string // its name: set, restore…
	opts           options
	stdin          io.Reader // nil: there is none
	stdout, stderr io.Writer
	// prose is stdout for sentences (verify's findings): on a terminal,
	// wrapped at its width, as stderr is; tables and JSON go to stdout
	// as they are.
	prose io.Writer
	// width is what a line of stdout may take on its terminal
	// (terminalWidth): 0 when piped.
	width int
	// etcdAsked and etcdAnswered say whether the command has reached for
	// etcd, and whether etcd has answered any of its requests: a --timeout
	// that ran out on an etcd that answered nothing is etcd's silence, and
	// one after answers may be a command with too much to do (timeoutHint).
	etcdAsked, etcdAnswered atomic.Bool
}

// noteAnswers marks e.etcdAnswered once a request on the client succeeds.
func (e *env) noteAnswers(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		e.etcdAnswered.Store(true)
	}
	return err
}

// store is an open catalog and the means to write it safely.
type store struct {
	url     catalogurl.URL
	cat     persistence.Inspector
	etcd    *etcdcatalog.Catalog // nil for bbolt
	bolt    *persistence.Bolt    // nil for etcd
	session *concurrency.Session // made by the first fenced write
	stderr  io.Writer
	command string // the command's name: set, restore…
	// grace is for what a write owes once begun, whether or not the
	// command has ended by then: the release of the tool's ownership and
	// the revoke of its session (else its owner key outlived it, taken by
	// the next command for a running node's). It ends cleanupGrace after
	// the command's context does (its --timeout or a signal, whichever
	// came first), and at close; the etcd client lives as long.
	grace context.Context
	// end ends grace.
	end func()
	// revision is etcd's, read once by checkTerm.
	revision int64
	// dry is a dry run's: it writes nothing, and says what it would.
	dry bool
	// created is set when the command made the bbolt file (restore): one
	// that ends writing nothing removes it (discardCreated).
	created bool
	// aside is where a new bbolt file is built, under a temporary name
	// beside placeAt, the path it is for: restore links it there once
	// every record is written (place), so that a restore killed part way
	// (SIGKILL, the OOM killer) leaves no partial catalog that reads as
	// whole, which a node would start on, replaying the pchannels left
	// out. "" once placed or discarded, and when the file was there.
	aside, placeAt string
	// known, once set (knowOwners), is every owner key, read at once: a
	// restore plans thousands of writes, and one read each ran its
	// --timeout out before the first write, the same on every rerun.
	known map[string]etcdcatalog.Owner
	// misplaced, once probed (misplacedBeside), says why a pchannel with
	// nothing stored would not start on this bbolt file, unless a whole
	// misplaced record names it: the same for every such one, and a
	// probe reads every record.
	misplaced *string
	// named are the whole misplaced records the last read of the
	// entries found: each holds back the one pchannel it names.
	named []misplacedEntry
}

// cleanupGrace is how long past the command's end (its --timeout, or a
// signal) the tool still gives back what it took on etcd. A write under
// way is cut with the command, and its message says what it may have
// left (cutShort, reportFailures).
const cleanupGrace = time.Second

// newStore is a store of the command whose context is ctx, with nothing
// open yet.
func newStore(ctx context.Context, u catalogurl.URL, stderr io.Writer) *store {
	grace, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(ctx, func() { time.AfterFunc(cleanupGrace, cancel) })
	return &store{url: u, stderr: stderr, grace: grace, end: func() { unwatch(); cancel() }}
}

// sessionTTL bounds how long a pchannel stays owned should the tool die
// in the middle of a write.
const sessionTTL = 10

// mode says how a command opens a bbolt file.
type mode int

const (
	readOnly   mode = iota // shared lock; the file must exist
	readWrite              // exclusive lock; the file must exist
	createFile             // exclusive lock; a missing file is created; saves share commits (restore's)
	dryCreate              // as readOnly, and a missing file reads as empty
)

func (e *env) open(ctx context.Context, m mode) (_ *store, err error) {
	u := e.opts.url
	s := newStore(ctx, u, e.stderr)
	s.command = e.command
	s.dry = e.opts.dryRun
	defer func() {
		if err != nil {
			s.end()
		}
	}()
	switch u.Kind {
	case catalogurl.Bolt:
		if u.Path == "" {
			return nil, usagef("--catalog bolt: name the file, bolt:PATH")
		}
		if e.opts.dryRun {
			if err := writable(u.Path); err != nil {
				return nil, err
			}
		}
		_, statErr := os.Stat(u.Path)
		if statErr != nil {
			switch {
			case m == dryCreate && errors.Is(statErr, os.ErrNotExist):
				fmt.Fprintf(e.stdout, "%s does not exist: it would be created\n", u.Path)
				s.cat = persistence.NewMemory()
				return s, nil
			case (m == readWrite || m == readOnly && e.opts.dryRun) && errors.Is(statErr, os.ErrNotExist):
				return nil, fmt.Errorf("bbolt file: %w: a write goes to an existing catalog, "+
					"so that a mistyped path is not made into an empty one; restore creates one", statErr)
			case m != createFile && errors.Is(statErr, os.ErrNotExist):
				return nil, fmt.Errorf("bbolt file: %w: check the path (a node makes its file on its first start, "+
					"and restore makes one from a dump)", statErr)
			case m != createFile:
				return nil, fmt.Errorf("bbolt file: %w", statErr)
			}
		}
		opened := u.Path
		if m == createFile && errors.Is(statErr, os.ErrNotExist) {
			s.aside, s.placeAt = asideOf(u.Path)
			if s.aside != "" {
				opened = s.aside
			}
		}
		b, err := openBolt(ctx, opened, e.opts.bucket, m == readOnly || m == dryCreate, m == createFile, e.opts.lockTimeout)
		if err != nil && s.aside != "" {
			// Named as the command named it: the name it was to be built
			// under goes with what its creation left.
			s.discardCreated()
			err = &renamedError{msg: strings.ReplaceAll(err.Error(), opened, u.Path) + "; nothing written", err: err}
		}
		if errors.Is(err, persistence.ErrLocked) && ctx.Err() == nil {
			return nil, fmt.Errorf("%s is locked by another process%s, most likely a running "+
				"lowwater node: stop it first (waited %v, see --lock-timeout)", u.Path, lockHolder(u.Path), e.opts.lockTimeout)
		}
		if errors.Is(err, persistence.ErrNoBucket) {
			if e.opts.bucketGiven {
				// The name given is wrong: the command line's to mend.
				return nil, usagef("--bucket %s: %s", shorten.Cut(e.opts.bucket, shorten.TextLen, shownText), strings.TrimSuffix(err.Error(), " (WithBucket)"))
			}
			return nil, fmt.Errorf("%w; if it is kept under another bucket, give --bucket NAME", err)
		}
		if errors.Is(err, persistence.ErrCorruptStore) {
			bucket := ""
			if e.opts.bucketGiven {
				bucket = " --bucket " + shell.Word(e.opts.bucket)
			}
			salvage := "or salvage the records its pages still hold into a dump (lowwater --catalog " + shell.Word("bolt:"+u.Path) + bucket +
				" dump --salvage salvaged.json), check what it says, and restore the dump into a new file (lowwater --catalog bolt:NEW.db" +
				bucket + " restore salvaged.json); this file is refused whole: no other command reads it"
			if fi, serr := os.Stat(u.Path); serr == nil && fi.Size() == 0 {
				salvage = "or move it aside and restore the checkpoints from a dump taken before (an empty file holds nothing to salvage)"
			}
			advice := "restore the file from a backup, " + salvage
			if errors.Is(err, persistence.ErrNotBolt) {
				advice = "check the path; if it is the catalog's, restore it from a backup: nothing of bbolt's is left in it to salvage"
			}
			return nil, &exitError{code: ExitCorrupt, err: fmt.Errorf("%w: %s", err, advice)}
		}
		if err != nil {
			return nil, err
		}
		s.cat, s.bolt = b, b
		s.created = m == createFile && errors.Is(statErr, os.ErrNotExist) && s.aside == ""
		if err := e.checkMeta(b, m); err != nil {
			return nil, err
		}
	case catalogurl.Etcd:
		cfg := clientv3.Config{Endpoints: u.Endpoints, Context: s.grace, Logger: zap.NewNop()}
		// The files the flags name are read before etcd is asked: a bad
		// one is the command line's mistake, whatever etcd answers.
		if err := e.opts.etcd.Apply(&cfg); err != nil {
			// As a dump file: one that cannot be read is a failed read,
			// one read that holds no certificate a bad command line.
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				return nil, err
			}
			return nil, badFile("%v", err)
		}
		if err := etcdaccess.AnyListens(ctx, u.Endpoints); err != nil {
			return nil, err
		}
		// The client's own waits (the first connection, and with a user
		// its token) end with the command's, and the client with grace:
		// what a write owes past the command's end needs it still. Not
		// sooner: a member restarting behind its address, or a token on
		// a loaded host, may take longer than a fixed bound, and the
		// operator's --timeout says how long to wait.
		cfg.DialTimeout = 5 * time.Second
		if deadline, ok := ctx.Deadline(); ok {
			cfg.DialTimeout = max(time.Until(deadline), time.Millisecond)
		}
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(e.noteAnswers))
		e.etcdAsked.Store(true)
		c, err := etcdcatalog.Open(cfg, etcdcatalog.WithPrefix(u.Prefix), etcdcatalog.WithHolder(toolHolder(e.command)))
		if err != nil {
			if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
				// The dial ran out with the command's time, by a timer of
				// its own that may fire first: the command's is told, and
				// the error then said to be --timeout's (Main).
				<-ctx.Done()
			}
			return nil, err
		}
		s.cat, s.etcd = c, c
		if err := s.checkPrefix(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
	default:
		return nil, inProcessOnly(e.opts.catalog)
	}
	if openedHook != nil {
		s.cat = openedHook(s.cat)
	}
	return s, nil
}

// checkMeta looks for a damaged meta page in the bbolt file b, opened in
// mode m. bbolt then reads the file as of the other page's commit, with no
// error: a read warns that it may show older records than were saved, and
// a write is refused, unless --force, where the damaged page may have held
// the newer commit: the write's commit rewrites that page, and makes the
// loss of what it held permanent. verify reports it itself.
func (e *env) checkMeta(b *persistence.Bolt, m mode) error {
	d, err := b.DamagedMeta()
	if err != nil || d == nil || e.command == "verify" {
		return err
	}
	path := e.opts.url.Path
	write := m != readOnly || e.opts.dryRun
	switch {
	case !write && d.Known && !d.Newer:
		// As verify says: the page held the commit before the one read.
		fmt.Fprintf(e.stderr, "warning: %s: %s: what is shown is the newest; run verify\n", path, d)
	case !write && e.command == "dump" && !e.opts.force:
		// What a dump holds is restored elsewhere, where no warning
		// follows it: a checkpoint older than the one saved replays.
		return refused("%s: %s: a dump would carry checkpoints that may be older than what was saved to wherever "+
			"it is restored: run verify, and restore the file from a backup; or dump --salvage, whose HIGHER and "+
			"HIDDEN lines name what the damaged page held; or give --force to dump what the file reads as", path, d)
	case !write:
		fmt.Fprintf(e.stderr, "warning: %s: %s: what is shown may be older than what was saved; run verify\n", path, d)
	case d.Known && !d.Newer:
		// The page held the older commit: the write's rewrites it, and
		// the file loses nothing it showed.
	case !e.opts.force:
		return refused("%s: %s: a write would rewrite that page, and make the loss of what it held permanent: "+
			"run verify, and restore the file from a backup; or give --force to write over it", path, d)
	default:
		fmt.Fprintf(e.stderr, "warning: %s: %s: writing over it, as --force asks: what it held is lost for good\n", path, d)
	}
	return nil
}

// leaseRanOut explains err, the failure of a write to pchannel, when the
// tool's etcd lease ran out before it (the command stopped with Ctrl-Z,
// or etcd out of its reach, for longer than the lease's TTL): the write
// was fenced, or its ownership not taken, for no reason it says.
func (s *store) leaseRanOut(pchannel string, err error) error {
	if err == nil || !errors.Is(err, persistence.ErrFenced) && !errors.Is(err, etcdcatalog.ErrSessionDone) {
		return err
	}
	select {
	case <-s.session.Done():
		return fmt.Errorf("%s: nothing written: this command's etcd lease ran out before the write (was the command "+
			"stopped, or etcd out of its reach, for %d s?), and its hold with it; run it again: %w", shown(pchannel), sessionTTL, err)
	default:
		return err
	}
}

// checkPrefix warns of a prefix that holds no key: a mistyped one, which
// etcd cannot tell from a new one, read an empty catalog in silence, and a
// write started a new catalog beside the real one. A write is not refused,
// as one to a bbolt file that does not exist is: on etcd a catalog is
// started by the nodes' own first saves, or by set.
func (s *store) checkPrefix(ctx context.Context) error {
	resp, err := s.etcd.Client().Get(ctx, s.url.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	switch {
	case err != nil:
		return fmt.Errorf("read %s: %w", s.url, err)
	case resp.Count == 0 && (s.command == "set" || s.command == "restore"):
		// Starting a catalog is what these do (restore into a new
		// prefix, the README's own move from bbolt to etcd): said, not
		// warned of, and still said, for the prefix mistyped.
		fmt.Fprintf(s.stderr, "note: etcd holds nothing under the prefix %q: %s starts a catalog there "+
			"(prefixes are case-sensitive)\n", s.url.Prefix, s.command)
	case resp.Count == 0:
		fmt.Fprintf(s.stderr, "warning: etcd holds nothing under the prefix %q: is it the right one? "+
			"(prefixes are case-sensitive)\n", s.url.Prefix)
	}
	return nil
}

// openedHook, set by a test, stands between a command and the catalog it
// opened, to end the command at the step the test chooses.
var openedHook func(persistence.Inspector) persistence.Inspector

// lockPoll is how long one attempt waits for a bbolt file lock.
const lockPoll = 100 * time.Millisecond

// openBolt waits for the file lock until lockTimeout has passed or ctx
// ends (--timeout, Ctrl-C), whichever comes first. bbolt's own wait for
// the lock cannot be interrupted, so it waits in attempts of lockPoll.
//
// A write goes only to a file that holds the bucket already, or to a new
// file: a mistyped --bucket is not made into a new, empty catalog beside
// the real one.
//
// With group, saves under way together share one commit and one fsync
// (persistence.WithGroupCommit): restore's many writers.
func openBolt(ctx context.Context, path, bucket string, readOnly, group bool, lockTimeout time.Duration) (*persistence.Bolt, error) {
	deadline := time.Now().Add(lockTimeout)
	for locked := false; ; locked = true {
		step := min(time.Until(deadline), lockPoll)
		b, err := openAttempt(ctx, path, persistence.WithBucket(bucket), persistence.WithReadOnly(readOnly),
			persistence.WithExistingBucket(true), persistence.WithOpenTimeout(max(step, time.Millisecond)),
			persistence.WithGroupCommit(group))
		if errors.Is(err, errOpenCut) {
			if locked {
				return nil, lockWaitCut(ctx, path)
			}
			return nil, fmt.Errorf("opening %s: %w", path, ctx.Err())
		}
		if !errors.Is(err, persistence.ErrLocked) || time.Until(deadline) <= 0 {
			return b, err
		}
		if ctx.Err() != nil {
			return nil, lockWaitCut(ctx, path)
		}
	}
}

// lockWaitCut is the error of a wait for the lock of path that the
// command's end cut short: it says who holds the lock, as the end of
// --lock-timeout does.
func lockWaitCut(ctx context.Context, path string) error {
	return fmt.Errorf("waiting for the lock of %s, which another process%s holds (most likely a running "+
		"lowwater node: stop it first): %w", path, lockHolder(path), context.Cause(ctx))
}

// openFile is persistence.OpenBolt; a test slows it down.
var openFile = persistence.OpenBolt

// openAttempt is one OpenBolt, which returns when ctx ends, whatever the
// open does: OpenBolt reads every page of the file before it returns,
// which takes a while on a big file, and cannot be cut short. An open left
// behind finishes on its own goroutine, and closes what it opened: the
// file's lock is let go.
func openAttempt(ctx context.Context, path string, opts ...persistence.BoltOption) (*persistence.Bolt, error) {
	type opened struct {
		b   *persistence.Bolt
		err error
	}
	done := make(chan opened, 1)
	go func() {
		b, err := openFile(path, opts...)
		done <- opened{b, err}
	}()
	select {
	case o := <-done:
		return o.b, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.b != nil {
				_ = o.b.Close()
			}
		}()
		return nil, errOpenCut
	}
}

// errOpenCut is openAttempt's error once ctx ended first.
var errOpenCut = errors.New("the open was cut short")

// fencing returns the readable records of entries whose term is above
// etcd's current revision: no owner key was ever created at that revision
// in this etcd's history, so the record comes from another (before a
// restore that reset the revisions, or another cluster), and its term
// fences every owner. None on bbolt, whose records carry no term.
func (s *store) fencing(ctx context.Context, entries []persistence.Entry) ([]persistence.Entry, error) {
	if s.etcd == nil {
		return nil, nil
	}
	// Read after the records: the revision only grows meanwhile.
	resp, err := s.etcd.Client().Get(ctx, s.url.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd revision: %w", err)
	}
	var out []persistence.Entry
	for _, en := range entries {
		if en.Err == nil && en.Term > uint64(resp.Header.Revision) {
			out = append(out, en)
		}
	}
	return out, nil
}

// checkTerm refuses, unless force, a write over a record whose term is
// above etcd's revision (verify's FENCING): it fences every owner's
// writes, the tool's too, so the write would be refused once under way
// (staleTermClearing). Checked before anything is written, a dry run says
// what the write would do, and a restore writes none of its records
// rather than those before it.
func (s *store) checkTerm(ctx context.Context, pchannel string, en *persistence.Entry, force bool) error {
	if s.etcd == nil || en == nil || en.Err != nil || force {
		return nil
	}
	if s.revision == 0 {
		resp, err := s.etcd.Client().Get(ctx, s.url.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("etcd revision: %w", err)
		}
		s.revision = resp.Header.Revision
	}
	if en.Term <= uint64(s.revision) {
		return nil
	}
	return refused("%s: its record's term %d is above etcd's revision (%d): it was written before an etcd restore "+
		"reset the terms, or copied from another cluster, and fences every owner's saves: %s clears it, "+
		"or --force replaces it", shown(pchannel), en.Term, s.revision, commandLine("delete", pchannel))
}

// staleTermClearing is the tool's ownership of a pchannel whose record
// carries a term above it, which fences every owner's writes, the tool's
// too. Delete clears it (Owned.DeleteAnyTerm: still fenced by the tool's
// ownership, and of whatever record is there at the moment). A write is
// refused unless forced: judged against a record a node may overwrite
// meanwhile (a node on a plain Catalog holds no owner key), replacing it
// could lower the checkpoint; forced, it is replaced in one write
// (Owned.ReplaceAnyTerm).
type staleTermClearing struct {
	*etcdcatalog.Owned
	storedTerm uint64
	force      bool
	cleared    bool
}

func (o *staleTermClearing) Delete(ctx context.Context, pchannel string) error {
	if err := o.DeleteAnyTerm(ctx, pchannel); err != nil {
		return err
	}
	o.cleared = true
	return nil
}

func (o *staleTermClearing) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if o.cleared {
		return o.Owned.Save(ctx, pchannel, id)
	}
	return o.Replace(ctx, pchannel, id)
}

func (o *staleTermClearing) Replace(ctx context.Context, pchannel string, id wal.MessageID) error {
	if !o.cleared && !o.force {
		return refused("%s: its record's term %d is above the tool's own (%d): it was written before an etcd restore "+
			"reset the terms, or copied from another cluster, and fences every owner's saves: %s clears it, "+
			"or --force replaces it", shown(pchannel), o.storedTerm, o.Term(), commandLine("delete", pchannel))
	}
	if err := o.ReplaceAnyTerm(ctx, pchannel, id); err != nil {
		return err
	}
	o.cleared = true
	return nil
}

// badName is the catalog a write to the record under a pchannel name no
// node takes goes through. Save refuses such a name, and Delete the empty
// one, as the contract has it, so its Delete is etcdcatalog's
// DeleteBadName, which takes them all; a Save stays refused, and only
// delete reaches it.
type badName struct{ *etcdcatalog.Catalog }

func (c badName) Delete(ctx context.Context, pchannel string) error {
	return c.DeleteBadName(ctx, pchannel)
}

// replaceRecord writes id in place of pchannel's record, as a lowering or
// a replacement must (Save refuses them), in one write: there is no
// moment, nor a crash, that finds the record gone, as there was between a
// delete and a save. Every catalog the tool writes through can.
func (s *store) replaceRecord(ctx context.Context, c persistence.Catalog, pchannel string, id wal.MessageID) error {
	r, ok := c.(replacer)
	if !ok {
		return fmt.Errorf("%s: %T cannot replace a record in one write", shown(pchannel), c)
	}
	return r.Replace(ctx, pchannel, id)
}

// replacer is a catalog that replaces a record in one write, whatever is
// stored (persistence.Bolt, etcdcatalog's Catalog and Owned).
type replacer interface {
	Replace(ctx context.Context, pchannel string, id wal.MessageID) error
}

// outcomeError is a failed write that says what it left of the record:
// cutShort adds nothing to it.
type outcomeError struct{ error }

func (e *outcomeError) Unwrap() error { return e.error }

// cutShort is err, of a write of pchannel that the command's end (its
// --timeout, a signal) cut short, with the step (doing: "writing") and
// what the write left of the record (done: "written"); another err as it
// is. sent: the write was handed to the catalog. A bbolt write looks at
// the context only before its transaction, which nothing cuts short once
// begun: cut, it did nothing. On etcd a transaction cut short may have
// been applied all the same, and only a read tells.
func (s *store) cutShort(ctx context.Context, err error, pchannel, doing, done string, sent bool) error {
	var said *outcomeError
	if err == nil || ctx.Err() == nil || !errors.Is(err, ctx.Err()) || errors.As(err, &said) {
		return err
	}
	left := "nothing " + done
	if sent && s.etcd != nil {
		left = fmt.Sprintf("it may or may not have been %s: %s shows which", done, commandLine("get", pchannel))
	}
	// As restore's: the cause names the --timeout, or the signal.
	return &outcomeError{fmt.Errorf("%s %s: %w; %s", doing, shown(pchannel), context.Cause(ctx), left)}
}

func (s *store) close() {
	if s.session != nil {
		// Not the session's Close, which revokes under the session's
		// own context, the command's, which may be over (the lease, and
		// the tool's owner keys, would then stay for the session's
		// TTL), in one call that a member answering nothing holds. A
		// lease etcd no longer knows has ended, and its keys with it
		// (the command was stopped, Ctrl-Z, past its TTL): no error.
		ctx, cancel := context.WithTimeout(s.grace, cleanupGrace)
		err := s.etcd.CloseSession(ctx, s.session)
		if err != nil {
			// Else the same command run again finds its owner keys.
			fmt.Fprintf(s.stderr, "warning: this command's etcd lease %x was not revoked (%v): what it owned "+
				"stays held for up to %d s, and a write to it until then is refused\n", s.session.Lease(), err, sessionTTL)
		}
		cancel()
	}
	_ = s.cat.Close()
	s.end()
}

// read opens the catalog read-only and reads every record (see entries);
// the caller closes the store.
func (e *env) read(ctx context.Context) (*store, map[string]persistence.Entry, []persistence.Entry, error) {
	s, err := e.open(ctx, readOnly)
	if err != nil {
		return nil, nil, nil, err
	}
	byName, list, err := s.entries(ctx)
	if err != nil {
		s.close()
		return nil, nil, nil, err
	}
	return s, byName, list, nil
}

// entries reads every record, keyed by pchannel, and in order.
func (s *store) entries(ctx context.Context) (map[string]persistence.Entry, []persistence.Entry, error) {
	list, err := s.cat.Inspect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", s.url, err)
	}
	byName := make(map[string]persistence.Entry, len(list))
	s.named = nil
	for i, e := range list {
		if m := new(*persistence.MisplacedRecordError); errors.As(e.Err, m) {
			s.named = append(s.named, misplacedEntry{key: e.PChannel, MisplacedRecordError: *m})
		}
		if i > 0 && i%ctxEvery == 0 && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("read %s: %w", s.url, ctx.Err())
		}
		// A name no node can use comes first, whatever the record holds:
		// only delete --quoted can do anything with it.
		if err := persistence.ValidatePChannel(e.PChannel); err != nil {
			bad := &badNameError{err: err}
			if errors.As(e.Err, new(*persistence.MisplacedRecordError)) {
				bad.held = e.Err // a key damaged out of the names a node takes
			}
			e.Err = bad
			list[i] = e
		} else if e.Err == nil {
			if _, err := wal.Marshal(e.Checkpoint); err != nil {
				// An ID of a registered WAL that does not read back or
				// cannot be compared with itself, stored by an older
				// build: a node recovers from it, and then no save over
				// it succeeds. It is reported as the corrupt record it is.
				e.Err = err
			}
			list[i] = e
		}
		byName[e.PChannel] = e
	}
	// A record copied under a name further off than a byte names no one
	// by its key; the names stored may: the one, if only one, its check
	// names.
	for _, m := range s.named {
		if m.WrittenFor != "" {
			continue
		}
		var owners []string
		for name := range byName {
			if name != m.key && persistence.ValidatePChannel(name) == nil && m.Names(name) {
				owners = append(owners, name)
			}
		}
		if len(owners) == 1 {
			m.WrittenFor = owners[0]
		}
	}
	return byName, list, nil
}

// badNameError marks a record stored under a name lowwater refuses, which
// another writer or an older build may have written: no node can load or
// save it, a dump could not carry it (JSON rewrites bytes that are not
// UTF-8), and restore would refuse it. It counts as unreadable, as a
// corrupt record does; get and delete --quoted reach it. held is the
// record's own error when it is another pchannel's, whose key damage made
// a name no node takes: what it holds is that pchannel's.
type badNameError struct{ err, held error }

func (e *badNameError) Error() string { return e.err.Error() }
func (e *badNameError) Unwrap() []error {
	if e.held == nil {
		return []error{e.err}
	}
	return []error{e.err, e.held}
}

// owner is the owner key of pchannel on etcd, none on bbolt, whose file
// lock keeps nodes out.
func (s *store) owner(ctx context.Context, pchannel string) (holder, error) {
	switch {
	case s.etcd == nil:
		return holder{}, nil
	case s.known != nil:
		o, ok := s.known[pchannel]
		if !ok {
			return holder{}, nil
		}
		return s.withLease(ctx, o), nil
	}
	o, err := s.etcd.OwnerOf(ctx, pchannel)
	if err != nil {
		return holder{}, err
	}
	return s.withLease(ctx, o), nil
}

// holder is an owner key as the tool judges it: with what etcd says of
// its lease, in whole seconds as etcd counts them; both are 0 when etcd
// did not say, or the key has no lease.
type holder struct {
	etcdcatalog.Owner
	left, granted int64
}

// withLease reads what etcd says of o's lease. A holder that is alive
// renews its lease a third of its TTL apart (concurrency.Session); one
// whose lease has run down past two thirds of its TTL has not for a while
// (lapsing), and one that says it is the tool with a lease of any TTL but
// the tool's is not the tool (toolHold). Unknown, it is judged on its key
// alone.
func (s *store) withLease(ctx context.Context, o etcdcatalog.Owner) holder {
	h := holder{Owner: o}
	if o.Lease == clientv3.NoLease {
		return h
	}
	// A lease that has run out reads 0 until etcd removes it, with its
	// keys, a moment later.
	if resp, err := s.etcd.Client().TimeToLive(ctx, o.Lease); err == nil && resp.TTL >= 0 && resp.GrantedTTL > 0 {
		h.left, h.granted = resp.TTL, resp.GrantedTTL
	}
	return h
}

// inProcessOnly refuses spec, a memory catalog: it lives inside the
// process that made it, and the tool is another process.
func inProcessOnly(spec string) error {
	return usagef("--catalog %q: a memory catalog lives inside one process; use bolt:PATH or etcd://HOST:PORT/PREFIX", catalogurl.Redacted(spec))
}

// lapsing reports a lease that is not being renewed: its holder looks
// gone (killed, or cut off from etcd), and lets go when the lease ends.
// etcd counts whole seconds, down: a live holder's lease, renewed a third
// of its TTL ago, reads a second less than the two thirds left, and only
// a lease below a third of its TTL is taken for one not renewed.
func (o holder) lapsing() bool { return o.granted > 0 && 3*o.left < o.granted }

// namedOwner is the owner key of one pchannel.
type namedOwner struct {
	pchannel string
	etcdcatalog.Owner
}

// discardCreated removes the bbolt file the command made, before close
// lets go of its lock: a restore that wrote nothing (every record
// refused, the first write failed) makes no new, empty catalog of a
// mistyped path.
//
// Through a symbolic link the operator made, the file made is the link's
// target: it goes, and the link stays.
func (s *store) discardCreated() {
	if s.aside != "" {
		_ = os.Remove(s.aside)
		// And the name its own creation made it under, if cut short
		// there: a creation left running on its goroutine may still
		// leave one, which creation.RemoveStale takes later.
		dir, prefix := filepath.Dir(s.aside), creation.TempPrefix(s.aside)
		if entries, err := os.ReadDir(dir); err == nil {
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), prefix) {
					_ = os.Remove(filepath.Join(dir, e.Name()))
				}
			}
		}
		s.aside = ""
	}
	if s.created {
		made := s.url.Path
		if target, err := filepath.EvalSymlinks(made); err == nil {
			made = target
		}
		_ = os.Remove(made)
		s.created = false
	}
}

// asideOf is a name free now beside the path a new bbolt file for path is
// made at (creation.Path), under the prefix of the catalog's own
// creations, so that a node's open of path removes one a killed restore
// left; and that path. Both are "" where the file is made in place: a
// directory that cannot be written to, or a path whose links cannot be
// followed, is then named by the open's own error.
func asideOf(path string) (aside, at string) {
	at, ok := creation.Path(path)
	if !ok {
		return "", ""
	}
	// What restores killed before left: a node's first open would take
	// it too, but there may be none for a while.
	creation.RemoveStale(at)
	f, err := os.CreateTemp(filepath.Dir(at), creation.TempPrefix(at))
	if err != nil {
		return "", ""
	}
	aside = f.Name()
	_ = f.Close()
	// The open makes the store whole there; an empty file it would
	// refuse as a truncated catalog.
	if err := os.Remove(aside); err != nil {
		return "", ""
	}
	return aside, at
}

// place gives the new bbolt file built aside its path, once every record
// is in it, and durably: every write has committed, and the store, still
// open and locked, writes nothing more before it closes. A file that
// appeared at the path meanwhile is left as it is, and the new one
// discarded.
func (s *store) place() error {
	if s.aside == "" {
		return nil
	}
	err := os.Link(s.aside, s.placeAt)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// A file system without hard links: renamed, unless a file is
		// there, in one step where the system can, else after a look.
		err = renameNoReplace(s.aside, s.placeAt)
		if errors.Is(err, errNoReplace) {
			err = fs.ErrExist
			if _, statErr := os.Lstat(s.placeAt); errors.Is(statErr, fs.ErrNotExist) {
				err = os.Rename(s.aside, s.placeAt)
			}
		}
	}
	if err != nil {
		s.discardCreated()
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s appeared while the restore wrote a new file for it: that file is left as it is, and the one "+
				"restored discarded; nothing written", s.url.Path)
		}
		return fmt.Errorf("placing the restored file at %s: %w; nothing written", s.url.Path, err)
	}
	_ = os.Remove(s.aside)
	s.aside = ""
	if dir, err := os.Open(filepath.Dir(s.placeAt)); err == nil {
		err = dir.Sync()
		_ = dir.Close()
		if err != nil {
			return fmt.Errorf("the restored file is at %s, but syncing its directory failed: %w; a crash before the "+
				"system syncs it may lose the file's name: sync it (sync -f %s)", s.url.Path, err, shell.Word(filepath.Dir(s.placeAt)))
		}
	}
	return nil
}

// errNoReplace is renameNoReplace's where the system cannot rename
// without replacing in one step.
var errNoReplace = errors.New("no rename that refuses to replace")

// knowOwners reads every owner key at once, for owner to answer from:
// a node that takes a pchannel later is met by the write's own TryOwn.
func (s *store) knowOwners(ctx context.Context) error {
	all, err := s.owners(ctx)
	if err == nil && all == nil && s.etcd != nil {
		all = map[string]etcdcatalog.Owner{}
	}
	s.known = all
	return err
}

// owners returns the owner keys by pchannel; none on bbolt.
func (s *store) owners(ctx context.Context) (map[string]etcdcatalog.Owner, error) {
	if s.etcd == nil {
		return nil, nil
	}
	all, err := s.etcd.Owners(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.url, err)
	}
	return all, nil
}

// foreignOwners returns the owner keys of all that have a lease but not a
// node's value (etcdcatalog.Owner.Foreign), sorted by pchannel.
func foreignOwners(all map[string]etcdcatalog.Owner) []namedOwner {
	var out []namedOwner
	for p, o := range all {
		if o.Foreign {
			out = append(out, namedOwner{pchannel: p, Owner: o})
		}
	}
	slices.SortFunc(out, func(a, b namedOwner) int { return strings.Compare(a.pchannel, b.pchannel) })
	return out
}

// leaselessOwners returns the owner keys of all with no lease, sorted by
// pchannel.
func leaselessOwners(all map[string]etcdcatalog.Owner) []namedOwner {
	var out []namedOwner
	for p, o := range all {
		if o.Leaseless() {
			out = append(out, namedOwner{pchannel: p, Owner: o})
		}
	}
	slices.SortFunc(out, func(a, b namedOwner) int { return strings.Compare(a.pchannel, b.pchannel) })
	return out
}

// fencedOwners returns the owners of all, with their records among
// entries, whose record carries a term above their own, one of the
// fencing ones aside: their next save is refused, and they stop saving.
// An owner writes under its term, which is above every term stored
// before it took the pchannel, so such a record came from another
// cluster, or from before a restore of etcd.
func fencedOwners(entries, fencing []persistence.Entry, all map[string]etcdcatalog.Owner) []fencedOwner {
	var out []fencedOwner
	for _, en := range entries {
		o, owned := all[en.PChannel]
		if en.Err == nil && owned && !o.Leaseless() && en.Term > o.Term &&
			!slices.ContainsFunc(fencing, func(f persistence.Entry) bool { return f.PChannel == en.PChannel }) {
			out = append(out, fencedOwner{Entry: en, owner: o})
		}
	}
	return out
}

// fencedOwner is a record whose term is above its owner's.
type fencedOwner struct {
	persistence.Entry
	owner etcdcatalog.Owner
}

// strayKeys returns the keys under the prefix's wal/ that are neither a
// record nor an owner key (etcdcatalog.Catalog.StrayKeys); none on bbolt.
func (s *store) strayKeys(ctx context.Context) ([]string, error) {
	if s.etcd == nil {
		return nil, nil
	}
	keys, err := s.etcd.StrayKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.url, err)
	}
	return keys, nil
}

// strayDir is where verify looks for stray keys, as the tool shows it.
func (s *store) strayDir() string { return shown(s.url.Prefix + "/wal/") }

// warnStray says on stderr, for list and dump, which show records alone,
// that stray keys exist: else something else writing among the catalog's
// keys would go unseen until verify was run for another reason.
func (s *store) warnStray(ctx context.Context) error {
	keys, err := s.strayKeys(ctx)
	if err == nil && len(keys) > 0 {
		fmt.Fprintf(s.stderr, "warning: %s under %s (neither a record nor an owner key): run verify\n",
			count(len(keys), "stray key"), s.strayDir())
	}
	return err
}

// checkOwner refuses ch, a write to pchannel, if a node owns it, unless
// force. A write is warned once, by write itself; for a dry run,
// checkOwner returns the warning the write would give, for the caller to
// print where the write would.
func (s *store) checkOwner(ctx context.Context, pchannel string, ch change, force bool) (dryWarning string, err error) {
	o, err := s.owner(ctx, pchannel)
	switch {
	case err != nil:
		return "", err
	case o.Term == 0:
		return "", nil
	case !force:
		return "", ownedRefusal(pchannel, o)
	case s.dry:
		return ownedWarning(pchannel, o, ch, ch.anyway(true)), nil
	}
	return "", nil
}

// warn prints w, a warning, on stderr, if there is one.
func (s *store) warn(w string) {
	if w != "" {
		fmt.Fprintln(s.stderr, w)
	}
}

// alsoOwned adds to err, a refusal of a write to pchannel for what it
// would write (plan), that a node owns the pchannel too, if one does:
// else the operator learnt it only from --force's warning, once the write
// had gone around the node. Any other error is returned as it is.
func (s *store) alsoOwned(ctx context.Context, pchannel string, err error) error {
	var ee *exitError
	if s.etcd == nil || !errors.As(err, &ee) || ee.code != ExitRefused {
		return err
	}
	o, oerr := s.owner(ctx, pchannel)
	if oerr != nil || o.Term == 0 {
		return err
	}
	return refused("%w\n%s", ee.err, owned(pchannel, o))
}

// ownedRefusal refuses an unforced write to a pchannel under owner o. An
// owner key with no lease is no node's, and is refused all the same: the
// tool cannot tell what put it there, nor why, and --force is the
// operator's word that writing around it is meant.
func ownedRefusal(pchannel string, o holder) error { return refused("%s", owned(pchannel, o)) }

// owned says who holds pchannel under owner o, and what a write to it
// needs.
func owned(pchannel string, o holder) string {
	switch {
	case o.Leaseless():
		return fmt.Sprintf("%s: %s; --force writes around it", shown(pchannel), leaseless(pchannel, o.Term))
	case o.toolHold():
		return fmt.Sprintf("%s is held by %s: %s; try again then, or --force", shown(pchannel), shownText(o.Holder), o.ends())
	case o.lapsing():
		return fmt.Sprintf("%s is owned by %s: %s; wait, or --force", shown(pchannel), o.node(), o.ends())
	}
	return fmt.Sprintf("%s is owned by %s: stop it, or --force", shown(pchannel), o.node())
}

// ownedWarning is the warning of ch, a forced write, doing it, to a
// pchannel under owner o.
func ownedWarning(pchannel string, o holder, ch change, doing string) string {
	switch {
	case o.Leaseless():
		return fmt.Sprintf("warning: %s: %s; %s", shown(pchannel), leaseless(pchannel, o.Term), doing)
	case o.toolHold():
		return fmt.Sprintf("warning: %s is held by %s; %s", shown(pchannel), shownText(o.Holder), doing)
	case ch.act != remove && ch.en != nil && ch.en.Err == nil && ch.en.Term > o.Term:
		// A write keeps the stored term (etcdcatalog's carriedTerm); a
		// delete takes it away, and the node's next save goes through.
		return fmt.Sprintf("warning: %s is owned by %s; %s: the node's saves are refused all the same, "+
			"as the record's term (%d) is above its own: restart the node", shown(pchannel), o.node(), doing, ch.en.Term)
	case o.lapsing():
		return fmt.Sprintf("warning: %s is owned by %s; %s: should it still run, %s", shown(pchannel), o.node(), doing, ch.aroundNode())
	}
	return fmt.Sprintf("warning: %s is owned by %s; %s: %s", shown(pchannel), o.node(), doing, ch.aroundNode())
}

// node names the node that holds a pchannel under o, by the holder its key
// names if it names one.
func (o holder) node() string {
	if o.Foreign {
		return fmt.Sprintf("a key that is not a node's (term %d, lease %x)", o.Term, int64(o.Lease))
	}
	running := "a running node"
	if o.lapsing() {
		running = "a node that looks gone"
	}
	if o.Holder == "" {
		return fmt.Sprintf("%s (term %d)", running, o.Term)
	}
	return fmt.Sprintf("%s, %s (term %d)", running, shownText(o.Holder), o.Term)
}

// goes says when an owner key that no node renews goes (etcdcatalog.
// Owner.Foreign): with its lease, which whoever put it may renew.
func (o holder) goes() string {
	switch {
	case o.granted > 0 && o.left == 0:
		return "within moments, its lease run out"
	case o.granted > 0:
		return fmt.Sprintf("within %d s unless its lease is renewed", o.left)
	}
	return "when its lease ends"
}

// ends says when the hold of a holder that is not renewing it, the tool
// or a node that looks gone, ends: with its lease.
func (o holder) ends() string {
	left := o.left
	if o.granted == 0 {
		left = sessionTTL // etcd did not say: the tool's own is at most that
	}
	switch {
	case left == 0:
		return "its lease has run out, and etcd removes its hold within moments"
	case o.toolHold():
		return fmt.Sprintf("it lets go as that command ends, or within %d s if it was killed", left)
	}
	return fmt.Sprintf("its lease is not being renewed, and ends within %d s", left)
}

// toolHolderPrefix begins the holder the tool names in the owner keys it
// puts (etcdcatalog.WithHolder): "lowwater-cli set, pid 5123 on ops-1".
// A hold of the tool's is then told from a node's: one left by a command
// that was killed, or could not release it, ends within sessionTTL, and
// waiting is the remedy, where a node's needs the node stopped.
const toolHolderPrefix = "lowwater-cli "

// toolHolder is the holder of the tool running command.
func toolHolder(command string) string {
	return toolHolderPrefix + command + ", " + etcdcatalog.DefaultHolder()
}

// toolHold reports whether the tool put owner key o: it names the tool,
// and its lease has the tool's TTL, when etcd said what it was.
func (o holder) toolHold() bool {
	return strings.HasPrefix(o.Holder, toolHolderPrefix) && (o.granted == 0 || o.granted == sessionTTL)
}

// leaseless says what an owner key of term with no lease is: a node's
// always has one, its session's, and goes with it; this one stays, and
// keeps every node off the pchannel, until an operator removes it.
func leaseless(pchannel string, term uint64) string {
	return fmt.Sprintf("its owner key (term %d) has no lease: put by hand or by another tool, not by a node, "+
		"it never expires, and no node can own %s until %s removes it", term, shown(pchannel), commandLine("release", pchannel))
}

// commandLine is the command verb (release, get) of pchannel as a shell
// takes it: the name as it is when the tool takes it so, and otherwise
// quoted behind --quoted (a name shown quoted, copied as shown, was
// another name, whose owner the tool reported as none).
func commandLine(verb, pchannel string) string {
	if name := typed(pchannel); name != pchannel {
		return verb + " --quoted " + shell.Quote(name)
	}
	if strings.HasPrefix(pchannel, "-") {
		// Else the name reads as a flag.
		return "'" + verb + " -- " + pchannel + "'"
	}
	return "'" + verb + " " + pchannel + "'"
}

// write runs fn with the catalog to write pchannel through. On etcd that
// is an ownership taken for the call, so that no node takes the pchannel
// while the tool writes it and every write is fenced; a pchannel a node
// owns is refused, unless force, which writes around the owner. On bbolt
// the file lock already keeps nodes out.
//
// The term of the record the command read (ch.en) matters: one above the
// tool's own term was written before an etcd restore reset the terms, or
// copied from another cluster: it fences every owner's writes, the
// tool's too, and clearing it is the operator's remedy (staleTermClearing).
func (s *store) write(ctx context.Context, pchannel string, ch change, force bool, fn func(persistence.Catalog) error) error {
	if s.etcd == nil {
		return fn(s.cat)
	}
	if persistence.ValidatePChannel(pchannel) != nil {
		// delete --quoted of a name no node takes: no session can own
		// it, so there is no owner to ask or to take, and a record there
		// was put by hand or by another tool, or its key was damaged.
		return fn(badName{s.etcd})
	}
	if s.session == nil {
		// The session lives as long as what the write owes (grace), not
		// the command's context: the release and the revoke come after.
		session, err := concurrency.NewSession(s.etcd.Client(), concurrency.WithTTL(sessionTTL), concurrency.WithContext(s.grace))
		if err != nil {
			return fmt.Errorf("etcd session: %w", err)
		}
		s.session = session
	}
	owned, err := s.etcd.TryOwn(ctx, pchannel, s.session)
	err = s.leaseRanOut(pchannel, err)
	var oe *etcdcatalog.OwnedError
	switch {
	case errors.As(err, &oe) && force:
		o := s.withLease(ctx, etcdcatalog.Owner{Term: oe.Term, Lease: oe.Lease, Holder: oe.Holder})
		fmt.Fprintln(s.stderr, ownedWarning(pchannel, o, ch, ch.anyway(false)))
		return fn(s.cat)
	case errors.As(err, &oe):
		return ownedRefusal(pchannel, s.withLease(ctx, etcdcatalog.Owner{Term: oe.Term, Lease: oe.Lease, Holder: oe.Holder}))
	case err != nil:
		return err
	}
	var c persistence.Catalog = owned
	if storedTerm := termOf(ch.en); storedTerm > owned.Term() {
		c = &staleTermClearing{Owned: owned, storedTerm: storedTerm, force: force}
	}
	werr := s.leaseRanOut(pchannel, fn(c))
	// Not Close, which gives the release a budget of its own.
	if err := owned.Release(s.grace); err != nil {
		// The write stands whatever came of the release: failing it
		// would report a record written as not, and a restore would
		// leave it off the list of those it wrote. The hold ends with
		// the tool's lease, revoked as it exits, or at the lease's end.
		fmt.Fprintf(s.stderr, "warning: %s: the tool's hold on it was not released (%v): no node can take it "+
			"until this command's etcd lease ends, within %d s\n", shown(pchannel), err, sessionTTL)
	}
	return werr
}

// misplacedBeside is why a node of pchannel, which has nothing stored,
// would not start on this bbolt file: it holds a record that is, or may
// be, pchannel's own under a damaged key (Bolt.Load fails over it). Empty
// when nothing stops it, or the catalog is not a bbolt file. The entries
// must have been read (entries).
func (s *store) misplacedBeside(ctx context.Context, pchannel string) string {
	if s.bolt == nil {
		return ""
	}
	named := len(s.writtenFor(pchannel)) > 0
	if !named && s.misplaced != nil {
		return *s.misplaced
	}
	_, err := s.bolt.Load(ctx, pchannel)
	var ce *persistence.CorruptRecordError
	cause := ""
	switch {
	case errors.As(err, &ce):
		cause = shownText(ce.Err.Error())
	case err != nil:
		return "" // not known: the write finds out
	}
	if !named {
		s.misplaced = &cause
	}
	return cause
}

// misplacedEntry is a whole misplaced record, and the key it is under.
type misplacedEntry struct {
	key string
	*persistence.MisplacedRecordError
}

// writtenFor is every whole misplaced record written for pchannel, by
// its name check.
func (s *store) writtenFor(pchannel string) []misplacedEntry {
	var mine []misplacedEntry
	for _, m := range s.named {
		if m.Names(pchannel) {
			mine = append(mine, m)
		}
	}
	return mine
}

// heldFor says what the records written for pchannel under other keys
// hold, for a message that says why it is held back: Load names one of
// them, by its key alone, and the highest may be another.
func (s *store) heldFor(pchannel string) string {
	mine := s.writtenFor(pchannel)
	if len(mine) == 1 {
		return "; it holds " + holding(mine[0].MisplacedRecordError)
	}
	var held []string
	for _, m := range mine {
		held = append(held, fmt.Sprintf("%s holds %s", typed(m.key), holding(m.MisplacedRecordError)))
	}
	if len(held) == 0 {
		return ""
	}
	return "; " + count(len(held), "record") + " written for it: " + strings.Join(held, ", ")
}

// heldPartition is id, parsed from text, for a pchannel with nothing
// stored: a Pulsar ID written without its partition takes the one of the
// records written for it under other keys, when they all name one, as it
// would take the stored one (withStoredPartition). Parsed as partition
// 0, the repair the tool advises moved the consumers' partition.
func (s *store) heldPartition(pchannel string, id wal.MessageID, text string) wal.MessageID {
	p, ok := id.(wal.PulsarID)
	if !ok || strings.Contains(text, "@") {
		return id
	}
	found := false
	for _, m := range s.writtenFor(pchannel) {
		held, ok := m.Checkpoint.(wal.PulsarID)
		switch {
		case !ok:
		case found && held.Partition != p.Partition:
			return id // they disagree: which one is for the operator to say
		default:
			p.Partition, found = held.Partition, true
		}
	}
	if !found {
		return id
	}
	return p
}

// warnBeside warns of each record written for pchannel under another key
// that holds what id does not reach: written as a repair (createBeside),
// id lowers what the pchannel had, or leaves its partition or WAL.
func (s *store) warnBeside(w io.Writer, pchannel string, id wal.MessageID) {
	for _, m := range s.writtenFor(pchannel) {
		held := m.Checkpoint
		if held == nil {
			fmt.Fprintf(w, "warning: %s: the record under %s, written for it, holds %s: read it with a build that "+
				"knows that WAL before writing over it\n", shown(pchannel), typed(m.key), holding(m.MisplacedRecordError))
			continue
		}
		c, ok := order(id, held)
		switch {
		case ok && c >= 0:
		case ok:
			fmt.Fprintf(w, "warning: %s: the record under %s, written for it, holds %s: %s\n",
				shown(pchannel), typed(m.key), shownID(held), replay(held, id))
		default:
			fmt.Fprintf(w, "warning: %s: the record under %s, written for it, holds %s, which %s does not follow "+
				"(another WAL or partition): its consumers lose their place\n", shown(pchannel), typed(m.key), shownID(held), shownID(id))
		}
	}
}

// create is the action of a write of pchannel, which has nothing stored:
// beside a record that may be its own under a damaged key, which Save
// refuses to write past, it needs force, and is written as a repair.
func (s *store) create(ctx context.Context, pchannel string, force bool) (action, error) {
	cause := s.misplacedBeside(ctx, pchannel)
	switch {
	case cause == "":
		return create, nil
	case !force:
		return 0, refused("%s: %s; --force writes it all the same", shown(pchannel), cause)
	}
	return createBeside, nil
}
