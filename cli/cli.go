// Package cli is the lowwater operator tool, cmd/lowwater: list, show and
// verify the checkpoints a catalog stores, raise, lower or delete one by
// hand, and move a whole catalog between bbolt and etcd.
//
// It is a package so that a program with WALs of its own can build its own
// tool: register them, then hand over to Main, and every command reads,
// parses and writes their IDs as it does the built-in ones.
//
//	func main() {
//		if err := wal.Register("pglsn", lsnCodec); err != nil {
//			log.Fatal(err)
//		}
//		os.Exit(cli.Main(context.Background(), os.Args[1:],
//			os.Getenv, os.Stdin, os.Stdout, os.Stderr))
//	}
//
// Run `lowwater --help` for the commands, their flags and exit codes.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"golang.org/x/term"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
)

// The exit codes of Main, as --help documents them.
const (
	ExitOK = 0
	// ExitFailed: the catalog, or the command's file (dump, restore) or
	// output, could not be read or written.
	ExitFailed = 1
	// ExitUsage: a bad command line (flags, arguments, pchannel name, ID
	// text, WAL), or a restore file that is not a dump.
	ExitUsage = 2
	// ExitCorrupt: unreadable records (verify, dump), a damaged bbolt
	// file, or any other finding of verify.
	ExitCorrupt = 3
	// ExitRefused: a write refused for safety (owner, lowering, WAL
	// switch, corrupt or incomparable ID, a Kafka sentinel, a damaged
	// meta page); a dump over a file, or one restore could not read back.
	ExitRefused = 4
	// ExitNotFound: get found nothing stored for the pchannel.
	ExitNotFound = 5
	// ExitInterrupted is a command that failed once its context was
	// cancelled (Ctrl-C, SIGTERM, SIGHUP): cut short, as its message says.
	ExitInterrupted = 130
)

