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
	for _, dep := range list(`{{join .Deps " "}}`, "github.com/my-pi/bindery/binding/judgetest") {
		if dep == "github.com/my-pi/bindery/binding" {
			t.Error("the judge imports binding: it must be an independent model")
		}
	}
}

// TestLayering: dependencies point one way, cmd -> daemon -> {api, db,
// watcher} -> binding, and each fact's package keeps its own concern: only
// db speaks SQL (SQLite, and PostgreSQL in db/postgres), api and watcher never reach into each other's or the
// daemon's insides, and the test-only packages (named ...test) are
// imported by tests alone.
func TestLayering(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	const mod = "github.com/my-pi/bindery"
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	// layer of each top-level package; a package may import only its own
	// layer's subpackages and lower layers
	// (proxy is a host of the API beside the daemon: cmd -> proxy -> api)
	layer := map[string]int{"binding": 0, "api": 1, "db": 1, "watcher": 1, "daemon": 2, "proxy": 2, "cmd": 3}
	// what a host of the API may import of the module: api alone (the
	// proxy never reaches the daemon, the store, the watcher or the
	// decision, so it cannot restate the decision or write bindery's state)
	hostOnly := map[string]bool{"proxy": true}
	// leaves anyone may import: they import nothing of the module
	leaf := map[string]bool{mod + "/api/jsonscan": true}
	top := func(pkg string) string {
		rest := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		first, _, _ := strings.Cut(rest, "/")
		return first
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		from := top(pkg)
		for _, imp := range imports {
			if imp == "database/sql" && from != "db" {
				t.Errorf("%s imports database/sql: only db speaks SQL", pkg)
			}
			if strings.HasPrefix(imp, "github.com/jackc/pgx") && from != "db" {
				t.Errorf("%s imports %s: only db (db/postgres) speaks to PostgreSQL", pkg, imp)
			}
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			checked++
			if strings.HasSuffix(imp, "test") && !strings.HasSuffix(pkg, "test") {
				t.Errorf("%s imports the test-only %s", pkg, imp)
			}
			to := top(imp)
			if hostOnly[from] && !strings.HasSuffix(pkg, "test") && to != from && to != "api" {
				t.Errorf("%s imports %s: a host of the API imports only %s/api", pkg, imp, mod)
			}
			switch {
			case to == from, leaf[imp]:
			case leaf[pkg]:
				t.Errorf("the leaf %s imports %s", pkg, imp)
			case layer[to] >= layer[from]:
				t.Errorf("%s imports %s: %s is not below %s", pkg, imp, to, from)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no imports inside the module were checked")
	}
}
