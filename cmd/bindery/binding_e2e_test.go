package main

// End-to-end tests of compile, accept, release and the event feed against
// the real `bindery` binary on a real socket, with binding/judgetest playing
// the provider. The daemon is restarted (gracefully, or with kill -9)
// between calls: nothing compiled or accepted may be forgotten, and the
// judge must never refuse a request bindery rewrote.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding/judgetest"
)

// bindDaemon is a `bindery serve` process and its directories, which
// survive restarts.
type bindDaemon struct {
	t      testing.TB
	bin    string
	dir    string
	sock   string
	agent  string
	extra  []string
	cmd    *exec.Cmd
	done   chan error
	client *api.Client
	logs   int
}

func newDaemon(t testing.TB, extra ...string) *bindDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	d := &bindDaemon{t: t, bin: buildBindery(t), dir: dir, sock: filepath.Join(dir, "s"), agent: filepath.Join(dir, "agent"), extra: extra}
	if err := os.MkdirAll(filepath.Join(d.agent, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.client = api.NewClient(d.sock)
	t.Cleanup(func() {
		d.stop(false)
		if t.Failed() {
			for i := 0; i < d.logs; i++ {
				b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("log%d", i)))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("daemon log %d:\n%s", i, b)
			}
		}
		os.RemoveAll(dir)
	})
	d.start()
	return d
}