const usage = `usage: lowwater [--catalog URL] COMMAND [ARGS]

Reads and repairs the checkpoints a lowwater catalog stores. One
command's usage alone: lowwater help COMMAND, or lowwater COMMAND --help.

Catalog URL (--catalog, or $LOWWATER_CATALOG):
  bolt:PATH                       a bbolt file; a running node holds its lock,
                                  so stop the node first (reads wait
                                  --lock-timeout, then fail)
  etcd://HOST:PORT[,HOST:PORT]/P  etcd, keys under prefix P (default lowwater)

Commands:
  list [--json]            every pchannel: WAL, checkpoint, owner term and
                           record version
  get PCHANNEL             one pchannel's record (and its owner, on etcd)
  verify                   decode every record; report the corrupt ones,
                           those under another pchannel's name (a damaged
                           key), those that hold a Kafka sentinel (kafka:-1),
                           those under a name no node can use, and on
                           etcd those whose term fences every owner, the
                           owner keys with no lease or not a node's, and
                           the stray keys under P/wal/: neither a record
                           nor an owner key, another writer's (list and
                           dump warn of them)
  set PCHANNEL ID          store ID (kafka:123, rocksmq:9, pulsar:L:E:B[@P],
                           without @P the stored partition, or a
                           misplaced record's for it, woodpecker:S:E).
                           A bare number (123) is read in the WAL
                           stored for PCHANNEL. Raises only: lowering,
                           or a switch of WAL, needs --force and prints
                           what it costs consumers (a replay, a lost
                           position).
                           Another Pulsar partition needs --force too.
                           The bbolt file must exist: a mistyped path is
                           not made into a new, empty catalog
  delete PCHANNEL          retire a pchannel: its record is removed. One a
                           node would recover from needs --force: a node
                           then starts from its vchannels' checkpoints
  release PCHANNEL         on etcd, remove an owner key with no lease: put
                           by hand or by another tool, not by a node, it
                           never expires and keeps every node off
                           PCHANNEL (get shows it); a node's is refused.
                           Takes --dry-run, not --force
  dump [FILE]              write every record as JSON (stdout: no FILE, or -).
                           A bbolt file whose newest meta page is damaged
                           is refused (what it reads as may be older than
                           what was saved), unless --force.
                           --salvage: of a damaged bbolt file, every
                           record its pages still hold whole, read
                           without bbolt, for restore into a new file
  restore FILE             write the records of a dump (stdin: -); raises
                           only, as set; creates a bbolt file that does
                           not exist, whole or not at all. A dump holds
                           1 GiB at most. On bbolt the writes share
                           commits; on etcd each record is one write, so
                           a big dump needs a longer --timeout (run
                           again, it goes on)
  version                  the tool's lowwater version and Go (also
                           --version)

Write flags (set, delete, restore), after the command:
  --dry-run  check everything and say what would change; write nothing
  --force    also lower a checkpoint, delete a readable one, replace a
             corrupt record, one of another WAL or one whose ID cannot be
             compared with the new one, and write a pchannel an etcd owner
             holds

Common flags:
  --catalog URL         the catalog
  --timeout D           bound on the whole command (default 30s): a
                        write it cuts may have left something, as its
                        message says; within 1s past it, on etcd, the
                        tool gives back what it took (an owner key, a
                        session) and finds out why etcd did not answer
  --lock-timeout D      wait for a bbolt file lock (default 1s)
  --bucket NAME         the bbolt bucket of the records (default
                        lowwater-checkpoints; persistence.WithBucket)

etcd over TLS, or with authentication (each flag also read from the
variable beside it):
  --etcd-cacert FILE    verify etcd's certificate with this CA (PEM),
                        not the system's          $LOWWATER_ETCD_CACERT
  --etcd-cert FILE      client certificate (PEM)  $LOWWATER_ETCD_CERT
  --etcd-key FILE       its private key (PEM)     $LOWWATER_ETCD_KEY
  --etcd-user NAME      authenticate as NAME      $LOWWATER_ETCD_USER
                        with the password in $LOWWATER_ETCD_PASSWORD
  Any of the first three turns TLS on.

Safety: on etcd a write takes the pchannel's ownership for its duration,
so no node can take it meanwhile, and is refused while a node owns it.
An owner key with no lease is no node's, yet it keeps the pchannel from
every node for good: get says so, --force writes around it, and release
removes it.
Record terms are not restored: a restored record carries the writer's.

Names and IDs that are not plain printable text (a newline, an escape
sequence, a tab, a space) are printed quoted and escaped as Go strings
are: "x\ny" is the name x, newline, y; give it as $'x\ny' in bash.
get, delete and release --quoted take the name quoted, as verify (and
list --json, in "quoted") shows a name no node can use (over 512 bytes,
not UTF-8, a NUL, or empty, which only etcd can hold): delete --quoted
'"a\x00b"', delete --quoted '""'.

Exit codes:
  0  done
  1  a read or write failed: the catalog, a dump file, or the output
  2  bad command line (a --bucket the file lacks, too), or a
     restore FILE that is not a valid dump
  3  damaged file; get, dump: an unreadable record; verify: all it reports
  4  refused: owned, lowering, WAL switch, corrupt, a negative Kafka
     offset, a damaged meta page, a dump FILE that exists, a dump of
     an ID whose text does not read back, a dump over 1 GiB
  5  get: nothing stored
  130  interrupted (Ctrl-C, SIGTERM, SIGHUP): the command was cut short; its
       message says what, and what a write under way may have left
`

// options are the flags every command takes.
type options struct {
	catalog     string
	url         catalogurl.URL // catalog, parsed once Main has it
	timeout     time.Duration
	lockTimeout time.Duration
	etcd        etcdaccess.Access
	bucket      string // bbolt only
	bucketGiven bool   // on the command line, rather than the default
	json        bool
	dryRun      bool
	force       bool
	quoted      bool
	salvage     bool
}

// usageError is a command line the tool cannot run, or a file it names
// that is not what the command takes (a restore of a file that is not a
// dump): the input is wrong, not the catalog.
type usageError struct {
	msg string
	// inFile: what is wrong is in a file, which --help cannot mend.
	inFile bool
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// badFile is a usage error in a file the command line names.
func badFile(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), inFile: true}
}

// exitError carries an exit code other than ExitFailed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func refused(format string, args ...any) error {
	return &exitError{code: ExitRefused, err: fmt.Errorf(format, args...)}
}

