package daemon

import (
	"fmt"
	"net"
	"syscall"

	"github.com/my-pi/bindery/api"
)

func peerCred(c net.Conn) (api.Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return api.Peer{}, fmt.Errorf("not a Unix socket connection (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return api.Peer{}, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return api.Peer{}, err
	}
	if cerr != nil {
		return api.Peer{}, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return api.Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
