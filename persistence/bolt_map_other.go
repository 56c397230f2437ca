//go:build !unix

package persistence

import (
	"errors"
	"io"
	"os"
)

// mapFile reads the first size bytes of f, for a check of its pages,
// where it is not mapped (see the unix one).
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	data = make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	return data, func() {}, nil
}
