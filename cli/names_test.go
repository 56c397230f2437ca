package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// weird is a registered WAL whose text is not always plain: the String of
// 9 holds a newline, an escape sequence and a tab, the bytes of 13 fail to
// decode with such an error, and the text "boom" fails to parse with one.
// A third party's ID type may do any of that, and the tool prints it all.
type weird uint8

func (weird) WALName() wal.Name { return "test-weird" }
func (a weird) LT(o wal.MessageID) bool {
	b, ok := o.(weird)
	return ok && a < b
}
func (a weird) LTE(o wal.MessageID) bool {
	b, ok := o.(weird)
	return ok && a <= b
}
func (a weird) EQ(o wal.MessageID) bool {
	b, ok := o.(weird)
	return ok && a == b
}
func (a weird) Marshal() []byte { return []byte{byte(a)} }
func (a weird) String() string {
	switch a {
	case 9:
		return "test-weird:9\n\x1b[2Jforged\trow"
	case weirdLong: // parses back: zeros lead
		return "test-weird:" + strings.Repeat("0", 4000) + "200"
	case weirdPanics:
		panic("String bug")
	case weirdNotUTF8:
		return "test-weird:202\xff"
	case weirdControls:
		return "test-weird:203" + strings.Repeat("\x01", 20000)
	}
	return "test-weird:" + strconv.Itoa(int(a))
}

// IDs whose text is 4,014 bytes, whose String panics, whose text is not
// UTF-8, and whose text is 20,000 control characters.
const (
	weirdLong     weird = 200
	weirdPanics   weird = 201
	weirdNotUTF8  weird = 202
	weirdControls weird = 203
)

// weirdDamaged, once set, makes the codec refuse the bytes of weird(13),
// as it would a damaged record's: a catalog stores only IDs that read back
// (wal.Marshal), so the test sets it once that one is stored.
var weirdDamaged atomic.Bool

func init() {
	err := wal.Register("test-weird", wal.Codec[weird]{
		Unmarshal: func(b []byte) (weird, error) {
			if len(b) != 1 || (b[0] == 13 && weirdDamaged.Load()) {
				return 0, errors.New("bad\x1b[31m\nforged line")
			}
			return weird(b[0]), nil
		},
		Parse: func(s string) (weird, error) {
			if s == "boom" {
				return 0, errors.New("no\x1b]0;title\x07\nforged line")
			}
			n, err := strconv.ParseUint(s, 10, 8)
			return weird(n), err
		},
	})
	if err != nil {
		panic(err)
	}
}

// Names persistence.ValidatePChannel takes, and which printed raw would
// forge a row of list, run an escape sequence in the operator's terminal,
// or shift list's columns.
const (
	forger = "x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1"
	osc    = "esc\x1b]0;pwned\x07\x1b[2J"
	c1     = "csi\u009b2J"
	tabbed = "tab\there"
	bidi   = "rtl\u202eevil"
)

// untrusted are such names, with a plain one and a plain non-ASCII one.
var untrusted = map[string]wal.MessageID{
	"by-dev-rootcoord-dml_0": wal.KafkaID(1),
	forger:                   wal.KafkaID(2),
	osc:                      wal.KafkaID(3),
	c1:                       wal.KafkaID(4),
	tabbed:                   wal.KafkaID(5),
	bidi:                     wal.KafkaID(6),
	"has space":              wal.KafkaID(7),
	`"quoted"`:               wal.KafkaID(8),
	"ünïcode-ok":             wal.KafkaID(9),
}