// command is one subcommand: its flags beyond the common ones, how many
// arguments it takes, whether the first is a pchannel name, and what it
// does.
type command struct {
	flags    func(fs *flag.FlagSet, o *options)
	min, max int
	// pchannel: the first argument names a pchannel. One no catalog can
	// store (persistence.ValidatePChannel) is a bad command line, said
	// before the catalog is opened, not a catalog failure at Save, or a
	// pchannel get and delete report as not stored.
	pchannel bool
	argsHelp string
	run      func(ctx context.Context, env *env, args []string) error
}

var commands = map[string]command{
	"list":    {flags: jsonFlag, argsHelp: "list [--json]", run: list},
	"get":     {flags: quotedFlag, min: 1, max: 1, pchannel: true, argsHelp: "get [--quoted] PCHANNEL", run: get},
	"verify":  {argsHelp: "verify", run: verify},
	"set":     {flags: writeFlags, min: 2, max: 2, pchannel: true, argsHelp: "set [--dry-run] [--force] PCHANNEL ID", run: set},
	"delete":  {flags: deleteFlags, min: 1, max: 1, pchannel: true, argsHelp: "delete [--dry-run] [--force] [--quoted] PCHANNEL", run: del},
	"release": {flags: releaseFlags, min: 1, max: 1, pchannel: true, argsHelp: "release [--dry-run] [--quoted] PCHANNEL", run: release},
	"dump":    {flags: dumpFlags, max: 1, argsHelp: "dump [--salvage] [--force] [FILE]", run: dump},
	"restore": {flags: writeFlags, min: 1, max: 1, argsHelp: "restore [--dry-run] [--force] FILE|-", run: restore},
}

func jsonFlag(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

func dumpFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.salvage, "salvage", false, "read a damaged bbolt file page by page, without bbolt")
	fs.BoolVar(&o.force, "force", false, "dump a bbolt file whose newest meta page is damaged as it reads")
}

func writeFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.dryRun, "dry-run", false, "write nothing")
	fs.BoolVar(&o.force, "force", false, "override the safety refusals")
}

func quotedFlag(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.quoted, "quoted", false, "PCHANNEL is Go-quoted, as verify shows a name no node can use")
}

func deleteFlags(fs *flag.FlagSet, o *options) {
	writeFlags(fs, o)
	quotedFlag(fs, o)
}

func releaseFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.dryRun, "dry-run", false, "write nothing")
	quotedFlag(fs, o)
}

func commonFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.catalog, "catalog", o.catalog, "catalog URL")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole command")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", o.lockTimeout, "wait for a bbolt file lock")
	fs.StringVar(&o.bucket, "bucket", o.bucket, "the bbolt bucket")
	o.etcd.Register(fs)
}

// Main runs the tool with the command-line arguments args (without the
// program name), reading LOWWATER_CATALOG and the LOWWATER_ETCD_ variables
// through getenv, and returns the exit code. ctx bounds it, as --timeout
// does; a command that fails once ctx is cancelled exits ExitInterrupted.
// stdin is read by `restore -` alone; it may be nil.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := mainCode(ctx, args, getenv, stdin, stdout, stderr)
	if code != ExitOK && errors.Is(ctx.Err(), context.Canceled) {
		return ExitInterrupted
	}
	return code
}

