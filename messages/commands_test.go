package messages_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// A command logged through log/slog shows its checkpoint as the WAL
// writes it; a nil one, and an empty batch, log without a panic.
func TestCommandsLogTheirCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		cmd  any
		want string
	}{
		{&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(400)}, `"cmd":{"vchannel":"a","checkpoint":"kafka:400"}`},
		{&messages.AddVChannel{VChannel: "b"}, `"cmd":{"vchannel":"b","checkpoint":"<none>"}`},
		{&messages.UpdateBatch{}, `"cmd":{"updates":0}`},
		{(*messages.UpdateCheckpoint)(nil), `"cmd":"<nil>"`},
		{(*messages.UpdateBatch)(nil), `"cmd":"<nil>"`},
	} {
		var out bytes.Buffer
		slog.New(slog.NewJSONHandler(&out, nil)).Info("x", slog.Any("cmd", tc.cmd))
		require.Contains(t, out.String(), tc.want)
	}
}