// TestStoredTextIsQuoted: list, get, verify, set and delete show a name,
// an ID or an error from the catalog as it is when it is plain printable
// text, and quoted as Go's %q does otherwise; nothing they print holds a
// control character but the newlines they mean.
func TestStoredTextIsQuoted(t *testing.T) {
	ids := map[string]wal.MessageID{"c": weird(13), "w": weird(9)}
	for p, id := range untrusted {
		ids[p] = id
	}
	url, _ := boltWith(t, ids)
	weirdDamaged.Store(true)
	t.Cleanup(func() { weirdDamaged.Store(false) })

	stdout, stderr, code := runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `PCHANNEL                                                   WAL         CHECKPOINT                          TERM  VERSION
"\"quoted\""                                               kafka       kafka:8                             0     2
by-dev-rootcoord-dml_0                                     kafka       kafka:1                             0     2
c                                                          test-weird  CORRUPT                             0     2
"csi\u009b2J"                                              kafka       kafka:4                             0     2
"esc\x1b]0;pwned\a\x1b[2J"                                 kafka       kafka:3                             0     2
"has space"                                                kafka       kafka:7                             0     2
"rtl\u202eevil"                                            kafka       kafka:6                             0     2
"tab\there"                                                kafka       kafka:5                             0     2
w                                                          test-weird  "test-weird:9\n\x1b[2Jforged\trow"  0     2
"x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1"  kafka       kafka:2                             0     2
ünïcode-ok                                                 kafka       kafka:9                             0     2
11 pchannels, 1 unreadable (run verify)
`, stdout)
	requirePlain(t, stdout)

	stdout, stderr, code = runSplit(t, url, "get", forger)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `pchannel    "x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1"`+"\n"+
		"wal         kafka\ncheckpoint  kafka:2\nterm        0\nversion     2\n", stdout)
	stdout, stderr, code = runSplit(t, url, "get", "w")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "pchannel    w\nwal         test-weird\n"+
		`checkpoint  "test-weird:9\n\x1b[2Jforged\trow"`+"\nterm        0\nversion     2\n", stdout)
	stdout, stderr, code = runSplit(t, url, "get", "c")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Equal(t, "pchannel    c\nwal         test-weird\n"+
		`checkpoint  CORRUPT: wal: corrupt message ID: test-weird: "bad\x1b[31m\nforged line"`+"\nterm        0\nversion     2\n", stdout)
	require.Equal(t, `lowwater: c: unreadable record: wal: corrupt message ID: test-weird: "bad\x1b[31m\nforged line"`+"\n", stderr)
	stdout, stderr, code = runSplit(t, url, "get", osc+"-missing")
	require.Equal(t, cli.ExitNotFound, code)
	require.Empty(t, stdout)
	require.Equal(t, `lowwater: "esc\x1b]0;pwned\a\x1b[2J-missing": no checkpoint stored`+"\n", stderr)

	stdout, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code)
	require.Equal(t, `CORRUPT  c: wal: corrupt message ID: test-weird: "bad\x1b[31m\nforged line"`+"\n11 records, 1 unreadable\n", stdout)
	requirePlain(t, stderr)

	stdout, stderr, code = runSplit(t, url, "set", tabbed, "kafka:50", "--dry-run")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `"tab\there": would raise from kafka:5 to kafka:50`+"\n", stdout)
	_, stderr, code = runSplit(t, url, "set", tabbed, "kafka:1")
	require.Equal(t, cli.ExitRefused, code)
	require.Equal(t, `lowwater: "tab\there": kafka:1 is below the stored kafka:5; lowering needs --force`+"\n"+
		"replay: consumers restart at kafka:1 and re-read what follows it up to kafka:5 (4 messages)\n", stderr)
	_, stderr, code = runSplit(t, url, "set", bidi, "test-weird:1")
	require.Equal(t, cli.ExitRefused, code)
	require.Equal(t, `lowwater: "rtl\u202eevil" stores a kafka checkpoint, not test-weird: --force switches its WAL`+"\n", stderr)
	stdout, stderr, code = runSplit(t, url, "set", "w", "test-weird:10")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `w: raised from "test-weird:9\n\x1b[2Jforged\trow" to test-weird:10`+"\n", stdout)
	_, stderr, code = runSplit(t, url, "set", "w", "test-weird:boom")
	require.Equal(t, cli.ExitUsage, code)
	require.Equal(t, `lowwater: ID "test-weird:boom": wal: malformed message ID text: "test-weird:boom" as a test-weird ID: `+
		`"no\x1b]0;title\a\nforged line"`+"\nrun 'lowwater --help' for usage\n", stderr)

	_, stderr, code = runSplit(t, url, "delete", forger)
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Equal(t, `lowwater: "x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1": delete removes kafka:2, and a node that recovers `+
		`"x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1" then starts from its vchannels' own checkpoints, `+
		`re-reading the WAL from the lowest of them: --force deletes it`+"\n", stderr)
	stdout, stderr, code = runSplit(t, url, "delete", "--force", forger)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `"x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1": deleted kafka:2`+"\n", stdout)
	stdout, stderr, code = runSplit(t, url, "delete", forger)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, `"x\nby-dev-rootcoord-dml_9  kafka  kafka:999999999  0  1": nothing stored`+"\n", stdout)
}

// requirePlain fails if out holds a control character other than a newline,
// or a rune strconv.IsPrint refuses.
func requirePlain(t *testing.T, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out))
	for i, r := range out {
		if r != '\n' && !strconv.IsPrint(r) {
			t.Fatalf("byte %d: %U printed raw in\n%s", i, r, out)
		}
	}
}

