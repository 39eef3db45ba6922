package api

import (
	"errors"
	"strings"
	"testing"
)

func TestInWorkspace(t *testing.T) {
	for _, c := range []struct {
		cwd, dir string
		want     bool
	}{
		{"/src/app", "/src/app", true},
		{"/src/app/", "/src/app", true},
		{"/src/app/cmd/x", "/src/app", true},
		{"/src/app/cmd/x", "/src/app/", true},
		{"/src/apple", "/src/app", false},
		{"/src", "/src/app", false}, // run above the workspace: not its session
		{"/src/app/../other", "/src/app", false},
		{"/anything", "/", true},
		{"", "/src", false},
		{"/src", "", false},
	} {
		if got := InWorkspace(c.cwd, c.dir); got != c.want {
			t.Errorf("InWorkspace(%q, %q) = %v, want %v", c.cwd, c.dir, got, c.want)
		}
	}
}

// GET /v1/sessions?cwd= lists a workspace's sessions, over a real socket,
// and refuses a relative or oversized cwd with a clear 400.
func TestSessionsOfWorkspace(t *testing.T) {
	s, fs := testServer()
	fs.list = []Session{{ID: "a", Cwd: "/src/app"}, {ID: "b", Cwd: "/src/app/sub"}, {ID: "c", Cwd: "/src/apple"}, {ID: "d", Cwd: "/home"}}
	c := NewClient(serveUnix(t, s, selfPeer))
	defer c.Close()
	got, err := c.SessionsIn(t.Context(), "/src/app")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if strings.Join(ids, ",") != "a,b" {
		t.Fatalf("sessions of /src/app: %v, want a,b", ids)
	}
	if all, err := c.Sessions(t.Context()); err != nil || len(all) != 4 {
		t.Fatalf("every session: %d %v", len(all), err)
	}
	for _, bad := range []string{"src/app", "/" + strings.Repeat("x", MaxWorkspacePath)} {
		_, err := c.SessionsIn(t.Context(), bad)
		if ae, ok := errors.AsType[*Error](err); !ok || ae.Code != CodeBadRequest || !strings.Contains(ae.Message, "absolute path") {
			t.Errorf("cwd %.20q: %v, want a bad-request naming the rule", bad, err)
		}
	}
}
