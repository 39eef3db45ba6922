package binding_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPurity: binding decides from its inputs alone. It imports only the
// standard library, and none of the packages that would let it read a
// file, the network, the clock or a database; the judge that checks it
// never imports it (it is a model written from the provider's rules, not
// from binding's code).
func TestPurity(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	list := func(format, pkg string) []string {
		out, err := exec.Command(goTool, "list", "-f", format, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		return strings.Fields(string(out))
	}
	impure := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "time": true, "syscall": true,
		"io/fs": true, "database/sql": true, "log": true, "log/slog": true, "math/rand": true, "math/rand/v2": true, "unsafe": true}
	for _, imp := range list(`{{join .Imports " "}}`, "github.com/my-pi/bindery/binding") {
		if impure[imp] {
			t.Errorf("binding imports %s", imp)
		}
	}
	for _, dep := range list(`{{join .Deps " "}}`, "github.com/my-pi/bindery/binding") {
		if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
			t.Errorf("binding depends on %s, outside the standard library", dep)
		}
	}
	for _, dep := range list(`{{join .Deps " "}}`, "github.com/my-pi/bindery/binding/judge") {
		if dep == "github.com/my-pi/bindery/binding" {
			t.Error("the judge imports binding: it must be an independent model")
		}
	}
}