func (d *bindDaemon) start() {
	d.t.Helper()
	logf, err := os.Create(filepath.Join(d.dir, fmt.Sprintf("log%d", d.logs)))
	if err != nil {
		d.t.Fatal(err)
	}
	d.logs++
	args := append([]string{"serve", "--state-dir", filepath.Join(d.dir, "state"), "--socket", d.sock,
		"--agent-dir", d.agent, "--rescan", "200ms", "--log-level", "debug"}, d.extra...)
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+d.dir, "BINDERY_SOCKET=", "NOTIFY_SOCKET=")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd = cmd
	d.done = make(chan error, 1)
	go func() { d.done <- cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := d.client.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case err := <-d.done:
			d.t.Fatalf("bindery serve exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("bindery serve not answering: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the daemon: SIGTERM and a wait, or kill -9.
func (d *bindDaemon) stop(graceful bool) {
	if d.cmd == nil {
		return
	}
	if graceful {
		d.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		d.cmd.Process.Kill()
	}
	select {
	case err := <-d.done:
		if graceful && err != nil {
			d.t.Errorf("graceful stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("daemon did not stop")
	}
	d.cmd = nil
	d.client.Close()
	d.client = api.NewClient(d.sock)
}

// restart stops (gracefully on even n, with kill -9 on odd) and starts.
func (d *bindDaemon) restart(n int) {
	d.t.Helper()
	d.stop(n%2 == 0)
	d.start()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// host is a scripted Anthropic host: it keeps its own history (as the
// host holds it, never rewritten by bindery), sends each request through
// compile, lets the judge answer the rewritten request, and accepts.
type host struct {
	t        testing.TB
	j        *judgetest.Judge
	model    string
	system   string
	tools    []any
	messages []any
	turn     int
}

func newHost(t testing.TB) *host {
	return &host{t: t, j: judgetest.New(judgetest.Options{Reading: judgetest.Documented(), NewAccount: true}), model: "claude-fable-5-2",
		system: "You are terse.",
		tools:  []any{map[string]any{"name": "read", "description": "read a file", "input_schema": map[string]any{"type": "object"}}}}
}

func (h *host) body(system string) []byte {
	b, err := json.Marshal(map[string]any{"model": h.model, "max_tokens": 1024, "system": system, "tools": h.tools,
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 512}, "messages": h.messages})
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *host) reply(toolUse bool) []judgetest.ReplyBlock {
	h.turn++
	rb := []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprintf("thinking %d", h.turn)}}
	if toolUse {
		return append(rb, judgetest.ReplyBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_%d", h.turn), Name: "read", Input: map[string]any{"path": "a.go"}})
	}
	return append(rb, judgetest.ReplyBlock{Type: "text", Text: fmt.Sprintf("answer %d", h.turn)})
}

// roundTrip is one round trip of the host's: compile call (its request the
// host's body), the judge's answer, then (before the accept, where the
// host writes its session file) landed, the accept; the reply joins the
// history.
func (h *host) roundTrip(d *bindDaemon, call api.CompileCall, landed func(reply json.RawMessage)) *api.CompileAnswer {
	h.t.Helper()
	call.Request = h.body(h.system)
	ans, err := d.client.Compile(ctxT(h.t), &call)
	if err != nil {
		h.t.Fatalf("compile on %s at %s: %v", call.Conversation, call.Branch, err)
	}
	res := h.send(ans.Request, h.reply(false))
	if landed != nil {
		landed(res.Reply)
	}
	if _, err := d.client.Accept(ctxT(h.t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply}); err != nil {
		h.t.Fatalf("accept of %s: %v", ans.CompileID, err)
	}
	var msg map[string]any
	if err := json.Unmarshal(res.Reply, &msg); err != nil {
		h.t.Fatal(err)
	}
	h.messages = append(h.messages, msg)
	return ans
}

// send runs the judge on a request bindery rewrote: it must be answered
// (no 400) and no thinking block bindery kept may be dropped or read
// against its binding.
func (h *host) send(body []byte, reply []judgetest.ReplyBlock) judgetest.Result {
	h.t.Helper()
	res := h.j.Answer(judgetest.Call{Body: body, Beta: true}, reply)
	if res.Refused() {
		h.t.Fatalf("the provider refused bindery's request: %d %s (%s)", res.Status, res.Error, res.ErrorCode)
	}
	for _, tr := range res.Transformations {
		h.t.Fatalf("the provider transformed bindery's request: %+v", tr)
	}
	return res
}

// TestScriptedHostSurvivesRestarts runs a conversation (tool loops, a
// history edit, a one-turn system change, a dry run, a fork named with
// parent) through compile and accept, restarting the daemon between every
// pair of calls, alternately gracefully and with kill -9.
func TestScriptedHostSurvivesRestarts(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	restarts := 0
	restart := func() { d.restart(restarts); restarts++ }
	type accepted struct {
		id      string
		stamped int
	}
	var accepts []accepted
	stripped := map[string]int{}

	h.messages = append(h.messages, map[string]any{"role": "user", "content": "start"})
	for turn := 0; turn < 9; turn++ {
		system := h.system
		if turn == 5 {
			system = "HEARTBEAT: check in" // one turn with another system prompt
		}
		if turn == 4 {
			// the host edits history: an earlier user message changes, so
			// every later thinking block's prefix changes
			h.messages[0] = map[string]any{"role": "user", "content": "start (edited)"}
		}
		body := h.body(system)
		if turn == 2 {
			dry, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "conv", Request: body, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			restart()
			_, err = d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: dry.CompileID})
			if !api.IsCode(err, api.CodeDryRunCompile) {
				t.Fatalf("accept of a dry run after a restart: %v", err)
			}
		}
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "conv", Request: body})
		if err != nil {
			t.Fatalf("turn %d compile: %v", turn, err)
		}
		for _, s := range ans.Strips {
			stripped[s.Reason]++
		}
		if turn >= 1 && !ans.Engaged {
			t.Fatalf("turn %d: not engaged after an accept", turn)
		}
		restart()
		res := h.send(ans.Request, h.reply(turn%3 == 1))
		acc, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply})
		if err != nil {
			t.Fatalf("turn %d accept after a restart: %v", turn, err)
		}
		if acc.Stamped != 1 {
			t.Fatalf("turn %d: accept stamped %d, want the reply's one thinking block", turn, acc.Stamped)
		}
		accepts = append(accepts, accepted{ans.CompileID, acc.Stamped})
		restart()
		// the host keeps the reply as the provider sent it
		var msg map[string]any
		json.Unmarshal(res.Reply, &msg)
		h.messages = append(h.messages, msg)
		if turn%3 == 1 {
			h.messages = append(h.messages, map[string]any{"role": "user", "content": []any{map[string]any{
				"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", h.turn), "content": "package a"}}})
		} else {
			h.messages = append(h.messages, map[string]any{"role": "user", "content": fmt.Sprintf("next %d", turn)})
		}
	}
	if stripped["prefix-changed"] == 0 {
		t.Errorf("the history edit stripped nothing as prefix-changed: %v", stripped)
	}
	if stripped["seed-changed"] == 0 {
		t.Errorf("the one-turn system change stripped nothing as seed-changed: %v", stripped)
	}

	// a fork named with parent starts with the parent's engagement
	ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "conv-fork", Request: h.body(h.system),
		Parent: &api.BranchRef{Conversation: "conv"}})
	if err != nil {
		t.Fatal(err)
	}
	if !ans.Engaged {
		t.Fatal("a fork did not inherit its parent's engagement")
	}
	restart()
	h.send(ans.Request, h.reply(false))

	// nothing accepted was forgotten: every accept repeats as a no-op
	// answering what it recorded
	for _, a := range accepts {
		again, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: a.id})
		if err != nil || !again.Repeated || again.Stamped != a.stamped {
			t.Fatalf("repeated accept of %s: %+v %v", a.id, again, err)
		}
	}
	st, err := d.client.Conversation(ctxT(t), "conv")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, b := range st.Branches {
		total += b.Accepted
	}
	if !st.Engaged || total != len(accepts) || st.Stamps != len(accepts) || len(st.Branches) != 1 || st.Branches[0].Owner != accepts[len(accepts)-1].id {
		t.Fatalf("conversation state after %d restarts: %+v", restarts, st)
	}
	t.Logf("%d restarts; strips by reason: %v", restarts, stripped)
}

