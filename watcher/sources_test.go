package watcher

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestAgentDir(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := AgentDir(getenv, "/home/u"); got != "/home/u/.pi/agent" {
		t.Errorf("default = %s", got)
	}
	env["PI_CODING_AGENT_DIR"] = "~/agents/pi"
	if got := AgentDir(getenv, "/home/u"); got != "/home/u/agents/pi" {
		t.Errorf("tilde = %s", got)
	}
	env["PI_CODING_AGENT_DIR"] = "/opt/pi"
	if got := AgentDir(getenv, "/home/u"); got != "/opt/pi" {
		t.Errorf("absolute = %s", got)
	}
}

func TestResolveRoots(t *testing.T) {
	wd, _ := os.Getwd()
	tests := []struct {
		name    string
		in      RootsInput
		want    []Root
		wantErr bool
	}{
		{"agent dir only", RootsInput{AgentDir: "/h/.pi/agent", Home: "/h"},
			[]Root{{"/h/.pi/agent/sessions", true}}, false},
		{"env session dir", RootsInput{AgentDir: "/h/.pi/agent", Home: "/h", SessionDirEnv: "~/pi-sessions/"},
			[]Root{{"/h/.pi/agent/sessions", true}, {"/h/pi-sessions", true}}, false},
		{"settings sessionDir, absolute and relative", RootsInput{AgentDir: "/h/.pi/agent", Home: "/h", Settings: []byte(`{"theme":"dark","sessionDir":"/data/pi"}`)},
			[]Root{{"/h/.pi/agent/sessions", true}, {"/data/pi", true}}, false},
		{"relative sessionDir is under the agent dir", RootsInput{AgentDir: "/h/.pi/agent", Home: "/h", Settings: []byte(`{"sessionDir":"store"}`)},
			[]Root{{"/h/.pi/agent/sessions", true}, {"/h/.pi/agent/store", true}}, false},
		{"env and settings both, duplicates merged", RootsInput{AgentDir: "/h/.pi/agent", Home: "/h", SessionDirEnv: "/h/.pi/agent/sessions",
			Settings: []byte(`{"sessionDir":"~/s"}`), Flat: []string{"/h/s", "/flat", " "}},
			[]Root{{"/h/.pi/agent/sessions", true}, {"/h/s", true}, {"/flat", false}}, false},
		{"flat folders", RootsInput{AgentDir: "/a", Flat: []string{"rel"}},
			[]Root{{"/a/sessions", true}, {filepath.Join(wd, "rel"), false}}, false},
		{"blank and non-string sessionDir ignored", RootsInput{AgentDir: "/a", SessionDirEnv: "  ", Settings: []byte(`{"sessionDir":42}`)},
			[]Root{{"/a/sessions", true}}, false},
		{"bad settings reported, other roots kept", RootsInput{AgentDir: "/a", SessionDirEnv: "/e", Settings: []byte(`{"sessionDir":`)},
			[]Root{{"/a/sessions", true}, {"/e", true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveRoots(tt.in)
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("roots = %v, want %v", got, tt.want)
			}
		})
	}
}

// A root found only through settings.json is followed (flat layout, as
// --session-dir writes it).
func TestSessionDirFromSettingsIsFollowed(t *testing.T) {
	agent := t.TempDir()
	custom := filepath.Join(t.TempDir(), "custom")
	os.WriteFile(filepath.Join(agent, "settings.json"), []byte(`{"sessionDir":"`+custom+`"}`), 0o644)
	settings, _ := os.ReadFile(filepath.Join(agent, "settings.json"))
	roots, err := ResolveRoots(RootsInput{AgentDir: agent, Settings: settings})
	if err != nil || len(roots) != 2 {
		t.Fatalf("roots %v err %v", roots, err)
	}
	s := newStore()
	start(t, Config{Roots: roots}, nil, s, nil)
	sess := genSession(40)
	path := writeSession(t, custom, sess)
	s.waitFor(t, "file in sessionDir", func() bool { return s.entriesMatch(path, sess) })
}

func TestFileSessionID(t *testing.T) {
	for _, c := range []struct {
		path, id string
		ok       bool
	}{
		{"/s/2026-11-29T10-00-00-000Z_0193e6c4-aaaa-7000-8000-000000000001.jsonl", "0193e6c4-aaaa-7000-8000-000000000001", true},
		{"/s/2026-11-29T10-00-00-000Z_my_id.v2-1.jsonl", "my_id.v2-1", true}, // a caller's id may hold '_'
		{"/s/0193e6c4-aaaa-7000-8000-000000000001.jsonl", "", false},         // no timestamp
		{"/s/2026-11-29T10-00-00-000Z_0193e6c4", "", false},                  // not .jsonl
		{"/s/2026-11-29T10-00-00-000_x.jsonl", "", false},                    // no Z
		{"/s/2026-11-29T10-00-00-000Z_.jsonl", "", false},                    // no id
		{"/s/2026-11-29T10-00-00-000Z_a b.jsonl", "", false},                 // not pi's alphabet
	} {
		id, ok := FileSessionID(c.path)
		if id != c.id || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.path, id, ok, c.id, c.ok)
		}
	}
}
