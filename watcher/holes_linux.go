package watcher

import (
	"errors"
	"os"
	"syscall"
)

const seekData = 3 // SEEK_DATA (Linux): the next offset at or after off holding data

// nextData returns the first offset at or after off that holds data; end
// is true when nothing after off does (the rest of the file, if any, is a
// hole), with data then the file's size. A filesystem without hole
// support reports all of the file as data.
func nextData(f *os.File, off int64) (data int64, end bool, err error) {
	data, err = f.Seek(off, seekData)
	if errors.Is(err, syscall.ENXIO) {
		size, serr := f.Seek(0, 2)
		if serr != nil {
			return 0, false, serr
		}
		return size, true, nil
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) {
		return off, false, nil
	}
	return data, false, err
}
