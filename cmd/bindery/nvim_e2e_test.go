package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// nvimOrSkip finds Neovim; CI installs it (.ci/run), so there a missing
// nvim fails the test instead of skipping it.
func nvimOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("nvim")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nvim is not installed (apt-get install neovim)")
		}
		t.Skip("nvim is not installed")
	}
	return p
}

func pluginDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../../integrations/nvim")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNeovimFormat runs the plugin's pure table tests in a real nvim.
func TestNeovimFormat(t *testing.T) {
	nvim := nvimOrSkip(t)
	dir := pluginDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "--cmd", "set rtp^="+dir,
		"-c", "luafile "+filepath.Join(dir, "test", "format_spec.lua"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all cases pass") {
		t.Fatalf("format_spec.lua: %v\n%s", err, out)
	}
}

// TestNeovimPlugin runs the plugin in a real `nvim --headless` against a
// real `bindery serve`: the statusline follows the workspace's pi session
// from the live feed (a compile's kept and stripped thinking, the last
// strip's reason, cache hit ratio, today's spend), says so when the daemon
// goes away, and picks the feed up again when it is back; :Bindery tail,
// sessions, show and report open what they say.
func TestNeovimPlugin(t *testing.T) {
	nvim := nvimOrSkip(t)
	d := newDaemon(t)
	h := newHost(t)
	const sid = "0193e6c4-dddd-7000-8000-000000000001"
	ps := newPiSession(t, d.agent, sid) // cwd /tmp/project
	now := func() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }
	parent := ""
	turn := 0
	// round: a user entry, a compile at it, the judge's answer written to
	// the session file as pi writes it (with pi's cost, today), an accept.
	round := func() *api.CompileAnswer {
		t.Helper()
		turn++
		uid, aid := fmt.Sprintf("u%d", turn), fmt.Sprintf("a%d", turn)
		text := fmt.Sprintf("turn %d", turn)
		ps.append(map[string]any{"type": "message", "id": uid, "parentId": nilIfEmpty(parent), "timestamp": now(),
			"message": map[string]any{"role": "user", "content": text, "timestamp": 1}})
		h.messages = append(h.messages, map[string]any{"role": "user", "content": text})
		ans := h.roundTrip(d, api.CompileCall{Conversation: sid, Branch: uid, SessionFile: ps.path}, func(reply json.RawMessage) {
			ps.assistantAt(aid, uid, reply, h.model, now(), map[string]any{"input": 10, "output": 100, "cacheRead": 900, "cacheWrite": 100,
				"totalTokens": 1110, "cost": map[string]any{"input": 0.01, "output": 0.2, "cacheRead": 0.04, "cacheWrite": 0.25, "total": 0.5}})
		})
		parent = aid
		return ans
	}
	round()
	waitFor(t, "the first turn to be ingested", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 2, sessionState(s, err)
	})

	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	dir := pluginDir(t)
	cmd := exec.CommandContext(ctx, nvim, "--headless", "-u", "NONE", "-i", "NONE", "--cmd", "set rtp^="+dir,
		"-c", "luafile "+filepath.Join(dir, "test", "e2e.lua"))
	cmd.Env = append(os.Environ(), "BINDERY_BIN="+d.bin, "BINDERY_SOCKET="+d.sock, "BINDERY_TEST_OUT="+out,
		"BINDERY_TEST_WORKSPACE=/tmp/project")
	nvimOut := &lockedWriter{w: new(bytes.Buffer)}
	cmd.Stdout, cmd.Stderr = nvimOut, nvimOut
	// nvim's output pipe may outlive nvim in a job it started: Wait does
	// not wait for that once nvim itself has exited.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			nvimOut.mu.Lock()
			t.Logf("nvim output:\n%s", nvimOut.w.String())
			nvimOut.mu.Unlock()
		}
	})

	statusLog := func() []string {
		b, _ := os.ReadFile(filepath.Join(out, "status.log"))
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	waitStatus := func(what string, ok func(string) bool) {
		t.Helper()
		waitFor(t, "the statusline to show "+what, func() (bool, string) {
			lines := statusLog()
			last := lines[len(lines)-1]
			return ok(last), fmt.Sprintf("statusline %q", last)
		})
	}
	ask := func(action string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(out, "do-"+action), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "nvim to run :Bindery "+action, func() (bool, string) {
			_, err := os.Stat(filepath.Join(out, "done-"+action))
			return err == nil, fmt.Sprint(err)
		})
		os.Remove(filepath.Join(out, "done-"+action))
	}
	readOut := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(b)
	}

	// Started after the first turn: the session, its cache and spend are
	// known; its last compile is not (the feed starts live).
	waitStatus("the workspace's session with its figures", func(s string) bool {
		return s == "bindery · no compile yet · cache 89% · $0.50 today"
	})
	ask("tail")

	// The host edits its history: the next compile strips the first
	// reply's thinking, and the statusline says so from the feed.
	h.messages[0] = map[string]any{"role": "user", "content": "turn 1 (edited)"}
	if ans := round(); ans.ThinkingStripped != 1 || ans.ThinkingKept != 0 {
		t.Fatalf("second turn: stripped %d kept %d, want 1 and 0", ans.ThinkingStripped, ans.ThinkingKept)
	}
	waitStatus("the strip and the new spend", func(s string) bool {
		return s == "bindery · kept 0 stripped 1 · last strip prefix-changed · cache 89% · $1.00 today"
	})
	ask("dumptail")
	if tail := readOut("tail.out"); !strings.Contains(tail, "compile  "+sid+" kept 0 stripped 1") ||
		!strings.Contains(tail, "strip    "+sid+" messages.1.content.0 prefix-changed") {
		t.Fatalf("tail split:\n%s", tail)
	}
	ask("sessions")
	if s := readOut("sessions.out"); !strings.Contains(s, sid[:api.MinShortID]) || !strings.Contains(s, "/tmp/project") {
		t.Fatalf(":Bindery sessions:\n%s", s)
	}
	// A conversation of bindery proxy (no session file, no workspace):
	// :Bindery conversations lists it with its replies' cache figures.
	pc, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "claude-code:nvim-probe", Branch: "main",
		Request: json.RawMessage(`{"model":"claude-opus-5-5","messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: pc.CompileID, Reply: json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"hello"}]}`),
		Usage: json.RawMessage(`{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":900,"cache_creation_input_tokens":100}`)}); err != nil {
		t.Fatal(err)
	}
	ask("conversations")
	if s := readOut("conversations.out"); !strings.Contains(s, "claude-code:nvim-probe") || !strings.Contains(s, "1 reply · read 900 · write 100 · uncached 12 · hit 89%") {
		t.Fatalf(":Bindery conversations:\n%s", s)
	}
	ask("show")
	if s := readOut("show.out"); !strings.Contains(s, sid) || !strings.Contains(s, "engaged") {
		t.Fatalf(":Bindery show:\n%s", s)
	}
	ask("report")
	waitFor(t, "the report chart to be opened", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(out, "report.out"))
		if err != nil {
			return false, err.Error()
		}
		chart, err := os.ReadFile(strings.TrimSpace(string(b)))
		return err == nil && strings.Contains(string(chart), "<svg"), fmt.Sprintf("%d bytes, %v", len(chart), err)
	})

	// The daemon goes away and comes back: the statusline says so, and
	// the feed resumes after the last event it saw.
	d.stop(true)
	waitStatus("the daemon down", func(s string) bool { return s == "bindery down" })
	d.start()
	waitStatus("the daemon back", func(s string) bool { return s != "bindery down" })
	if ans := round(); ans.ThinkingStripped != 1 || ans.ThinkingKept != 1 {
		t.Fatalf("third turn: stripped %d kept %d, want 1 and 1", ans.ThinkingStripped, ans.ThinkingKept)
	}
	waitStatus("the compile after the restart", func(s string) bool {
		return strings.HasPrefix(s, "bindery · kept 1 stripped 1 · last strip released")
	})
	if err := os.WriteFile(filepath.Join(out, "do-quit"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("nvim exited: %v", err)
		}
	case <-time.After(60 * time.Second):
		ps, _ := exec.Command("ps", "-ef", "--forest").Output()
		t.Fatalf("nvim did not quit; statusline log:\n%s\nout folder: %v\nprocesses:\n%s", strings.Join(statusLog(), "\n"), listDir(out), ps)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func listDir(dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
