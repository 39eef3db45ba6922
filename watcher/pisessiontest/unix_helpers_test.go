//go:build unix

package pisessiontest

// Test helpers that need Unix system calls; unix_helpers_windows_test.go has
// their Windows stand-ins, so the tests vet on Windows (they run on Unix).

import (
	"os"
	"syscall"
)

// inodeOf is fi's inode number.
func inodeOf(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }
