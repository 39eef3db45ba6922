package daemon

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/my-pi/bindery/api"
)

// peerCred on macOS: LOCAL_PEERCRED gives the peer's uid and groups as of
// connect time (getpeereid(3) reads the same), LOCAL_PEERPID its pid.
func peerCred(c net.Conn) (api.Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return api.Peer{}, fmt.Errorf("not a Unix socket connection (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return api.Peer{}, err
	}
	var cred *unix.Xucred
	var pid int
	var cerr, perr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return api.Peer{}, err
	}
	if cerr != nil {
		return api.Peer{}, fmt.Errorf("LOCAL_PEERCRED: %w", cerr)
	}
	p := api.Peer{UID: cred.Uid}
	if cred.Ngroups > 0 {
		p.GID = cred.Groups[0]
	}
	if perr == nil {
		p.PID = int32(pid)
	}
	return p, nil
}
