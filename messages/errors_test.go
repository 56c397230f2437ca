package messages_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
)

// A BatchError is one line, whatever its rejections' errors hold, and
// errors.Is reaches each of them.
func TestBatchErrorIsOneLine(t *testing.T) {
	joined := errors.Join(messages.ErrCheckpointRollback, errors.New("second\r\nthird\rfourth\u2028fifth"))
	err := &messages.BatchError{Rejected: []messages.Rejection{
		{Index: 0, VChannel: "a\nb", Err: joined},
		{Index: 2, VChannel: "c", Err: messages.ErrVChannelNotFound},
	}}
	require.Equal(t, `lowwater: 2 update(s) rejected: [0] "a\nb": lowwater: checkpoint rollback; second; third; fourth; fifth; [2] "c": lowwater: vchannel not found`, err.Error())
	require.ErrorIs(t, err, messages.ErrCheckpointRollback)
	require.ErrorIs(t, err, messages.ErrVChannelNotFound)
}
