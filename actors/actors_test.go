package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewPropsRejectsInvalidOptions(t *testing.T) {
	cat := persistence.NewMemory()
	for name, tc := range map[string]struct {
		pchannel string
		wal      wal.Name
		catalog  persistence.Catalog
		opts     []Option
	}{
		"empty pchannel":      {"", wal.Kafka, cat, nil},
		"unknown WAL":         {"p", "nope", cat, nil},
		"nil catalog":         {"p", wal.Kafka, nil, nil},
		"typed nil catalog":   {"p", wal.Kafka, (*persistence.Bolt)(nil), nil},
		"nil option":          {"p", wal.Kafka, cat, []Option{nil}},
		"nil logger":          {"p", wal.Kafka, cat, []Option{WithLogger(nil)}},
		"zero save timeout":   {"p", wal.Kafka, cat, []Option{WithSaveTimeout(0)}},
		"zero flush timeout":  {"p", wal.Kafka, cat, []Option{WithStopFlushTimeout(0)}},
		"negative interval":   {"p", wal.Kafka, cat, []Option{WithMinSaveInterval(-time.Second)}},
		"hot-looping backoff": {"p", wal.Kafka, cat, []Option{WithBackoff(Backoff{Multiplier: 1.5, Max: time.Second})}},
		"foreign vchannel ID": {"p", wal.Kafka, cat, []Option{WithVChannels(map[string]wal.MessageID{"v": wal.PulsarID{}})}},
		"nil vchannel ID":     {"p", wal.Kafka, cat, []Option{WithVChannels(map[string]wal.MessageID{"v": nil})}},
	} {
		t.Run(name, func(t *testing.T) {
			props, err := NewProps(tc.pchannel, tc.wal, tc.catalog, tc.opts...)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.Nil(t, props)
		})
	}
	props, err := NewProps("p", wal.Kafka, cat, WithLogger(zap.NewNop()), WithMinSaveInterval(time.Second))
	require.NoError(t, err)
	require.NotNil(t, props)

	// Every problem at once, the WAL's and the vchannels' among them.
	_, err = NewProps("", "nope", nil, WithLogger(nil), WithSaveTimeout(0), WithVChannels(map[string]wal.MessageID{"x": nil}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrUnknownWAL)
	for _, want := range []string{"nil logger", "empty", "nil catalog", "save timeout 0s is not positive", `unknown WAL name: "nope"`} {
		require.Contains(t, err.Error(), want)
	}
	_, err = NewProps("p", "nope", nil)
	require.ErrorIs(t, err, wal.ErrUnknownWAL)
	require.Contains(t, err.Error(), "nil catalog")

	// A Backoff has no defaults of its own: the error says where to start.
	_, err = NewProps("p", wal.Kafka, cat, WithBackoff(Backoff{Initial: 50 * time.Millisecond}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, ErrInvalidBackoff)
	require.ErrorContains(t, err, "lowwater: invalid backoff: max interval 0s is below the initial 50ms (a field left at zero is not a default: start from DefaultBackoff")
	b := DefaultBackoff()
	b.Initial = 50 * time.Millisecond
	_, err = NewProps("p", wal.Kafka, cat, WithBackoff(b))
	require.NoError(t, err)

	// The least first wait the doc states is the one checked.
	require.Equal(t, saveplan.MinInitial, MinBackoffInitial)
	b.Initial = MinBackoffInitial - 1
	_, err = NewProps("p", wal.Kafka, cat, WithBackoff(b))
	require.ErrorIs(t, err, ErrInvalidBackoff)
	b.Initial = MinBackoffInitial
	_, err = NewProps("p", wal.Kafka, cat, WithBackoff(b))
	require.NoError(t, err)
}

func TestRestartDelayGrowsToCap(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	for failures, want := range []time.Duration{100, 100, 200, 400, 800, 1000, 1000} {
		require.Equal(t, want*time.Millisecond, restartDelay(saveplan.Backoff(b), failures), "after %d failures", failures)
	}
}

// poisonProbe is an invoker that records, with each message a mailbox
// delivers, whether the mailbox says it took the PoisonPill.
type poisonProbe struct {
	mb  *mailbox
	got chan [2]any
}

func (p poisonProbe) InvokeSystemMessage(any)  {}
func (p poisonProbe) InvokeUserMessage(m any)  { p.got <- [2]any{m, p.mb.tookPoison()} }
func (p poisonProbe) EscalateFailure(any, any) {}

// The mailbox says it took the PoisonPill once it has handed it on, and
// not before: the stop being handled then is the Poison's. It posts the
// actor nothing of its own for it.
func TestMailboxTellsItTookThePoisonPill(t *testing.T) {
	mb := newDrainingMailbox()
	r := poisonProbe{mb: mb.(*mailbox), got: make(chan [2]any, 4)}
	mb.RegisterHandlers(r, actor.NewSynchronizedDispatcher(10))
	mb.Start()
	update := &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(1)}
	mb.PostUserMessage(update)
	mb.PostUserMessage(&actor.PoisonPill{})
	require.Equal(t, [][2]any{{update, false}, {&actor.PoisonPill{}, true}}, [][2]any{<-r.got, <-r.got})
	require.Empty(t, r.got)
}
