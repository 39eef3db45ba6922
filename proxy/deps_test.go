package proxy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the proxy is a host of bindery's API like the CLI: of
// bindery's packages it imports only api (its client and wire types), never
// the daemon, the store, the watcher or the decision, so nothing of the
// decision is restated here and nothing here can write bindery's state.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/my-pi/bindery/proxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/my-pi/bindery"
	seenAPI := false
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"/api" {
			seenAPI = true
		}
		if !strings.HasPrefix(dep, module+"/") || dep == module+"/proxy" {
			continue
		}
		if dep != module+"/api" && !strings.HasPrefix(dep, module+"/api/") {
			t.Errorf("proxy depends on %s: it may import only %s/api", dep, module)
		}
	}
	for _, banned := range []string{"modernc.org/sqlite", "github.com/fsnotify/fsnotify"} {
		if strings.Contains(string(out), banned) {
			t.Errorf("proxy depends on %s", banned)
		}
	}
	if !seenAPI {
		t.Error("proxy does not import api: is go list looking at the right package?")
	}
}