func mainCode(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	stderr = forTerminal(stderr)
	o := options{catalog: getenv("LOWWATER_CATALOG"), timeout: 30 * time.Second, lockTimeout: time.Second, bucket: persistence.DefaultBucket,
		etcd: etcdaccess.FromEnv(getenv)}
	global := flag.NewFlagSet("lowwater", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	commonFlags(global, &o)
	wantVersion := global.Bool("version", false, "print the version")
	err := global.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return help(stdout, stderr)
	}
	if err == nil && *wantVersion {
		if global.NArg() > 0 {
			return fail(stderr, usagef("--version takes no command"))
		}
		return version(stdout, stderr)
	}
	if err != nil {
		if name, ok := commandFlag(err); ok {
			// A command's flag before the command: the common flags are
			// the only ones that go there.
			return fail(stderr, usagef("%s: a command's own flags go after it (lowwater COMMAND --%s …)", dashes(err), name))
		}
		return fail(stderr, usagef("%s", dashes(err)))
	}
	if global.NArg() == 0 {
		return fail(stderr, usagef("no command"))
	}
	name, rest := global.Arg(0), global.Args()[1:]
	switch name {
	case "help":
		if len(rest) == 1 && (isHelpFlag(rest[0]) || rest[0] == "help") {
			return help(stdout, stderr)
		}
		if len(rest) == 1 && (commands[rest[0]].run != nil || rest[0] == "version") {
			return commandHelp(stdout, stderr, rest[0])
		}
		if len(rest) == 1 {
			return fail(stderr, unknownCommand(rest[0]))
		}
		if len(rest) > 0 {
			return fail(stderr, usagef("usage: lowwater help [COMMAND]"))
		}
		return help(stdout, stderr)
	case "version":
		if len(rest) == 1 && isHelpFlag(rest[0]) {
			return commandHelp(stdout, stderr, name)
		}
		if len(rest) > 0 {
			return fail(stderr, usagef("usage: lowwater version"))
		}
		return version(stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		return fail(stderr, unknownCommand(name))
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	commonFlags(fs, &o)
	if cmd.flags != nil {
		cmd.flags(fs, &o)
	}
	pos, err := parseInterspersed(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return commandHelp(stdout, stderr, name)
	}
	if err != nil {
		return fail(stderr, usagef("%s: %s", name, dashes(err)))
	}
	if len(pos) < cmd.min || len(pos) > cmd.max {
		return fail(stderr, usagef("usage: lowwater %s", cmd.argsHelp))
	}
	switch {
	case cmd.pchannel && o.quoted:
		// A record under a name lowwater refuses (another writer's, an
		// older build's) can be read and deleted, not written.
		p, err := strconv.Unquote(pos[0])
		if err != nil || !strings.HasPrefix(pos[0], `"`) {
			return fail(stderr, usagef("%s --quoted: %s is not a Go-quoted string", name, shortQuoted(pos[0])))
		}
		pos[0] = p
	case cmd.pchannel:
		if err := persistence.ValidatePChannel(pos[0]); err != nil {
			return fail(stderr, usagef("%s: %v", name, err))
		}
	}
	if o.catalog == "" {
		return fail(stderr, usagef("no catalog: give --catalog URL or set LOWWATER_CATALOG"))
	}
	if o.url, err = catalogurl.Parse(o.catalog); err != nil {
		if kind, _, _ := strings.Cut(o.catalog, ":"); kind == catalogurl.Memory {
			// "memory:" is no more usable than "memory": say why not.
			return fail(stderr, inProcessOnly(o.catalog))
		}
		if errors.Is(err, catalogurl.ErrCredentials) {
			return fail(stderr, usagef("--catalog: %v; give --etcd-user NAME, and the password in $%s", err, etcdaccess.EnvPassword))
		}
		return fail(stderr, usagef("--catalog: %v", err))
	}
	if cmd.pchannel && pos[0] == "" && o.url.Kind != catalogurl.Etcd {
		// Given --quoted: a key put by hand can hold a record under the
		// empty name on etcd, never on bbolt, which refuses an empty key.
		return fail(stderr, usagef("%s: empty pchannel name, which only an etcd catalog can hold a record under", name))
	}
	if o.timeout <= 0 || o.lockTimeout <= 0 {
		return fail(stderr, usagef("--timeout and --lock-timeout must be positive"))
	}
	given := map[string]bool{}
	for _, set := range []*flag.FlagSet{global, fs} {
		set.Visit(func(f *flag.Flag) { given[f.Name] = true })
	}
	if err := o.etcd.Check(o.url, given); err != nil {
		return fail(stderr, usagef("%v", err))
	}
	switch {
	case given["bucket"] && o.url.Kind != catalogurl.Bolt:
		return fail(stderr, usagef("--bucket is for a bbolt catalog (bolt:PATH)"))
	case o.bucket == "":
		return fail(stderr, usagef("--bucket: empty bucket name"))
	}
	o.bucketGiven = given["bucket"]
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("%w: --timeout %v passed", context.DeadlineExceeded, o.timeout))
	defer cancel()
	out := &stickyWriter{w: stdout}
	e := &env{command: name, opts: o, stdin: stdin, stdout: out, prose: wrappedFor(stdout, out), width: terminalWidth(stdout), stderr: stderr}
	probe := probeAtTimeout(ctx, e)
	defer probe.end() // before cancel, deferred above, ends ctx
	err = cmd.run(ctx, e, pos)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// "context canceled" or "deadline exceeded" alone does not say
		// that the command was cut short, nor by what.
		why := fmt.Sprintf("--timeout %v passed", o.timeout)
		if errors.Is(ctx.Err(), context.Canceled) {
			why = context.Cause(ctx).Error() // "interrupt signal received"
		}
		if !strings.Contains(err.Error(), why) {
			err = fmt.Errorf("%w (%s)", err, why)
		}
	}
	if errors.Is(err, rpctypes.ErrUserEmpty) {
		// etcd's words for a client that gave no user to an etcd with
		// authentication on.
		err = fmt.Errorf("%w: etcd has authentication on: give --etcd-user, and its password in $%s",
			err, etcdaccess.EnvPassword)
	}
	if whys, probed := probeOf(probe, err); probed {
		answered := e.etcdAnswered.Load()
		if why := timeoutHint(o.url.Endpoints, whys, answered); why != "" {
			hint := why // etcd answered, then stopped: why is news
			if !answered {
				hint = fmt.Sprintf("no answer within --timeout %v; %s", o.timeout, why)
			}
			var re *reportedError
			switch {
			case errors.As(err, &re):
				report(stderr, errors.New(hint)) // after the error it printed
			case strings.Contains(err.Error(), "--timeout"):
				err = fmt.Errorf("%w: %s", err, why) // said once is enough
			default:
				err = fmt.Errorf("%w: %s", err, hint)
			}
		}
	}
	if err == nil && out.err != nil {
		// A script reading the output must not take a lost one for success.
		err = fmt.Errorf("the command ran, but writing its output failed: %w", out.err)
	}
	return fail(stderr, err)
}

