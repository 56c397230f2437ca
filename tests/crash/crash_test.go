// Package crash kills a real process running a pchannel on a bbolt file
// with SIGKILL, over and over, and checks after each kill that nothing
// acknowledged was lost and nothing unsafe was stored.
package crash

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	childEnv   = "LOWWATER_CRASH_CHILD"
	dbEnv      = "LOWWATER_CRASH_DB"
	seedEnv    = "LOWWATER_CRASH_SEED"
	pchannel   = "pch-crash"
	rounds     = 20
	vchannels  = 4
	roundLimit = 30 * time.Second
	// exitCorrupt is the child's exit status when its store is damaged.
	exitCorrupt = 3
)

// TestKill9 runs the child below (this test binary re-executed, the
// helper-process trick) for 20 rounds. The child prints "MIN v" before
// sending the update that makes v its vchannels' minimum, and "ACK v" when
// CheckpointPersisted(v) is published. The parent SIGKILLs it after a
// random number of lines (so at a random point of its work: mid-update,
// mid-save, mid-print), reopens the bbolt file and checks
//
//	last ACK so far  <=  stored checkpoint  <=  highest MIN so far
//
// (nothing acknowledged is lost; nothing above what every vchannel reached
// is stored), that the stored checkpoint never went backward across
// rounds, and that the next child starts from it.
func TestKill9(t *testing.T) {
	db := filepath.Join(t.TempDir(), "checkpoints.db")
	seed := time.Now().UnixNano()
	t.Logf("seed %d (set LOWWATER_CRASH_SEED to repeat the kill points)", seed)
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	var lastAck, highestMin, stored int64 = -1, -1, -1
	acks, mins := 0, 0
	for round := range rounds {
		killAt := 5 + rng.IntN(1500) // lines read before the kill
		r := runChild(t, db, seed+int64(round), func(lines int, _ *childRun) bool { return lines == killAt })
		require.Equal(t, stored, r.start, "round %d: the child did not start from the stored checkpoint", round)
		prev := r.start
		for _, v := range r.mins {
			require.Greater(t, v, prev, "round %d: minimum went down within the child", round)
			prev, highestMin = v, max(highestMin, v)
		}
		for _, v := range r.acks {
			require.Greater(t, v, lastAck, "round %d: acknowledgements went down", round)
			lastAck = v
		}
		acks, mins = acks+len(r.acks), mins+len(r.mins)

		now := load(t, db)
		require.GreaterOrEqual(t, now, lastAck, "round %d: acknowledged kafka:%d lost, stored kafka:%d", round, lastAck, now)
		require.LessOrEqual(t, now, max(highestMin, stored), "round %d: stored kafka:%d above every minimum reached (kafka:%d)", round, now, highestMin)
		require.GreaterOrEqual(t, now, stored, "round %d: stored checkpoint went backward", round)
		t.Logf("round %2d: killed after %3d lines: %3d minima, %3d acks; stored kafka:%d (last ack %d, highest minimum %d)",
			round, killAt, len(r.mins), len(r.acks), now, lastAck, highestMin)
		stored = now
	}
	require.Greater(t, acks, rounds, "the children saved little")
	t.Logf("%d rounds, %d minima, %d acknowledgements, final kafka:%d", rounds, mins, acks, stored)
}

// TestKill9DamagedFile kills a child mid-work, as TestKill9 does, then
// damages the bbolt file it left the ways a disk fault or a bad copy does.
// A restarted child must report the store damaged (ErrCorruptStore) and
// stop, never start the pchannel from nothing, and leave the file as it
// found it for the operator.
func TestKill9DamagedFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "checkpoints.db")
	r := runChild(t, db, 1, func(_ int, r *childRun) bool { return len(r.acks) == 3 })
	require.NotEmpty(t, r.acks, "the child saved nothing before the kill")
	stored := load(t, db)
	require.GreaterOrEqual(t, stored, r.acks[len(r.acks)-1])
	healthy, err := os.ReadFile(db)
	require.NoError(t, err)
	const page = 4096 // bbolt's page size here: the OS page size
	require.Equal(t, page, os.Getpagesize())

	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"emptied", func(b []byte) []byte { return b[:0] }},
		{"truncated to 8 KiB", func(b []byte) []byte { return b[:8<<10] }},
		{"data pages zeroed", func(b []byte) []byte { clear(b[2*page:]); return b }},
		{"garbage over data pages", func(b []byte) []byte {
			rng := rand.New(rand.NewPCG(5, 6))
			for i := 2 * page; i < len(b); i++ {
				b[i] = byte(rng.Uint32())
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			damaged := filepath.Join(t.TempDir(), "checkpoints.db")
			data := tc.damage(slices.Clone(healthy))
			require.NoError(t, os.WriteFile(damaged, data, 0o600))
			_, err := persistence.OpenBolt(damaged)
			require.ErrorIs(t, err, persistence.ErrCorruptStore, "reopening the damaged file")

			lines, code, stderr := runChildToExit(t, damaged)
			require.Equal(t, []string{"CORRUPT -1"}, lines, "the child did not stop at the damaged store; stderr:\n%s", stderr)
			require.Equal(t, exitCorrupt, code, "stderr:\n%s", stderr)
			require.Contains(t, stderr, damaged, "the report names the file")
			after, err := os.ReadFile(damaged)
			require.NoError(t, err)
			require.Equal(t, data, after, "the damaged file was changed")
		})
	}
}