// TestJSONEscapesStoredText: list --json and dump are JSON, which escapes
// newlines, tabs and ESC already; the tool escapes too what JSON may leave
// raw and a terminal may act on (the C1 controls, U+202E). Every name reads
// back exactly, and a dump restores.
func TestJSONEscapesStoredText(t *testing.T) {
	url, _ := boltWith(t, untrusted)

	stdout, stderr, code := runSplit(t, url, "list", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	requirePlain(t, stdout)
	require.Contains(t, stdout, `"pchannel": "csi\u009b2J"`)
	require.Contains(t, stdout, `"pchannel": "rtl\u202eevil"`)
	require.Contains(t, stdout, `"pchannel": "esc\u001b]0;pwned\u0007\u001b[2J"`)
	var listed []struct {
		PChannel   string `json:"pchannel"`
		Checkpoint string `json:"checkpoint"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &listed))
	got := map[string]string{}
	for _, l := range listed {
		got[l.PChannel] = l.Checkpoint
	}
	want := map[string]string{}
	for p, id := range untrusted {
		want[p] = id.String()
	}
	require.Equal(t, want, got)

	stdout, stderr, code = runSplit(t, url, "dump")
	require.Equal(t, cli.ExitOK, code, stderr)
	requirePlain(t, stdout)
	dump := filepath.Join(t.TempDir(), "d.json")
	_, stderr, code = runSplit(t, url, "dump", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	file, err := os.ReadFile(dump)
	require.NoError(t, err)
	require.Equal(t, stdout, string(file))

	other, path := boltWith(t, nil)
	_, stderr, code = runSplit(t, other, "restore", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, want, storedIn(t, path))
}

// TestPChannelArgument: an empty or invalid pchannel name on the command
// line, or in a dump, is a bad command line (ExitUsage), found before the
// catalog is read, not a catalog failure.
func TestPChannelArgument(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"p": wal.KafkaID(1)})
	long := strings.Repeat("a", persistence.MaxNameLen+1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "", "kafka:1"}, "set: persistence: invalid argument: empty pchannel name"},
		{[]string{"set", "", "kafka:1", "--dry-run"}, "set: persistence: invalid argument: empty pchannel name"},
		{[]string{"get", ""}, "get: persistence: invalid argument: empty pchannel name"},
		{[]string{"delete", ""}, "delete: persistence: invalid argument: empty pchannel name"},
		{[]string{"delete", "a\x00b"}, `delete: persistence: invalid argument: pchannel name "a\x00b" holds a NUL byte at 1`},
		{[]string{"set", long, "kafka:1"}, `set: persistence: invalid argument: pchannel name "` + long[:40] +
			`"… (513 bytes) is over the 512-byte limit`},
		{[]string{"get", "\xff"}, `get: persistence: invalid argument: pchannel name "\xff" is not valid UTF-8`},
	} {
		stdout, stderr, code := runSplit(t, append([]string{url}, tc.args...)...)
		require.Equal(t, cli.ExitUsage, code, "%q: %s", tc.args, stderr)
		require.Empty(t, stdout, "%q", tc.args)
		require.Equal(t, "lowwater: "+tc.want+"\nrun 'lowwater --help' for usage\n", stderr, "%q", tc.args)
	}
	// Checked before the catalog: a missing file does not hide the mistake.
	_, _, code := runSplit(t, "--catalog=bolt:"+filepath.Join(t.TempDir(), "none.db"), "get", "")
	require.Equal(t, cli.ExitUsage, code)

	// A dump naming a pchannel no catalog can store is refused whole.
	dump := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"q","wal":"kafka","checkpoint":"kafka:1"},
		{"pchannel":"a\u0000b","wal":"kafka","checkpoint":"kafka:1"}]}`), 0o600))
	stdout, stderr, code := runSplit(t, url, "restore", dump)
	require.Equal(t, cli.ExitUsage, code, stderr)
	require.Empty(t, stdout)
	require.Equal(t, "lowwater: "+dump+`: checkpoint 1 ("a\x00b"): persistence: invalid argument: `+
		`pchannel name "a\x00b" holds a NUL byte at 1`+"\n", stderr, "no word of --help: the file is to mend")
	require.Equal(t, map[string]string{"p": "kafka:1"}, storedIn(t, path))
}

// TestErrorsFromBelowAreEscaped: an error the tool passes on from below
// (here os.Stat's, naming the --catalog path as it is) is printed with each
// line that holds a control character quoted.
func TestErrorsFromBelowAreEscaped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no\x1b[2J.db")
	stdout, stderr, code := runSplit(t, "--catalog=bolt:"+path, "list")
	require.Equal(t, cli.ExitFailed, code, stderr)
	require.Empty(t, stdout)
	require.Equal(t, "lowwater: "+strconv.Quote("bbolt file: stat "+path+": no such file or directory: check the path "+
		"(a node makes its file on its first start, and restore makes one from a dump)")+"\n", stderr)
	require.Contains(t, stderr, `no\x1b[2J.db`)
}

// TestListColumnsByTerminalWidth: list lines its columns up by the columns
// each name takes on a terminal, not by its runes: a CJK rune takes two,
// a combining accent none.
func TestListColumnsByTerminalWidth(t *testing.T) {
	url, _ := boltWith(t, map[string]wal.MessageID{"通道-1": wal.KafkaID(1), "cafe\u0301": wal.KafkaID(2), "plain-name": wal.KafkaID(3)})
	stdout, stderr, code := runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "PCHANNEL    WAL    CHECKPOINT  TERM  VERSION\n"+
		"cafe\u0301        kafka  kafka:2     0     2\n"+
		"plain-name  kafka  kafka:3     0     2\n"+
		"通道-1      kafka  kafka:1     0     2\n"+
		"3 pchannels\n", stdout)
}

// An ID's text is cut where a person reads it (list's table, within 80
// columns; get, to 128 bytes), whole
// where a program does (list --json, dump); and dump refuses an ID whose
// text restore could not read back, rather than write a dump restore
// refuses whole.
func TestIDTextIsCutForPeopleWholeForPrograms(t *testing.T) {
	whole := weirdLong.String()
	url, _ := boltWith(t, map[string]wal.MessageID{"long": weirdLong, "short": weird(1)})
	stdout, stderr, code := runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), 80, "a row of list, padded to the widest ID: %q", line)
	}
	require.Contains(t, stdout, "test-weird:"+strings.Repeat("0", 21)+"…  0")
	require.Contains(t, stdout, "IDs over 40 bytes are cut: list --json gives them whole\n")
	stdout, stderr, code = runSplit(t, url, "get", "long")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, "checkpoint  test-weird:"+strings.Repeat("0", 117)+"… (4014 bytes)\n")

	stdout, stderr, code = runSplit(t, url, "list", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, `"checkpoint": "`+whole+`"`)
	stdout, stderr, code = runSplit(t, url, "dump")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, `"checkpoint": "`+whole+`"`)

	url, path := boltWith(t, map[string]wal.MessageID{"panics": weirdPanics, "not-utf8": weirdNotUTF8, "controls": weirdControls, "fine": weird(1)})
	stdout, stderr, code = runSplit(t, url, "list", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &listed))
	unfit := map[string]any{}
	for _, le := range listed {
		unfit[le["pchannel"].(string)] = le["textUnfit"]
	}
	require.Equal(t, map[string]any{
		"controls": unfit["controls"], // as dump's UNFIT line below says it
		"fine":     nil,
		"not-utf8": `its text "test-weird:202\xff" is not UTF-8, which a dump cannot carry`,
		"panics": `its text does not read back: wal: malformed message ID text: "<cli_test.weird: String panicked: String bug>" as a test-weird ID: ` +
			`strconv.ParseUint: parsing "<cli_test.weird: String panicked: String bug>": invalid syntax`,
	}, unfit)
	require.NotNil(t, unfit["controls"])
	stdout, stderr, code = runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		// Cut to what shows in 32 bytes, not to 32 bytes of text, each
		// of which takes four to show.
		require.LessOrEqual(t, utf8.RuneCountInString(line), 80, "a row of list, padded to the widest ID: %q", line)
	}
	require.Contains(t, stdout, strconv.Quote("test-weird:203"+strings.Repeat("\x01", 4))+"…  0")
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "d.json")
	stdout, stderr, code = runSplit(t, url, "dump", out)
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Empty(t, stdout)
	require.Equal(t, "UNFIT  controls: its text does not read back: wal: malformed message ID text: "+
		strconv.Quote("test-weird:203"+strings.Repeat("\x01", 28))+"… (20014 bytes) as a test-weird ID: "+
		// The codec's own error, printable already (strconv quoted the
		// text), cut at 128 bytes wherever they end.
		`strconv.ParseUint: parsing "203`+strings.Repeat(`\x01`, 24)+`\… (80048 bytes)`+"\n"+
		`UNFIT  not-utf8: its text "test-weird:202\xff" is not UTF-8, which a dump cannot carry`+"\n"+
		`UNFIT  panics: its text does not read back: wal: malformed message ID text: "<cli_test.weird: String panicked: String bug>" as a test-weird ID: `+
		`strconv.ParseUint: parsing "<cli_test.weird: String panicked: String bug>": invalid syntax`+"\n"+
		"lowwater: 3 checkpoints whose text restore could not read back, nothing dumped: "+
		"their WAL's String and Parse disagree; copy the catalog itself instead\n", stderr)
	require.NoFileExists(t, out)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// A dump's own text (its format, a key no dump has, a key given twice)
