package daemon

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// fileOwner: Windows files carry an owner SID, not a uid; the folder
// check is left to the folder's ACL.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }

var errWouldBlock = windows.ERROR_LOCK_VIOLATION

// lockFile takes an exclusive lock of the file's first byte without
// waiting, as flock does on Unix.
func lockFile(f *os.File) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &windows.Overlapped{})
	if errors.Is(err, windows.ERROR_IO_PENDING) {
		return windows.ERROR_LOCK_VIOLATION
	}
	return err
}
