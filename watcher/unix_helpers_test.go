//go:build unix

package watcher

// Test helpers that need Unix system calls; unix_helpers_windows_test.go has
// their Windows stand-ins, so the tests vet on Windows (they run on Unix).

import (
	"os"
	"syscall"
)

// mkfifo makes a named pipe (the watcher must refuse one unread).
func mkfifo(path string, mode uint32) error { return syscall.Mkfifo(path, mode) }

// inodeOf is fi's inode number.
func inodeOf(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }
