package api

import (
	"path/filepath"
	"strings"
)

// MaxWorkspacePath bounds the cwd an editor names in GET /v1/sessions?cwd=
// (Linux's PATH_MAX).
const MaxWorkspacePath = 4096

// InWorkspace reports whether a session pi ran in cwd belongs to the
// workspace dir: cwd is dir or a folder under it, compared as cleaned
// absolute paths, a folder at a time (/src/app does not hold /src/apple).
// An editor opened on a repository sees the sessions pi ran anywhere in
// it; one opened on a subfolder does not see sessions run above it, whose
// work may reach far outside the folder.
func InWorkspace(cwd, dir string) bool {
	if cwd == "" || dir == "" {
		return false
	}
	cwd, dir = filepath.Clean(cwd), filepath.Clean(dir)
	if cwd == dir {
		return true
	}
	if dir != "/" {
		dir += "/"
	}
	return strings.HasPrefix(cwd, dir)
}