// comes back in restore's refusal cut: a hostile file gave four
// megabytes of stderr for each.
func TestRestoreCutsWhatTheFileSays(t *testing.T) {
	url, _ := boltWith(t, nil)
	megabyte := strings.Repeat("\x1b", 1<<20)
	dir := t.TempDir()
	for name, body := range map[string]string{
		"format":  `{"format": "` + strings.Repeat("f", 1<<20) + `", "checkpoints": []}`,
		"key":     `{"format": "lowwater-checkpoints/1", "` + strings.Repeat("k", 1<<20) + `": 1, "checkpoints": []}`,
		"escaped": `{"format": "lowwater-checkpoints/1", "checkpoints": [{"pchannel": "p", "` + strings.ReplaceAll(megabyte, "\x1b", `\u001b`) + `": 1}]}`,
		"twice":   `{"format": "lowwater-checkpoints/1", "` + strings.Repeat("t", 1<<20) + `": 1, "` + strings.Repeat("t", 1<<20) + `": 1}`,
	} {
		path := filepath.Join(dir, name+".json")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		stdout, stderr, code := runSplit(t, url, "restore", path)
		require.Equal(t, cli.ExitUsage, code, "%s: %.300s", name, stderr)
		require.Empty(t, stdout, name)
		require.Less(t, len(stderr), 1000, "%s: %.300s", name, stderr)
		require.NotContains(t, stderr, "\x1b", name)
		require.Contains(t, stderr, " bytes)", "%s: says what it cut: %s", name, stderr)
	}
}

