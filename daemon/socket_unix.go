//go:build unix

package daemon

import (
	"os"
	"syscall"
)

// fileOwner is the uid owning fi.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// errWouldBlock is what lockFile returns while another process holds it.
var errWouldBlock = syscall.EWOULDBLOCK

// lockFile takes an exclusive flock without waiting.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