// dashes is a flag error's text with its flag spelled as --help spells
// it: package flag writes one dash. A one-letter name, which no flag of
// the tool has, keeps the one dash it was most likely typed with. Package
// flag quotes a value it refuses whole, and names an unknown flag whole:
// each is as long as an argument can be, so values are cut as shortQuoted
// cuts them, and names to what shows in 64 bytes.
func dashes(err error) string {
	text := longFlag.ReplaceAllStringFunc(err.Error(), func(m string) string {
		sub := longFlag.FindStringSubmatch(m)
		return sub[1] + "--" + shorten.Cut(sub[2], 64, shownText)
	})
	return quotedValue.ReplaceAllStringFunc(text, func(q string) string {
		if s, err := strconv.Unquote(q); err == nil {
			return shortQuoted(s)
		}
		return q
	})
}

// quotedValue is a Go-quoted string in package flag's errors.
var quotedValue = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// longFlag is a flag named in package flag's errors, two letters or more.
var longFlag = regexp.MustCompile(`(flag |defined: |value "(?:[^"\\]|\\.)*" for )-([^-\s][^\s:]+)`)

// commandFlag reports whether err, from parsing the common flags, names a
// flag that some command takes, and which.
func commandFlag(err error) (string, bool) {
	const undefined = "flag provided but not defined: -"
	name, ok := strings.CutPrefix(err.Error(), undefined)
	if !ok {
		return "", false
	}
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		c.flags(fs, &options{})
		if fs.Lookup(name) != nil {
			return name, true
		}
	}
	return "", false
}

// probe is why etcd did not answer a command, asked of each endpoint as
// soon as the command's --timeout passes (etcdaccess.Access.ProbeAll),
// while the tool gives back what it took on etcd: the two take
// etcdaccess.ProbeTime and cleanupGrace, a second each, side by side
// rather than one after the other. A command cut short before it reached
// for etcd is probed once it has ended, if it reached for etcd by then.
type probe struct {
	ctx  context.Context
	e    *env
	stop func() bool   // stops the probe from starting
	done chan struct{} // closed once the probe ended, or chose not to start
	// whys is each endpoint's answer (etcdaccess.Access.Probe), nil if
	// no probe ran.
	whys []string
}