// The tool's own arguments reach its errors cut, as a third party's text
// does: an argument may be as long as the system allows (128 KiB on
// Linux), and an ID, a bucket, a flag's value, a command or a catalog URL
// of that size was printed whole, some twice.
func TestLongArgumentsAreCutInErrors(t *testing.T) {
	url, _ := boltWith(t, map[string]wal.MessageID{"p": wal.KafkaID(1)})
	long := func(c string) string { return strings.Repeat(c, 100_000) }
	for _, args := range [][]string{
		{url, "set", "p", "kafka:" + long("9")},
		{url, "set", "p", long("z") + ":1"},
		{url, "--bucket", long("b"), "list"},
		{url, "--timeout", long("9"), "list"},
		{url, long("c")},
		{url, "get", "--quoted", `"` + long("q")},
		{url, "--" + long("f"), "list"},
		{url, "get", long("n")},
		{"--catalog=" + long("x") + ":y", "list"},
		{"--catalog=etcd://127.0.0.1:1/" + long("p"), "list"},
	} {
		stdout, stderr, code := runSplit(t, args...)
		require.Equal(t, cli.ExitUsage, code, "%.80s: %.300s", args, stderr)
		require.Empty(t, stdout)
		require.Less(t, len(stderr), 1024, "%.80s: %.300s", args, stderr)
		require.Contains(t, stderr, " bytes)", "%.80s: the cut is marked with the whole's length: %s", args, stderr)
	}
	// An unknown flag is cut as a name: its own length, not the message's.
	_, stderr, _ := runSplit(t, url, "--"+long("f"), "list")
	require.Equal(t, "lowwater: flag provided but not defined: --"+strings.Repeat("f", 64)+"… (100000 bytes)\nrun 'lowwater --help' for usage\n", stderr)
	_, stderr, _ = runSplit(t, url, "list", "--json=maybe")
	require.Contains(t, stderr, `invalid boolean value "maybe" for --json`)
	// A path is the operator's, and any line of an error is cut at 1 KiB
	// shown, control characters quoted.
	_, stderr, code := runSplit(t, url, "restore", "/nonexistent/"+long("\x1b"))
	require.Equal(t, cli.ExitFailed, code, stderr)
	require.Less(t, len(stderr), 1200, "%.300s", stderr)
	require.NotContains(t, stderr, "\x1b[", "a raw escape reached the terminal")
	require.Contains(t, stderr, "bytes)")
}
