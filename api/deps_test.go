package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: api (and so every client of it, the CLI included)
// never reaches the daemon's insides.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/my-pi/bindery/api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/my-pi/bindery/db", "github.com/my-pi/bindery/watcher", "github.com/my-pi/bindery/daemon", "modernc.org/sqlite", "github.com/fsnotify/fsnotify"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("api depends on %s", dep)
			}
		}
	}
}
