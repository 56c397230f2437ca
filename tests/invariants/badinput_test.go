package invariants

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestBadInputCatalogue pins docs/bad-input.md: for every rejected command,
// the exact reply, the CommandRejected event and the one Warn line, and
// that nothing changed. The pchannel tracks a@10; each row runs on it.
func TestBadInputCatalogue(t *testing.T) {
	batch := &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
		{VChannel: "a", Checkpoint: wal.KafkaID(11)},
		{VChannel: "z", Checkpoint: wal.KafkaID(1)},
		{VChannel: "a", Checkpoint: wal.KafkaID(3)},
	}}
	rows := []struct {
		cmd     messages.Command
		is      []error
		reply   string
		applied bool // the rest of a batch is applied
	}{
		{&messages.AddVChannel{VChannel: "", Checkpoint: wal.KafkaID(1)}, []error{messages.ErrEmptyVChannel},
			`lowwater: empty vchannel name`, false},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: nil}, []error{messages.ErrNilCheckpoint},
			`lowwater: nil checkpoint: vchannel "b"`, false},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: wal.PulsarID{LedgerID: 1}}, []error{messages.ErrWALMismatch},
			`vchannel "b": wal: message ID of another WAL: wal.PulsarID where a kafka ID was expected`, false},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: wal.RocksMQID(1)}, []error{messages.ErrWALMismatch},
			`vchannel "b": wal: message ID of another WAL: wal.RocksMQID where a kafka ID was expected`, false},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: (*wal.KafkaID)(nil)}, []error{messages.ErrWALMismatch},
			`vchannel "b": wal: message ID of another WAL: *wal.KafkaID where a kafka ID was expected`, false},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(-1)}, []error{messages.ErrSentinel},
			`vchannel "b": wal: a sentinel, not a position: kafka:-1: Kafka's clients read -1 as the end of the log and -2 as its start; give a real offset, 0 for the start`, false},
		{&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(-2)}, []error{messages.ErrSentinel},
			`vchannel "a": wal: a sentinel, not a position: kafka:-2: Kafka's clients read -1 as the end of the log and -2 as its start; give a real offset, 0 for the start`, false},
		{&messages.AddVChannel{VChannel: "a\x00b", Checkpoint: wal.KafkaID(1)}, []error{persistence.ErrInvalidArgument},
			`persistence: invalid argument: vchannel name "a\x00b" holds a NUL byte at 1`, false},
		{&messages.AddVChannel{VChannel: "a", Checkpoint: wal.KafkaID(1)}, []error{messages.ErrVChannelExists},
			`lowwater: vchannel already exists: "a"`, false},
		{&messages.UpdateCheckpoint{VChannel: "", Checkpoint: wal.KafkaID(1)}, []error{messages.ErrEmptyVChannel},
			`lowwater: empty vchannel name`, false},
		{&messages.UpdateCheckpoint{VChannel: "z", Checkpoint: wal.KafkaID(1)}, []error{messages.ErrVChannelNotFound},
			`lowwater: vchannel not found: "z"`, false},
		{&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(1)}, []error{messages.ErrCheckpointRollback},
			`lowwater: checkpoint rollback: vchannel "a" from kafka:10 to kafka:1`, false},
		{&messages.DropVChannel{VChannel: ""}, []error{messages.ErrEmptyVChannel},
			`lowwater: empty vchannel name`, false},
		{&messages.DropVChannel{VChannel: "z"}, []error{messages.ErrVChannelNotFound},
			`lowwater: vchannel not found: "z"`, false},
		{(*messages.AddVChannel)(nil), []error{messages.ErrNilCommand}, `lowwater: nil command`, false},
		{(*messages.UpdateCheckpoint)(nil), []error{messages.ErrNilCommand}, `lowwater: nil command`, false},
		{(*messages.DropVChannel)(nil), []error{messages.ErrNilCommand}, `lowwater: nil command`, false},
		{(*messages.UpdateBatch)(nil), []error{messages.ErrNilCommand}, `lowwater: nil command`, false},
		{batch, []error{messages.ErrVChannelNotFound, messages.ErrCheckpointRollback},
			`lowwater: 2 update(s) rejected: [1] "z": lowwater: vchannel not found: "z"; [2] "a": lowwater: checkpoint rollback: vchannel "a" from kafka:11 to kafka:3`, true},
	}
	for _, row := range rows {
		t.Run(row.reply, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, logs := observer.New(zap.DebugLevel)
				s := newScene(t)
				s.spawn(actors.WithLogger(zap.New(core)), actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
				synctest.Wait()
				logs.TakeAll()
				from := s.rec.Len()

				err := actors.Request(ctxtest.Within(time.Minute), s.sys.Root, s.pid, row.cmd)
				require.EqualError(t, err, row.reply)
				for _, target := range row.is {
					require.ErrorIs(t, err, target)
				}
				synctest.Wait()

				rejected := ofType[*messages.CommandRejected](s.rec.Since(from))
				require.Len(t, rejected, len(row.is))
				var warns []string
				for _, e := range logs.TakeAll() {
					require.False(t, strings.HasPrefix(e.Message, "vchannel added"), "a rejected command logged success: %s", e.Message)
					if e.Level == zapcore.WarnLevel {
						require.Equal(t, "command rejected", e.Message)
						fields := e.ContextMap()
						require.Equal(t, scenePChannel, fields["pchannel"])
						require.Equal(t, typeName(row.cmd), fields["command"])
						warns = append(warns, fields["error"].(string))
					}
				}
				require.Len(t, warns, len(row.is))
				for i, r := range rejected {
					require.Same(t, row.cmd, r.Command)
					require.ErrorIs(t, r.Err, row.is[i])
					require.Equal(t, r.Err.Error(), warns[i])
				}

				st, err := actors.GetState(ctxtest.Within(time.Minute), s.sys.Root, s.pid, actors.IncludeCheckpoints())
				require.NoError(t, err)
				want := map[string]wal.MessageID{"a": wal.KafkaID(10)}
				if row.applied {
					want["a"] = wal.KafkaID(11)
				}
				require.Equal(t, want, st.Checkpoints)
			})
		})
	}

	// A nil GetState is answered as GetState{}; a request of no lowwater
	// type is answered with ErrUnknownMessage, and nothing is published or
	// logged; sent without a sender, it is dropped with one Warn line that
	// names its type, and nothing is published.
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.DebugLevel)
		s := newScene(t)
		s.spawn(actors.WithLogger(zap.New(core)), actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
		synctest.Wait()
		logs.TakeAll()
		from := s.rec.Len()
		res, err := s.sys.Root.RequestFuture(s.pid, (*messages.GetState)(nil), time.Minute).Result()
		require.NoError(t, err)
		require.Equal(t, 1, res.(*messages.State).VChannels)
		require.Nil(t, res.(*messages.State).Checkpoints)
		res, err = s.sys.Root.RequestFuture(s.pid, "hello", time.Second).Result()
		require.NoError(t, err)
		require.ErrorIs(t, res.(error), messages.ErrUnknownMessage)
		require.EqualError(t, res.(error), "lowwater: unknown message: string")
		require.Zero(t, logs.Len())
		s.sys.Root.Send(s.pid, "hello")
		synctest.Wait()
		require.Empty(t, s.rec.Since(from))
		lines := logs.TakeAll()
		require.Len(t, lines, 1)
		require.Equal(t, zapcore.WarnLevel, lines[0].Level)
		require.Equal(t, "message dropped: a pchannel takes the commands of package messages, each by pointer", lines[0].Message)
		require.Equal(t, "string", lines[0].ContextMap()["type"])
	})
}