// runChildToExit runs the child until it exits on its own, and returns the
// lines it printed, its exit status and its standard error.
func runChildToExit(t *testing.T, db string) (lines []string, code int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), roundLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", dbEnv+"="+db, seedEnv+"=1")
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("child: %v", err)
	}
	require.NoError(t, ctx.Err(), "the child did not exit within %v", roundLimit)
	if text := strings.TrimSpace(string(out)); text != "" {
		lines = strings.Split(text, "\n")
	}
	return lines, cmd.ProcessState.ExitCode(), errBuf.String()
}

type childRun struct {
	start      int64 // -1: nothing stored
	mins, acks []int64
}

// runChild starts the child, reads its lines, kills it with SIGKILL once
// kill says so (given the lines read and what they said), and returns what
// it printed before dying.
func runChild(t *testing.T, db string, seed int64, kill func(lines int, r *childRun) bool) childRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", dbEnv+"="+db, seedEnv+"="+strconv.FormatInt(seed, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	r := childRun{start: -2}
	deadline := time.NewTimer(roundLimit)
	defer deadline.Stop()
	n, killed := 0, false
	for {
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-deadline.C:
			_ = cmd.Process.Kill()
			t.Fatalf("child ran %v without reaching its kill point; stderr:\n%s", roundLimit, stderr.String())
		}
		if !ok {
			break
		}
		n++
		kind, val, found := strings.Cut(line, " ")
		require.True(t, found, "child line %q", line)
		v, err := strconv.ParseInt(val, 10, 64)
		require.NoError(t, err, "child line %q", line)
		switch kind {
		case "READY":
			r.start = v
		case "MIN":
			r.mins = append(r.mins, v)
		case "ACK":
			r.acks = append(r.acks, v)
		default:
			t.Fatalf("child line %q", line)
		}
		if !killed && kill(n, &r) {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true
		}
	}
	err = cmd.Wait()
	require.True(t, killed, "child exited on its own (%v); stderr:\n%s", err, stderr.String())
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal())
	return r
}

// load opens the bbolt file the way a restarted node would and reads the
// stored checkpoint (-1: none).
func load(t *testing.T, db string) int64 {
	t.Helper()
	cat, err := persistence.OpenBolt(db)
	require.NoError(t, err)
	defer func() { require.NoError(t, cat.Close()) }()
	id, err := cat.Load(context.Background(), pchannel)
	require.NoError(t, err)
	if id == nil {
		return -1
	}
	return int64(id.(wal.KafkaID))
}

// TestCrashChild is the child process; it does nothing unless run by
// TestKill9. It recovers the pchannel from the bbolt file, restarts its
// vchannels from the stored checkpoint (consumption resumes there), then
// advances them at random until it is killed.
func TestCrashChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestKill9")
	}
	seed, err := strconv.ParseInt(os.Getenv(seedEnv), 10, 64)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))

	cat, err := persistence.OpenBolt(os.Getenv(dbEnv), persistence.WithOpenTimeout(10*time.Second))
	if errors.Is(err, persistence.ErrCorruptStore) {
		// What a node does with a damaged store: say so and stop, never
		// start from nothing.
		fmt.Fprintf(os.Stdout, "CORRUPT %d\n", -1)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitCorrupt)
	}
	require.NoError(t, err)
	stored, err := cat.Load(context.Background(), pchannel)
	require.NoError(t, err)
	start := int64(-1)
	if stored != nil {
		start = int64(stored.(wal.KafkaID))
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	sys.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*messages.CheckpointPersisted); ok {
			// One write per line, unbuffered: what is printed is in the
			// pipe even if the process dies the next instant.
			fmt.Fprintf(os.Stdout, "ACK %d\n", int64(ev.Value.(wal.KafkaID)))
		}
	})
	cps := make([]int64, vchannels)
	initial := map[string]wal.MessageID{}
	for i := range cps {
		cps[i] = max(start, 0)
		initial[fmt.Sprint("v", i)] = wal.KafkaID(cps[i])
	}
	props, err := actors.NewProps(pchannel, wal.Kafka, cat, actors.WithVChannels(initial), actors.WithPreloaded(stored))
	require.NoError(t, err)
	pid := sys.Root.Spawn(props)
	fmt.Fprintf(os.Stdout, "READY %d\n", start)

	lo := cps[0]
	for i := 0; ; i++ {
		k := rng.IntN(vchannels)
		cps[k] += 1 + rng.Int64N(5)
		if m := minOf(cps); m > lo {
			lo = m
			fmt.Fprintf(os.Stdout, "MIN %d\n", lo) // before the actor can see it
		}
		update := &messages.UpdateCheckpoint{VChannel: fmt.Sprint("v", k), Checkpoint: wal.KafkaID(cps[k])}
		if i%16 == 0 {
			// Backpressure: wait for the actor now and then.
			require.NoError(t, actors.Request(ctxtest.Within(time.Minute), sys.Root, pid, update))
			continue
		}
		sys.Root.Send(pid, update)
	}
}

func minOf(xs []int64) int64 {
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}