// probeAtTimeout arms the probe of a command on etcd whose context is
// ctx; nil on another catalog.
func probeAtTimeout(ctx context.Context, e *env) *probe {
	if e.opts.url.Kind != catalogurl.Etcd {
		return nil
	}
	p := &probe{ctx: ctx, e: e, done: make(chan struct{})}
	p.stop = context.AfterFunc(ctx, func() {
		defer close(p.done)
		if p.due() {
			p.whys = e.opts.etcd.ProbeAll(e.opts.url.Endpoints)
		}
	})
	return p
}

// due reports whether the command was cut by its --timeout after it
// reached for etcd.
func (p *probe) due() bool {
	return errors.Is(p.ctx.Err(), context.DeadlineExceeded) && p.e.etcdAsked.Load()
}

// result waits for the probe, if it started, and reports its answers and
// whether it ran: once the command has ended, it runs the probe the
// --timeout did not start. It may be called again, and answers the same.
func (p *probe) result() ([]string, bool) {
	if p == nil {
		return nil, false
	}
	if p.stop() {
		close(p.done) // the command ended before its --timeout
		return nil, false
	}
	<-p.done
	if p.whys == nil && p.due() {
		p.whys = p.e.opts.etcd.ProbeAll(p.e.opts.url.Endpoints)
	}
	return p.whys, p.whys != nil
}

// probeOf is the probe's result for a command that ended with err, run
// only for an error of its --timeout.
func probeOf(p *probe, err error) ([]string, bool) {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return nil, false
	}
	return p.result()
}

// end waits for the probe, if it started, so that none outlives the
// command.
func (p *probe) end() {
	if p != nil && !p.stop() {
		<-p.done
	}
}

// timeoutHint says, of a command on etcd that ran out of --timeout, why
// etcd may not have answered, from the probe of each of endpoints
// (probed), or "" when etcd answers now and had answered some of the
// command's requests (answered): the command may then simply have had
// too much to do. An endpoint that answers is named beside those that do
// not: the command's time may have run out on it, and not on them.
func timeoutHint(endpoints, probed []string, answered bool) string {
	var whys, answering []string
	for i, why := range probed {
		if why == "" {
			answering = append(answering, endpoints[i])
		} else {
			whys = append(whys, why)
		}
	}
	switch {
	case len(answering) == 0:
		return strings.Join(whys, "; ")
	case len(whys) == 0 && answered:
		return ""
	case len(whys) == 0:
		return fmt.Sprintf("etcd answers at %s, so the command needs a longer --timeout", strings.Join(answering, ","))
	}
	return fmt.Sprintf("%s; etcd answers at %s, so the command may need a longer --timeout",
		strings.Join(whys, "; "), strings.Join(answering, ","))
}

// report prints err as fail does.
func report(stderr io.Writer, err error) {
	fmt.Fprintln(stderr, "lowwater: "+safeLines(strings.TrimPrefix(err.Error(), "lowwater: ")))
}

// reportedError is an error its command printed already (report), before
// output that might end the process (see restore).
type reportedError struct{ error }

func (e *reportedError) Unwrap() error { return e.error }

// version prints the version of lowwater the tool was built with: the
// main module's, or, in a tool built elsewhere with this package, the
// lowwater module it requires; and the commit, when the build knows it.
func version(stdout, stderr io.Writer) int {
	v := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		m := &bi.Main
		for _, d := range bi.Deps {
			if m.Path != lowwaterModule && d.Path == lowwaterModule {
				m = d
			}
		}
		v = m.Version
		if m == &bi.Main {
			for _, st := range bi.Settings {
				switch {
				case st.Key == "vcs.revision" && len(st.Value) >= 12:
					v += ", commit " + st.Value[:12]
				case st.Key == "vcs.modified" && st.Value == "true":
					v += ", modified"
				}
			}
		}
	}
	if _, err := fmt.Fprintf(stdout, "lowwater %s, %s\n", v, runtime.Version()); err != nil {
		return fail(stderr, fmt.Errorf("writing the version: %w", err))
	}
	return ExitOK
}