func typeName(cmd messages.Command) string {
	switch cmd.(type) {
	case *messages.AddVChannel:
		return "*messages.AddVChannel"
	case *messages.UpdateCheckpoint:
		return "*messages.UpdateCheckpoint"
	case *messages.DropVChannel:
		return "*messages.DropVChannel"
	case *messages.UpdateBatch:
		return "*messages.UpdateBatch"
	}
	return "?"
}

// TestBadRecordsAndArguments pins the catalogue's store-side rows.
func TestBadRecordsAndArguments(t *testing.T) {
	ctx := context.Background()
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(ctx, "p", wal.KafkaID(11)))
	for _, c := range []struct {
		err  error
		is   error
		text string
	}{
		{mem.Save(ctx, "", wal.KafkaID(1)), persistence.ErrInvalidArgument, `persistence: invalid argument: empty pchannel name`},
		{mem.Save(ctx, "p", nil), persistence.ErrInvalidArgument, `persistence: invalid argument: nil checkpoint for "p"`},
		{mem.Save(ctx, "p", (*wal.KafkaID)(nil)), persistence.ErrInvalidArgument,
			`persistence: invalid argument: wal: message ID of another WAL: *wal.KafkaID is not a registered message ID type`},
		{mem.Save(ctx, "p", wal.PulsarID{}), persistence.ErrInvalidArgument,
			`persistence: invalid argument: pchannel "p" stores a kafka checkpoint, got pulsar:0:0:0@0: wal: message ID of another WAL`},
		{mem.Save(ctx, "p", wal.KafkaID(1)), persistence.ErrStoredAhead, `persistence: pchannel "p": stored checkpoint kafka:11 is ahead of kafka:1`},
	} {
		require.EqualError(t, c.err, c.text)
		require.ErrorIs(t, c.err, c.is)
	}
	_, err := mem.Load(ctx, "")
	require.EqualError(t, err, `persistence: invalid argument: empty pchannel name`)
	mem.Put("q", []byte("garbage-record-bytes"))
	_, err = mem.Load(ctx, "q")
	require.EqualError(t, err, `persistence: pchannel "q": corrupt checkpoint record: checksum mismatch`)
	require.ErrorIs(t, err, persistence.ErrCorruptRecord)
	err = mem.Save(ctx, "q", wal.KafkaID(1))
	require.ErrorIs(t, err, persistence.ErrCorruptRecord, "a corrupt record is never overwritten")
	_, err = wal.Unmarshal("nope", nil)
	require.EqualError(t, err, `wal: unknown WAL name: "nope"`)
	_, err = wal.Unmarshal(wal.Kafka, []byte{1})
	require.EqualError(t, err, `wal: corrupt message ID: kafka ID is 8 bytes, got 1`)
	require.EqualError(t, wal.Check(wal.Kafka, nil), `wal: message ID of another WAL: nil ID for "kafka"`)
	_, err = persistence.DecodeRecord("p", []byte{1, 2, 3})
	require.EqualError(t, err, `persistence: corrupt checkpoint record: record truncated`)
	require.NoError(t, mem.Close())
}
