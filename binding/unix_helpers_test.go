//go:build unix

package binding

// Test helpers that need Unix system calls; unix_helpers_windows_test.go
// has their Windows stand-ins, so the tests vet on Windows (they run on Unix).

import (
	"syscall"
	"time"
)

// cpuTime is this process's user+system CPU time. Benchmarks report it per
// op next to wall time: on a loaded 2-core machine wall time includes waiting
// for a CPU, CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
