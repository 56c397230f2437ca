//go:build unix

package persistence

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only, for a check of its
// pages. The check then reads them where they lie, in the page cache that
// bbolt's own mapping shares, where a copy on the heap cost the file's
// size per check, and the first Load of a process to find nothing beside
// 300,000 records returned up to 272 ms past its 1 ms deadline, making
// it. A page the file no longer holds (truncated by a program that
// ignores the lock) faults: the caller turns faults into panics
// (debug.SetPanicOnFault) and recovers them.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("a file of %d bytes cannot be mapped here", size)
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map: %w", err)
	}
	return data, func() { _ = unix.Munmap(data) }, nil
}
