//go:build unix

package watcher

import (
	"os"
	"syscall"
)

func fileID(fi os.FileInfo) FileID {
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		return FileID{Dev: uint64(s.Dev), Ino: uint64(s.Ino)}
	}
	return FileID{}
}

// openFlags keep open(2) from blocking on a FIFO or taking a terminal.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY
