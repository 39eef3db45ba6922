package watcher

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// AgentDir is pi's agent directory: $PI_CODING_AGENT_DIR (with ~ expanded)
// if set, else ~/.pi/agent.
func AgentDir(getenv func(string) string, home string) string {
	if d := strings.TrimSpace(getenv("PI_CODING_AGENT_DIR")); d != "" {
		return expandHome(d, home)
	}
	return filepath.Join(home, ".pi", "agent")
}

// RootsInput is what ResolveRoots reads: no I/O, so the caller reads the
// environment and <agentDir>/settings.json.
type RootsInput struct {
	AgentDir      string
	Home          string
	SessionDirEnv string // $PI_CODING_AGENT_SESSION_DIR
	Settings      []byte // contents of <agentDir>/settings.json; nil if absent
	// Flat lists bindery's own extra session folders (pi --session-dir
	// style: files directly inside).
	Flat []string
}

// ResolveRoots returns the directories to follow:
//
//   - <agentDir>/sessions, recursively (one folder per project);
//   - $PI_CODING_AGENT_SESSION_DIR and the sessionDir key of settings.json,
//     as later pi versions read them, recursively (the layout inside them
//     is not pinned down, and a recursive root also covers a flat one);
//   - each Flat folder, non-recursively.
//
// "~" and "~/..." are expanded; a relative sessionDir is taken relative to
// the agent directory (where settings.json lives), a relative env value or
// Flat folder relative to the current directory. Duplicates are merged. A
// settings.json that is not a JSON object is reported in err, with the other
// roots still returned.
func ResolveRoots(in RootsInput) (roots []Root, err error) {
	add := func(dir string, recursive bool) {
		dir = filepath.Clean(dir)
		for i := range roots {
			if roots[i].Dir == dir {
				roots[i].Recursive = roots[i].Recursive || recursive
				return
			}
		}
		roots = append(roots, Root{Dir: dir, Recursive: recursive})
	}
	abs := func(p, base string) string {
		p = expandHome(p, in.Home)
		if !filepath.IsAbs(p) {
			if base != "" {
				return filepath.Join(base, p)
			}
			if a, aerr := filepath.Abs(p); aerr == nil {
				return a
			}
		}
		return p
	}
	if in.AgentDir != "" {
		add(filepath.Join(in.AgentDir, "sessions"), true)
	}
	if d := strings.TrimSpace(in.SessionDirEnv); d != "" {
		add(abs(d, ""), true)
	}
	if len(in.Settings) > 0 {
		var s struct {
			SessionDir any `json:"sessionDir"`
		}
		if jerr := json.Unmarshal(in.Settings, &s); jerr != nil {
			err = fmt.Errorf("settings.json: %w", jerr)
		} else if d, ok := s.SessionDir.(string); ok && strings.TrimSpace(d) != "" {
			add(abs(strings.TrimSpace(d), in.AgentDir), true)
		}
	}
	for _, d := range in.Flat {
		if d = strings.TrimSpace(d); d != "" {
			add(abs(d, ""), false)
		}
	}
	return roots, err
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// FileSessionID is the session id in a pi session file's name,
// <ISO timestamp with ':' and '.' as '-'>_<sessionId>.jsonl
// (pi-sessions.md §1). The timestamp holds no '_', so the id is all after
// the first one: a UUID, or a caller-provided id matching [A-Za-z0-9._-].
func FileSessionID(path string) (string, bool) {
	name, ok := strings.CutSuffix(filepath.Base(path), ".jsonl")
	if !ok {
		return "", false
	}
	ts, id, ok := strings.Cut(name, "_")
	if !ok || !strings.HasSuffix(ts, "Z") || id == "" {
		return "", false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "", false
		}
	}
	return id, true
}
