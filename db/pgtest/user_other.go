//go:build !unix

package pgtest

import "os/exec"

// asUser: outside Unix the cluster runs as the tests do.
func asUser(cmd *exec.Cmd, uid, gid int) {}
