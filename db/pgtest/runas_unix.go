//go:build unix

package pgtest

import (
	"os/exec"
	"syscall"
)

// runAs makes cmd run as uid:gid (initdb refuses root).
func runAs(cmd *exec.Cmd, uid, gid uint32) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
}