// piSession writes a pi session file the way pi does (append only).
type piSession struct {
	t    testing.TB
	id   string
	path string
	n    int
}

func newPiSession(t testing.TB, agent, id string) *piSession {
	dir := filepath.Join(agent, "sessions", "--tmp-project--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &piSession{t: t, id: id, path: filepath.Join(dir, "2026-11-29T10-00-00-000Z_"+id+".jsonl")}
	p.append(map[string]any{"type": "session", "version": 3, "id": id, "timestamp": "2026-11-29T10:00:00.000Z", "cwd": "/tmp/project"})
	return p
}

func (p *piSession) append(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	f, err := os.OpenFile(p.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
	p.n++
}

func (p *piSession) ts() string {
	return time.Date(2026, 11, 29, 10, 0, p.n, 0, time.UTC).Format("2006-01-02T15:04:05.000Z")
}

func (p *piSession) user(id, parent, text string) {
	var par any
	if parent != "" {
		par = parent
	}
	p.append(map[string]any{"type": "message", "id": id, "parentId": par, "timestamp": p.ts(),
		"message": map[string]any{"role": "user", "content": text, "timestamp": 1}})
}

// assistant writes the provider's reply as pi stores it.
func (p *piSession) assistant(id, parent string, reply json.RawMessage, model string) {
	p.assistantAt(id, parent, reply, model, p.ts(), map[string]any{"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 20})
}

// assistantAt is assistant with its timestamp, pi's usage object, and any
// more message fields a pi line writes (pi 1.6: thinkingLevel).
func (p *piSession) assistantAt(id, parent string, reply json.RawMessage, model, ts string, usage map[string]any, more ...map[string]any) {
	var msg struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(reply, &msg); err != nil {
		p.t.Fatal(err)
	}
	var content []any
	for _, b := range msg.Content {
		switch b["type"] {
		case "thinking":
			content = append(content, map[string]any{"type": "thinking", "thinking": b["thinking"], "thinkingSignature": b["signature"]})
		case "redacted_thinking":
			content = append(content, map[string]any{"type": "thinking", "thinking": "[redacted]", "thinkingSignature": b["data"], "redacted": true})
		case "tool_use":
			content = append(content, map[string]any{"type": "toolCall", "id": b["id"], "name": b["name"], "arguments": b["input"]})
		default:
			content = append(content, b)
		}
	}
	message := map[string]any{"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
		"model": model, "stopReason": "stop", "timestamp": 2, "usage": usage}
	for _, m := range more {
		maps.Copy(message, m)
	}
	p.append(map[string]any{"type": "message", "id": id, "parentId": parent, "timestamp": ts, "message": message})
}

// TestPiSessionForksAndFileAttribution runs a pi session: conversation =
// session id, branch = leaf entry id. One reply is never accepted: bindery
// must attribute it from the session file by its parent entry. Then the
// user forks from an earlier entry; the host edits the fork's history, so
// bindery releases blocks on the fork, and going back to the first branch
// those releases must not reach it (they were made after it diverged).
func TestPiSessionForksAndFileAttribution(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	sid := "0193e6c4-aaaa-7000-8000-000000000001"
	ps := newPiSession(t, d.agent, sid)
	restarts := 0
	restart := func() { d.restart(restarts); restarts++ }

	type node struct {
		id, parent string
		msg        any // as sent
	}
	nodes := map[string]node{}
	pathTo := func(leaf string) []any {
		var rev []any
		for id := leaf; id != ""; id = nodes[id].parent {
			rev = append(rev, nodes[id].msg)
		}
		out := make([]any, len(rev))
		for i := range rev {
			out[i] = rev[len(rev)-1-i]
		}
		return out
	}
	entries := 0
	waitIngested := func() {
		waitFor(t, fmt.Sprintf("the watcher to ingest the session's %d entries", entries), func() (bool, string) {
			s, err := d.client.Session(ctxT(t), sid)
			return err == nil && s.Entries == entries, sessionState(s, err)
		})
	}
	// round: a user entry under parent, compile at it, answer, write the
	// reply, and accept unless told not to.
	round := func(uid, parent, text, aid string, accept bool) (ans *api.CompileAnswer) {
		t.Helper()
		ps.user(uid, parent, text)
		entries++
		nodes[uid] = node{uid, parent, map[string]any{"role": "user", "content": text}}
		h.messages = pathTo(uid)
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: sid, Branch: uid, SessionFile: ps.path, Request: h.body(h.system)})
		if err != nil {
			t.Fatalf("compile at %s: %v", uid, err)
		}
		restart()
		res := h.send(ans.Request, h.reply(false))
		ps.assistant(aid, uid, res.Reply, h.model)
		entries++
		var msg map[string]any
		json.Unmarshal(res.Reply, &msg)
		nodes[aid] = node{aid, uid, msg}
		if accept {
			if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply}); err != nil {
				t.Fatalf("accept at %s: %v", uid, err)
			}
			restart()
		}
		return ans
	}

	first := round("u1", "", "hello", "a1", true)
	round("u2", "a1", "more", "a2", true)
	// a reply whose accept never comes: only the session file shows it
	round("u3", "a2", "and more", "a3", false)
	waitIngested()
	waitFor(t, "the reply in the file to be stamped (3 stamps)", func() (bool, string) {
		st, err := d.client.Conversation(ctxT(t), sid)
		return err == nil && st.Stamps == 3, convState(st, err)
	})
	restart()
	ans := round("u4", "a3", "go on", "a4", true)
	if ans.ThinkingStripped != 0 {
		t.Fatalf("the reply seen only in the file was not attributed: strips %+v", ans.Strips)
	}

	// fork from a2: the fork's history edits u2's text, so a2's thinking
	// (and only that) is stripped and released on the fork
	waitIngested()
	nodes["u2"] = node{"u2", "a1", map[string]any{"role": "user", "content": "more (edited on the fork)"}}
	fork := round("u5", "a2", "fork here", "a5", true)
	got := map[string]string{}
	for _, s := range fork.Strips {
		got[s.Path] = s.Reason
	}
	if got["messages.3.content.0"] != "prefix-changed" {
		t.Fatalf("fork strips: %+v", fork.Strips)
	}
	nodes["u2"] = node{"u2", "a1", map[string]any{"role": "user", "content": "more"}}
	waitIngested()

	// back on the first branch: a2's release was made on the fork after
	// the first branch diverged, so it does not reach it
	back := round("u6", "a4", "back to the first branch", "a6", true)
	if back.ThinkingStripped != 0 {
		t.Fatalf("a release on the fork reached the first branch: %+v", back.Strips)
	}
	st, err := d.client.Conversation(ctxT(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Engaged || st.Stamps != 6 || len(st.Releases) != 1 || st.Releases[0].Branch != "u5" {
		t.Fatalf("session state: %+v", st)
	}
	// every reply landed in the file: its stamp links to its entry
	waitFor(t, "6 stamps linked to their session entries", func() (bool, string) {
		st, err := d.client.Conversation(ctxT(t), sid)
		return err == nil && st.StampsLinked == 6, convState(st, err)
	})

	// The session's branches are its tree's two leaves (design/binding.md:
	// a pi branch is identified by its path), not one per compiled leaf:
	// a5 holds the compiles at u1, u2 and the fork's u5 and the release
	// made there; a6 the compiles at u1..u4 (u3's never accepted) and u6,
	// and no release (the fork's was made after a6's path diverged).
	waitIngested()
	st, err = d.client.Conversation(ctxT(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	wantBranches := []api.BranchState{
		{Branch: "a5", Owner: fork.CompileID, Accepted: 3, Stamps: 3, Releases: 1, Entries: 6},
		{Branch: "a6", Owner: back.CompileID, Accepted: 4, Unaccepted: 1, Stamps: 5, Current: true, Entries: 10},
	}
	if !st.SessionTree || len(st.Branches) != 2 || st.Branches[0] != wantBranches[0] || st.Branches[1] != wantBranches[1] || len(st.CompileLeaves) != 6 {
		t.Fatalf("session branches: sessionTree %v\n got %+v\nwant %+v\ncompile leaves %+v", st.SessionTree, st.Branches, wantBranches, st.CompileLeaves)
	}
	for _, l := range st.CompileLeaves {
		if l.Branch == "u1" && (l.Owner != first.CompileID || l.Accepted != 1) {
			t.Fatalf("compile leaf u1: %+v", l)
		}
	}
	det, err := d.client.Session(ctxT(t), sid)
	if err != nil || len(det.Frontier) != 2 || det.Frontier[0].Branch != "a5" || det.Frontier[0].Owner != fork.CompileID ||
		det.Frontier[1].Branch != "a6" || det.Frontier[1].Owner != back.CompileID {
		t.Fatalf("session frontier owners: %+v %v", det.Frontier, err)
	}
	out, errOut, code := d.runCLI(ctxT(t), "show", sid)
	if code != 0 || !strings.Contains(out, "2 branches (session tree leaves; 6 leaves compiled at)") ||
		!strings.Contains(out, back.CompileID) || !strings.Contains(out, fork.CompileID) || strings.Contains(out, first.CompileID) {
		t.Fatalf("show %s: %d\n%s%s", sid, code, out, errOut)
	}
	out, errOut, code = d.runCLI(ctxT(t), "show", "--json", sid)
	if code != 0 || !strings.Contains(out, `"branches"`) {
		t.Fatalf("show --json: %d %s%s", code, out, errOut)
	}

	// pi forks into a new session file: the header names the parent
	// session, and the path to a4 is copied with its entry ids. The new
	// conversation starts with the parent's engagement and releases
	// (binding.md): a2's block, released on the parent's other branch, is
	// stripped, and the provider accepts what is sent.
	sid2 := "0193e6c4-aaaa-7000-8000-000000000003"
	ps2 := &piSession{t: t, id: sid2, path: filepath.Join(filepath.Dir(ps.path), "2026-11-29T11-00-00-000Z_"+sid2+".jsonl")}
	ps2.append(map[string]any{"type": "session", "version": 3, "id": sid2, "timestamp": "2026-11-29T11:00:00.000Z", "cwd": "/tmp/project", "parentSession": ps.path})
	lines, err := os.ReadFile(ps.path)
	if err != nil {
		t.Fatal(err)
	}
	onPath := map[string]bool{"u1": true, "a1": true, "u2": true, "a2": true, "u3": true, "a3": true, "u4": true, "a4": true}
	for _, line := range bytes.Split(lines, []byte("\n")) {
		var e struct{ ID string }
		if json.Unmarshal(line, &e) == nil && onPath[e.ID] {
			f, _ := os.OpenFile(ps2.path, os.O_APPEND|os.O_WRONLY, 0o644)
			f.Write(append(line, '\n'))
			f.Close()
		}
	}
	ps2.user("u7", "a4", "forked into a new file")
	nodes["u7"] = node{"u7", "a4", map[string]any{"role": "user", "content": "forked into a new file"}}
	waitFor(t, "the forked session file to be ingested (9 entries)", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid2)
		return err == nil && s.Entries == 9, sessionState(s, err)
	})
	h.messages = pathTo("u7")
	nf, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: sid2, Branch: "u7", Request: h.body(h.system)})
	if err != nil {
		t.Fatal(err)
	}
	// a1's block goes too: a3 was minted after a2, so a kept a1 followed
	// by a3 would be a gap (the run rule keeps a3, a4)
	nfs := map[string]string{}
	for _, st := range nf.Strips {
		nfs[st.Path] = st.Reason
	}
	if !nf.Engaged || len(nfs) != 2 || nfs["messages.3.content.0"] != "released" || nfs["messages.1.content.0"] != "gap" {
		t.Fatalf("fork into a new file: engaged %v strips %+v", nf.Engaged, nf.Strips)
	}
	restart()
	h.send(nf.Request, h.reply(false))
	t.Logf("%d restarts", restarts)
}

