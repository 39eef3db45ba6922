package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// TestEveryCommandFits80Columns runs every command, its -h included, on a
// real archive (pi's own shapes in testdata/pi, generated sessions, and
// two sessions whose ids share their first 9 characters) and checks the
// README's promise: no line wider than 80 columns when the output is not
// a wider terminal, and every session id printed as its shortest unique
// prefix (a whole id only inside a file path, or where the prefix is the
// whole id). Issue 32 found -h at up to 167 columns and tables at 93.
func TestEveryCommandFits80Columns(t *testing.T) {
	e := newE2E(t)
	for i := range 2 {
		s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(40 + i), Turns: 4, Cwd: "/home/dev/src/app"})
		if err := s.WriteFile(filepath.Join(e.sessions, "2026-03-01T10-00-0"+string(rune('0'+i))+"-000Z_"+s.ID+".jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "pi", "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.sessions, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reply := json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"hi"}]}`)
	twins := []string{"0193e6c4-a111-7000-8000-000000000001", "0193e6c4-b222-7000-8000-000000000002"}
	for _, id := range twins {
		ps := newPiSession(t, e.agent, id)
		ps.user("u1", "", "hello")
		ps.assistant("a1", "u1", reply, "claude-sonnet-4-5")
	}
	e.serve()
	want := 2 + len(files) + len(twins)
	var all []api.Session
	waitFor(t, "the archive to be ingested", func() (bool, string) {
		m, err := e.sessionsJSON()
		if err != nil {
			return false, err.Error()
		}
		all = all[:0]
		for _, s := range m {
			all = append(all, s)
		}
		return len(m) == want, ""
	})
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	short := api.ShortIDs(ids)
	if short[twins[0]] != "0193e6c4-a" {
		t.Fatalf("the twins' prefix is %q", short[twins[0]])
	}

	req := filepath.Join(e.root, "req.json")
	os.WriteFile(req, []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`), 0o644)
	replyFile := filepath.Join(e.root, "reply.json")
	os.WriteFile(replyFile, reply, 0o644)
	out, serr, code := e.run("compile", "--conversation", twins[0], "--file", req, "--json")
	var comp api.CompileAnswer
	if code != 0 || json.Unmarshal([]byte(out), &comp) != nil {
		t.Fatalf("compile --json: exit %d %s%s", code, out, serr)
	}

	cmds := [][]string{
		{"-h"}, {"version"}, {"status"}, {"sessions"}, {"sessions", "--cwd", "/home/dev/src"},
		{"sessions", "--cwd", "/nonexistent"},
		{"show", short[twins[0]]}, {"show", short[all[0].ID]},
		{"report"}, {"report", "--session", short[twins[1]]},
		{"whatif"}, {"whatif", "--session", short[twins[1]]},
		{"compile", "--conversation", twins[1], "--file", req},
		{"compile", "--conversation", twins[1], "--file", req, "--plan", "--dry-run"},
		{"accept", "--compile", comp.CompileID, "--reply", replyFile},
		{"release", "--conversation", twins[0], "--signature", "c2lnbmF0dXJl"},
		{"service", "-h"}, {"conversations"}, {"show", twins[1]},
	}
	for _, c := range []string{"serve", "status", "sessions", "show", "compile", "accept", "release", "tail", "report", "whatif", "version", "proxy", "conversations"} {
		cmds = append(cmds, []string{c, "-h"})
	}
	// A path's file name carries the whole id; anything else may not.
	path := regexp.MustCompile(`\S*(/|\.jsonl)\S*`)
	check := func(name, text string) {
		t.Helper()
		for _, l := range strings.Split(text, "\n") {
			// A path is printed whole, to be copied: the one thing
			// allowed past 80 columns (pathLine).
			if n := utf8.RuneCountInString(path.ReplaceAllString(l, "P")); n > 80 {
				t.Errorf("%s: a line of %d columns:\n%s", name, n, l)
			}
		}
		bare := path.ReplaceAllString(text, "")
		for id, p := range short {
			if p != id && strings.Contains(bare, id) {
				t.Errorf("%s prints session %s whole, not as %s:\n%s", name, id, p, text)
			}
		}
	}
	for _, args := range cmds {
		out, serr, code := e.run(args...)
		name := "bindery " + strings.Join(args, " ")
		if code != 0 {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, serr)
		}
		check(name, out+serr)
	}

	// tail replays the feed (--since 0) and is stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tc := exec.CommandContext(ctx, e.bin, "tail", "--since", "0")
	tc.Env = e.env
	tout, _ := tc.Output()
	if !strings.Contains(string(tout), "── "+short[twins[0]]+"\n") {
		t.Errorf("tail does not name the conversation by its prefix %s:\n%s", short[twins[0]], tout)
	}
	check("bindery tail --since 0", string(tout))

	// The rough edges of issue 32, each in its place.
	if out, _, _ := e.run("sessions", "--cwd", "/nonexistent"); !strings.Contains(out, "no pi session ran in /nonexistent") || !strings.Contains(out, "does not exist here") {
		t.Errorf("sessions --cwd /nonexistent:\n%s", out)
	}
	if out, _, _ := e.run("sessions"); !strings.Contains(out, "ENGAGED yes: bindery accepted a reply") {
		t.Errorf("sessions does not explain ENGAGED:\n%s", out)
	}
	if out, _, _ := e.run("whatif"); !strings.Contains(out, "Not bindery report's figures") {
		t.Errorf("whatif does not name how its figures differ from report's:\n%s", out)
	}
	var v struct{ Version string }
	if out, _, code := e.run("version", "--json"); code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" {
		t.Errorf("version --json: exit %d %q", code, out)
	}
	for _, args := range [][]string{{"show", ""}, {"show", " "}, {"report", "--session", ""}, {"whatif", "--session", ""}, {"tail", "--conversation", ""}} {
		_, serr, code := e.run(args...)
		if code != 2 || !strings.Contains(serr, "empty") || strings.Contains(serr, "no endpoint") {
			t.Errorf("bindery %q: exit %d, want 2 naming the empty id: %s", args, code, serr)
		}
	}
}

// On an empty archive whatif says there is nothing to replay instead of a
// header over no rows, and report lists no session table.
func TestEmptyArchiveSaysSo(t *testing.T) {
	e := newE2E(t)
	e.serve()
	out, serr, code := e.run("whatif")
	if code != 0 || !strings.Contains(out, "no session to replay yet") || strings.Contains(out, "policy") {
		t.Errorf("whatif on an empty archive: exit %d\n%s%s", code, out, serr)
	}
	if out, _, code := e.run("sessions"); code != 0 || !strings.Contains(out, "no sessions yet") {
		t.Errorf("sessions on an empty archive: exit %d\n%s", code, out)
	}
}
