//go:build unix

package pgtest

import (
	"os/exec"
	"syscall"
)

// asUser runs cmd as uid:gid (-1: as the tests run).
func asUser(cmd *exec.Cmd, uid, gid int) {
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
}