// lowwaterModule is this module's path, which version looks for.
const lowwaterModule = "github.com/lowwater/lowwater"

// help prints the usage, and fails as any command does when it cannot.
func help(stdout, stderr io.Writer) int {
	if _, err := io.WriteString(stdout, usage); err != nil {
		return fail(stderr, fmt.Errorf("writing the help: %w", err))
	}
	return ExitOK
}

// stickyWriter keeps the first error writing to w (a full disk, a closed
// pipe) and writes nothing after it, so that one check at the end covers
// every line a command printed.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// isTerminal reports whether r is a terminal: restore - reading one waits
// for someone to type, or paste, the dump, and seems to hang unless it
// says so.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// parseInterspersed parses flags wherever they stand among the arguments
// ("set p kafka:1 --dry-run" as well as "set --dry-run p kafka:1") and
// returns the arguments. After "--" every one is an argument: a name or
// an ID that begins with "-".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && (used < 2 || !takesValue(fs, args[used-2])) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// takesValue reports whether arg is a flag of fs that takes the next
// argument as its value ("--bucket" of "--bucket --").
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	name = strings.TrimPrefix(name, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// fail prints err and returns its exit code. The commands show the names
// and IDs they put in errors escaped already; safeLines escapes whatever
// else an error from below may carry.
func fail(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	var re *reportedError
	if !errors.As(err, &re) {
		report(stderr, err)
	}
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		if !ue.inFile {
			fmt.Fprintln(stderr, "run 'lowwater --help' for usage")
		}
		return ExitUsage
	case errors.As(err, &ee):
		return ee.code
	default:
		return ExitFailed
	}
}

// commandHelp is --help after a command, name (one of commands, or
// version): its line of usage, its entry among the commands and the flags
// that line names beyond the common ones; one screen, where the whole
// usage scrolls past it.
func commandHelp(stdout, stderr io.Writer, name string) int {
	usageLine := "lowwater version"
	if name != "version" {
		usageLine = "lowwater [common flags] " + commands[name].argsHelp
	}
	text := "usage: " + usageLine + "\n\n" + usageBlock("  "+name+" ")
	if strings.Contains(usageLine, "--force") && name != "dump" { // dump's own --force is in its entry
		text += "\n" + usageBlock("Write flags")
	}
	if strings.Contains(usageLine, "--quoted") {
		text += "\n  --quoted   PCHANNEL as verify shows a name no node can use: quoted\n"
	}
	if name == "version" {
		text += "\nThe other commands: lowwater --help\n"
	} else {
		text += "\nThe common flags, the catalog's URL and the exit codes: lowwater --help\n"
	}
	if _, err := io.WriteString(stdout, text); err != nil {
		return fail(stderr, fmt.Errorf("writing the help: %w", err))
	}
	return ExitOK
}

// usageBlock is the lines of the usage from the one that begins with
// prefix through those indented deeper under it.
func usageBlock(prefix string) string {
	lines := strings.SplitAfter(usage, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	if i < 0 {
		return ""
	}
	indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
	block := lines[i]
	for _, l := range lines[i+1:] {
		if strings.TrimSpace(l) == "" || len(l)-len(strings.TrimLeft(l, " ")) <= indent {
			break
		}
		block += l
	}
	return block
}

// isHelpFlag reports whether arg asks for help, as package flag takes it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// unknownCommand refuses name, no command's, with the one it most likely
// meant.
func unknownCommand(name string) error {
	if near := nearestCommand(name); near != "" {
		return usagef("unknown command %s; did you mean %s?", shortQuoted(name), near)
	}
	return usagef("unknown command %s", shortQuoted(name))
}

// nearestCommand is the command name fewest edits from name (a letter
// added, dropped, changed, or two swapped), two at most; "" if none is,
// or if two are as near.
func nearestCommand(name string) string {
	near, best, tie := "", 3, false
	for _, c := range append(slices.Sorted(maps.Keys(commands)), "help", "version") {
		switch d := editDistance(name, c); {
		case d < best:
			near, best, tie = c, d, false
		case d == best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return near
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: a command name is ASCII.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
