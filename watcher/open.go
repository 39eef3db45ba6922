package watcher

import (
	"fmt"
	"io/fs"
	"os"
)

// openRegular opens path for reading only if it is a regular file. Anything
// else named *.jsonl is refused unread: open(2) of a FIFO blocks until a
// writer comes, a read of one or of a device can block or never end, and a
// watcher blocked there follows nothing else and cannot stop. So the path
// is stat'ed first (stat never blocks on a FIFO), opened with O_NONBLOCK
// (which leaves reads of a regular file as they are) in case it was
// replaced in between, and the opened file is checked again with fstat.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &notRegularError{path: path, mode: fi.Mode()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &notRegularError{path: path, mode: fi.Mode()}
	}
	return f, fi, nil
}

// notRegularError is a session path that is not a regular file.
type notRegularError struct {
	path string
	mode fs.FileMode
}

func (e *notRegularError) Error() string { return e.path + " is " + e.reason() }

// reason is the error without the path (a Problem carries the path).
func (e *notRegularError) reason() string {
	return fileKind(e.mode) + ", not a regular file: not read (bindery reads only regular session files)"
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	default:
		return "a special file (" + m.Type().String() + ")"
	}
}
