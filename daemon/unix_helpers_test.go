//go:build unix

package daemon

// Test helpers that need Unix system calls; unix_helpers_windows_test.go has
// their Windows stand-ins, so the tests vet on Windows (they run on Unix).

import (
	"os/exec"
	"syscall"
	"time"
)

// setUser runs c as uid (and the same gid): tests run as root need a
// second user.
func setUser(c *exec.Cmd, uid uint32) {
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
}

// processCPU is the CPU time this process has used (user and system): a
// turn's CPU is less disturbed than its wall time by whatever else the
// machine runs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
