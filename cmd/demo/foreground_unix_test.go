//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// An ioctl that writes a 32-bit pid_t into a zeroed Go int leaves it in
// the int's first four bytes: leadingInt32 reads it back on either byte
// order, where the int itself is pid<<32 on a big-endian machine.
func TestLeadingInt32ReadsWhatTheKernelWrote(t *testing.T) {
	for _, pid := range []int32{1, 4242, 1<<31 - 1, -1} {
		var mem [8]byte
		binary.NativeEndian.PutUint32(mem[:4], uint32(pid))
		v := int(binary.NativeEndian.Uint64(mem[:]))
		if strconv.IntSize == 32 {
			v = int(pid)
		}
		require.Equal(t, int(pid), leadingInt32(v))
	}
}
