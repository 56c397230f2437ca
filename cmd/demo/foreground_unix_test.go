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
	if strconv.IntSize == 32 {
		t.Skip("a 32-bit int is the pid_t itself")
	}
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, pid := range []int32{1, 4242, 1<<31 - 1, -1} {
			var mem [8]byte
			order.PutUint32(mem[:4], uint32(pid)) // what the kernel writes
			v := int(order.Uint64(mem[:]))        // the Go int it wrote into
			require.Equal(t, int(pid), leadingInt32(v, order), "%v, pid %d", order, pid)
		}
	}
}
