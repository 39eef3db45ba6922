//go:build !unix

package pgtest

import "os/exec"

// runAs: no user switch outside Unix; PostgreSQL's Windows binaries run as
// the current user.
func runAs(cmd *exec.Cmd, uid, gid uint32) {}
