package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestClientImports: bindery's client commands (status, sessions, show,
// compile, accept, release, tail, report, whatif, and the rendering of
// their tables and charts) use only the api package, its client and its
// wire types; only serve.go, which runs the daemon in this same binary,
// imports the daemon. Go checks imports per file, so a client file can
// reach the daemon's packages only by importing one, which this test
// refuses.
func TestClientImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/my-pi/bindery"
	// serve.go runs the daemon; service.go installs it as a service with
	// the folders the daemon would resolve (daemon.DefaultConfig) and the
	// shipped unit (systemd).
	serving := map[string]bool{"serve.go": true, "service.go": true}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(path, module+"/") {
				continue
			}
			switch {
			case path == module+"/api" || strings.HasPrefix(path, module+"/api/"):
			case serving[name] && path == module+"/daemon":
			case name == "service.go" && path == module+"/systemd":
			case name == "proxy.go" && path == module+"/proxy":
			// service_proxy.go installs the proxy's shipped unit and checks
			// its listen address as the proxy does.
			case name == "service_proxy.go" && (path == module+"/systemd" || path == module+"/proxy"):
			default:
				t.Errorf("%s imports %s: a client command uses only %s/api (the daemon's packages are the daemon's)", name, path, module)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files: is the test running in cmd/bindery?", checked)
	}
}