// TestCrashDuringAccepts kills the daemon with SIGKILL at random moments
// while a host streams compiles and accepts; after each restart every
// acknowledged accept is intact and every acknowledged compile can still
// be accepted.
func TestCrashDuringAccepts(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	body := h.body(h.system)
	rng := rand.New(rand.NewPCG(1, 2))
	type ack struct {
		id      string
		stamped int
	}
	var acked []ack
	var pending []string // compiled, acknowledged, not yet accepted
	// Replies are made on the stream's goroutine while the test's own
	// goroutine draws pauses from rng: number them instead of sharing rng.
	var replies atomic.Int64
	reply := func() json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"sig-%d"},{"type":"text","text":"ok"}]}`, replies.Add(1)))
	}
	for round := 0; round < 6; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			conv := fmt.Sprintf("crash-%d", round%3)
			for ctx.Err() == nil {
				ans, err := d.client.Compile(ctx, &api.CompileCall{Conversation: conv, Request: body})
				if err != nil {
					return
				}
				mu.Lock()
				pending = append(pending, ans.CompileID)
				mu.Unlock()
				acc, err := d.client.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: reply()})
				if err != nil {
					return
				}
				mu.Lock()
				pending = pending[:len(pending)-1]
				acked = append(acked, ack{ans.CompileID, acc.Stamped})
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		d.stop(false) // kill -9 mid-stream
		cancel()
		<-stopped
		d.start()
		mu.Lock()
		for _, a := range acked {
			again, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: a.id})
			if err != nil || !again.Repeated || again.Stamped != a.stamped {
				t.Fatalf("round %d: acknowledged accept %s lost: %+v %v", round, a.id, again, err)
			}
		}
		// a compile acknowledged but not accepted is still acceptable
		for _, id := range pending {
			if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: id, Reply: reply()}); err != nil {
				t.Fatalf("round %d: acknowledged compile %s lost: %v", round, id, err)
			}
		}
		pending = nil
		mu.Unlock()
	}
	if len(acked) < 10 {
		t.Fatalf("only %d accepts acknowledged: the stream hardly ran", len(acked))
	}
	t.Logf("%d acknowledged accepts survived 6 kills", len(acked))
}

// rawPost posts body to path over the socket and returns the status and
// decoded error code.
func rawPost(t testing.TB, sock, path string, body []byte) (int, string) {
	t.Helper()
	status, answer := postBody(t, sock, path, body)
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	json.Unmarshal(answer, &eb)
	return status, eb.Error.Code
}

func TestBindingErrors(t *testing.T) {
	d := newDaemon(t, "--max-body", "1MiB")
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}

	big := fmt.Appendf(nil, `{"conversation":"c","request":{"messages":[{"role":"user","content":"%s"}]}}`, strings.Repeat("x", 2<<20))
	if st, code := rawPost(t, d.sock, "/v1/compile", big); st != http.StatusRequestEntityTooLarge || code != api.CodeBodyTooLarge {
		t.Errorf("oversized body: %d %s", st, code)
	}
	for _, bad := range []string{`{"conversation":"c","request":{"messages":[}`, `{"conversation":"c",`, `[1,2]`,
		`{"request":{"messages":[]}}`, `{"conversation":"c"}`, `{"conversation":"c","request":{"a":1,"a":2}}`, `{"conversation":"c","return":"all","request":{}}`} {
		if st, code := rawPost(t, d.sock, "/v1/compile", []byte(bad)); st != http.StatusBadRequest || code != api.CodeBadRequest {
			t.Errorf("compile %s: %d %s", bad, st, code)
		}
	}
	if st, code := rawPost(t, d.sock, "/v1/accept", []byte(`{"compileId":`)); st != http.StatusBadRequest || code != api.CodeBadRequest {
		t.Errorf("malformed accept: %d %s", st, code)
	}
	if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: "c_unknown"}); !api.IsCode(err, api.CodeUnknownCompile) {
		t.Errorf("unknown compile: %v", err)
	}
	if _, err := d.client.Conversation(ctxT(t), "nobody"); !api.IsCode(err, api.CodeUnknownConversation) {
		t.Errorf("unknown conversation: %v", err)
	}
	dry, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "c", Request: h.body(h.system), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: dry.CompileID}); !api.IsCode(err, api.CodeDryRunCompile) {
		t.Errorf("dry-run accept: %v", err)
	}
	// not a Messages body: an empty plan, the body back untouched
	other := json.RawMessage(`{"model":"gpt-x", "input":"hi"}`)
	ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "c", Request: other})
	if err != nil || ans.Bound || len(ans.Strips) != 0 || !bytes.Equal(ans.Request, other) {
		t.Errorf("non-Messages body: %+v %v", ans, err)
	}
	if acc, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID}); err != nil || !acc.Accepted {
		t.Errorf("accept of an unbound compile: %+v %v", acc, err)
	}
	// a repeated accept records nothing twice
	real, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "c", Request: h.body(h.system)})
	if err != nil {
		t.Fatal(err)
	}
	res := h.send(real.Request, h.reply(false))
	// a reply that is not an assistant message is refused and records nothing
	if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: real.CompileID, Reply: json.RawMessage(`{"role":"user","content":"x"}`)}); !api.IsCode(err, api.CodeBadRequest) {
		t.Fatalf("accept with a user message as reply: %v", err)
	}
	first, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: real.CompileID, Reply: res.Reply})
	if err != nil || first.Repeated || first.Stamped != 1 {
		t.Fatalf("first accept: %+v %v", first, err)
	}
	again, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: real.CompileID, Reply: res.Reply})
	if err != nil || !again.Repeated || again.Stamped != 1 {
		t.Fatalf("repeated accept: %+v %v", again, err)
	}
	if st, _ := d.client.Conversation(ctxT(t), "c"); st == nil || st.Stamps != 1 {
		t.Fatalf("stamps after a repeated accept: %+v", st)
	}
	// return: plan has no request
	plan, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "c", Request: h.body(h.system), Return: api.ReturnPlan})
	if err != nil || plan.Request != nil {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	// release errors
	if _, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: "c", CompileID: real.CompileID, Path: "messages.0.content.0"}); !api.IsCode(err, api.CodeBadRequest) {
		t.Errorf("release of a path that is no thinking block: %v", err)
	}
	if _, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: "c", CompileID: "c_nope", Path: "messages.1.content.0"}); !api.IsCode(err, api.CodeUnknownCompile) {
		t.Errorf("release of an unknown compile: %v", err)
	}
}

// TestReleaseAfterRefusal: a host that saw a 400 naming a block releases
// it; the next compile strips it (released) and every later block of that
// request.
func TestReleaseAfterRefusal(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	for i := 0; i < 3; i++ {
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "r", Request: h.body(h.system)})
		if err != nil {
			t.Fatal(err)
		}
		res := h.send(ans.Request, h.reply(false))
		if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply}); err != nil {
			t.Fatal(err)
		}
		var msg map[string]any
		json.Unmarshal(res.Reply, &msg)
		h.messages = append(h.messages, msg, map[string]any{"role": "user", "content": fmt.Sprint("more ", i)})
	}
	ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "r", Request: h.body(h.system)})
	if err != nil || ans.ThinkingStripped != 0 {
		t.Fatalf("compile: %+v %v", ans, err)
	}
	rel, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: "r", CompileID: ans.CompileID, Path: "messages.3.content.0"})
	if err != nil || rel.Released != 2 {
		t.Fatalf("release: %+v %v", rel, err)
	}
	d.restart(1)
	next, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "r", Request: h.body(h.system)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range next.Strips {
		got[s.Path] = s.Reason
	}
	if got["messages.3.content.0"] != "released" || got["messages.5.content.0"] != "released" || len(got) != 2 {
		t.Fatalf("after the release: %+v", next.Strips)
	}
	h.send(next.Request, h.reply(false))
}

// The event feed over the real daemon: resume with since (across a
// restart), filter by conversation, and a client that never reads is
// dropped while another keeps receiving every event.
func TestEventFeedE2E(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	body := h.body(h.system)
	for i := 0; i < 5; i++ {
		conv := []string{"a", "b"}[i%2]
		if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Request: body}); err != nil {
			t.Fatal(err)
		}
	}
	d.restart(0)
	st, err := d.client.Events(ctxT(t), api.EventsOptions{Conversation: "b", HasSince: true, Since: 0})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for len(seqs) < 2 {
		e, err := st.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if e.Conversation != "b" || e.Type != api.EventCompile {
			t.Fatalf("filtered replay: %+v", e)
		}
		seqs = append(seqs, e.Seq)
	}
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "a", Request: body}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "b", Request: body}); err != nil {
		t.Fatal(err)
	}
	e, err := st.Next(ctxT(t))
	if err != nil || e.Conversation != "b" || e.Seq <= seqs[1] {
		t.Fatalf("live after replay: %+v %v", e, err)
	}
	st.Close()
	// seqs continue across restarts and never repeat
	all, err := d.client.Events(ctxT(t), api.EventsOptions{HasSince: true, Since: 0})
	if err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 7; want++ {
		e, err := all.Next(ctxT(t))
		if err != nil || e.Seq != want {
			t.Fatalf("replay of everything: want seq %d, got %+v %v", want, e, err)
		}
	}
	all.Close()

	// a slow client: subscribes and never reads
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", d.sock)
	}}}
	slow, _, err := websocket.Dial(ctxT(t), "ws://bindery/v1/events", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.CloseNow()
	fast, err := d.client.Events(ctxT(t), api.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a large request makes large compile events? No: events are small,
	// so send many; the fast reader must see every one, in order.
	const n = 3000
	got := make(chan error, 1)
	go func() {
		var last int64
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			e, err := fast.Next(ctx)
			cancel()
			if err != nil {
				got <- fmt.Errorf("fast client after %d events: %w", i, err)
				return
			}
			if last != 0 && e.Seq != last+1 {
				got <- fmt.Errorf("fast client: seq %d after %d", e.Seq, last)
				return
			}
			last = e.Seq
		}
		got <- nil
	}()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				if _, err := d.client.Compile(context.Background(), &api.CompileCall{Conversation: fmt.Sprint("load", w), Request: body, Return: api.ReturnPlan}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// the slow client was cut off with a reason (or, when even the close
	// frame could not be written into its full socket, just closed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, _, err := slow.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) && ce.Code != websocket.StatusPolicyViolation {
			t.Fatalf("slow client closed with %v", ce)
		}
		if ctx.Err() != nil {
			t.Fatal("the slow client was never dropped")
		}
		t.Logf("slow client dropped: %v", err)
		break
	}
}

// A compile naming a session file outside the watched folders makes the
// daemon follow it (api.md sessionFile), and the file stays followed
// across a restart.
func TestCompileFollowsSessionFile(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	sid := "0193e6c4-bbbb-7000-8000-000000000002"
	elsewhere := filepath.Join(d.dir, "elsewhere")
	ps := newPiSession(t, elsewhere, sid) // under elsewhere/sessions/..., not the agent dir
	ps.user("u1", "", "hello")
	h.messages = []any{map[string]any{"role": "user", "content": "hello"}}
	if _, err := d.client.Session(ctxT(t), sid); !api.IsCode(err, api.CodeNotFound) {
		t.Fatalf("session known before the compile named it: %v", err)
	}
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: sid, Branch: "u1", SessionFile: ps.path, Request: h.body(h.system)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the named session file to be followed (1 entry)", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 1, sessionState(s, err)
	})
	d.restart(0)
	ps.user("u2", "u1", "again")
	waitFor(t, "the followed file to be followed after a restart (2 entries)", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 2, sessionState(s, err)
	})
}

// runCLI runs a client subcommand of the binary against the daemon.
func (d *bindDaemon) runCLI(ctx context.Context, args ...string) (string, string, int) {
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Env = append(os.Environ(), "BINDERY_SOCKET="+d.sock)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return out.String(), errb.String(), code
}

// The CLI: compile, accept (a whole provider response), release, show,
// tail, with their errors and exit codes.
func TestBindingCLI(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	dir := d.dir
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := ctxT(t)
	req := write("req.json", h.body(h.system))
	out, errOut, code := d.runCLI(ctx, "compile", "--conversation", "cli", "--file", req, "--out", filepath.Join(dir, "sent.json"), "--json")
	if code != 0 {
		t.Fatalf("compile: %d %s", code, errOut)
	}
	var ans api.CompileAnswer
	if err := json.Unmarshal([]byte(out), &ans); err != nil || ans.CompileID == "" {
		t.Fatalf("compile --json: %v %s", err, out)
	}
	sent, _ := os.ReadFile(filepath.Join(dir, "sent.json"))
	res := h.send(sent, h.reply(false))
	// a whole provider response, as an API client saves it
	var msg map[string]any
	json.Unmarshal(res.Reply, &msg)
	msg["type"], msg["id"], msg["model"], msg["stop_reason"] = "message", "msg_1", h.model, "end_turn"
	msg["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 5}
	full, _ := json.Marshal(msg)
	out, errOut, code = d.runCLI(ctx, "accept", "--compile", ans.CompileID, "--reply", write("reply.json", full))
	if code != 0 || !strings.Contains(out, "accepted: 1 stamped") {
		t.Fatalf("accept: %d %q %s", code, out, errOut)
	}
	out, _, code = d.runCLI(ctx, "accept", "--compile", ans.CompileID)
	if code != 0 || !strings.Contains(out, "already accepted") {
		t.Fatalf("repeated accept: %d %q", code, out)
	}
	if _, errOut, code = d.runCLI(ctx, "accept", "--compile", "c_nope"); code != 1 || !strings.Contains(errOut, "unknown_compile") {
		t.Fatalf("unknown compile: %d %s", code, errOut)
	}
	if _, _, code = d.runCLI(ctx, "compile", "--conversation", "cli"); code != 2 {
		t.Fatalf("compile without --file: exit %d, want 2 (usage)", code)
	}
	// a human-readable compile that strips: the history is edited
	var rmsg map[string]any
	json.Unmarshal(res.Reply, &rmsg)
	h.messages = []any{map[string]any{"role": "user", "content": "hi (edited)"}, rmsg, map[string]any{"role": "user", "content": "more"}}
	out, errOut, code = d.runCLI(ctx, "compile", "--conversation", "cli", "--file", write("req2.json", h.body(h.system)), "--plan")
	if code != 0 || !strings.Contains(out, "messages.1.content.0") || !strings.Contains(out, "prefix-changed") {
		t.Fatalf("compile (human): %d %q %s", code, out, errOut)
	}
	out, errOut, code = d.runCLI(ctx, "show", "cli")
	if code != 0 || !strings.Contains(out, "binding state of cli") || !strings.Contains(out, ans.CompileID) {
		t.Fatalf("show: %d %q %s", code, out, errOut)
	}
	if _, errOut, code = d.runCLI(ctx, "show", "nobody"); code != 1 || !strings.Contains(errOut, "no session or conversation") {
		t.Fatalf("show unknown: %d %s", code, errOut)
	}
	sig := rmsg["content"].([]any)[0].(map[string]any)["signature"].(string)
	out, errOut, code = d.runCLI(ctx, "release", "--conversation", "cli", "--signature", sig)
	if code != 0 || !strings.Contains(out, "released 1") {
		t.Fatalf("release: %d %q %s", code, out, errOut)
	}
	// tail replays the log as JSON lines; it runs until stopped
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, _, _ = d.runCLI(tctx, "tail", "--since", "0", "--json", "--conversation", "cli")
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e api.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("tail line %q: %v", line, err)
		}
		types = append(types, e.Type)
	}
	want := "compile engage accept compile strip release"
	if got := strings.Join(types, " "); !strings.HasPrefix(got, "compile engage accept compile strip") || !strings.HasSuffix(got, "release") {
		t.Fatalf("tail types %q, want %q (and any strips)", got, want)
	}
}

// sessionState and convState say what a wait last saw.
func sessionState(s api.SessionDetail, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d entries, leaf %q, %d stamps", s.Entries, s.Leaf, s.Stamps)
}

func convState(st *api.ConversationState, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d stamps, %d linked, %d compiles, %d releases", st.Stamps, st.StampsLinked, st.Compiles, len(st.Releases))
}
