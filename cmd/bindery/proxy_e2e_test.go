package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// clearOldestToolResult edits the host's history as Claude Code's
// microcompaction does: the oldest tool result's content is replaced.
func (h *apiHost) clearOldestToolResult() {
	for _, m := range h.msgs {
		mm := m.(map[string]any)
		blocks, _ := mm["content"].([]any)
		for i, b := range blocks {
			if o := b.(map[string]any); o["type"] == "tool_result" {
				blocks[i] = map[string]any{"type": "tool_result", "tool_use_id": o["tool_use_id"], "content": "[Old tool result content cleared]"}
				return
			}
		}
	}
	h.t.Fatal("no tool result to clear")
}

// cycle runs one user prompt through its tool loop.
func (h *apiHost) cycle(prompt string) {
	h.user(prompt)
	for {
		h.turn()
		id := h.lastToolID()
		if id == "" {
			return
		}
		h.toolResult(id, "package main // "+id)
	}
}

// TestProxyToolLoopKeepsValidThinking: a host's tool loop whose history a
// pruner edits midway (an old tool result cleared) goes through the proxy
// with no refusal; every request carries exactly the blocks the provider
// can read (its maximum for this history), and a request bindery strips
// nothing from reaches the upstream byte for byte as the host sent it.
func TestProxyToolLoopKeepsValidThinking(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(2))
	pe.up.SetStream(true, 0)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.cycle("fix the parser")
	h.cycle("now the tests")
	h.clearOldestToolResult()
	h.cycle("and the docs")
	h.cycle("ship it")

	got := pe.up.Messages()
	if len(got) != len(h.sent) {
		t.Fatalf("upstream got %d requests for the host's %d", len(got), len(h.sent))
	}
	untouched, stripped := 0, 0
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d: upstream answered %d: %s", i, r.Status, r.Refused)
		}
		valid, total := pe.valid(h.sent[i])
		if read := len(r.Result.Read()); read != valid {
			t.Errorf("request %d: the provider read %d blocks; %d of the host's %d were valid", i, read, valid, total)
		}
		if bytes.Equal(r.Body, h.sent[i]) {
			untouched++
		} else {
			stripped++
		}
		if r.Header.Get("X-Api-Key") != testAPIKey {
			t.Errorf("request %d: the credential did not reach the upstream as sent", i)
		}
	}
	if stripped == 0 || untouched == 0 {
		t.Errorf("%d requests stripped, %d untouched: the edit should strip some and leave the others byte for byte", stripped, untouched)
	}
	for i, s := range h.answers {
		if s != 200 {
			t.Errorf("the host got %d on request %d", s, i)
		}
	}
	// Follow-up turns were compiled by reference.
	out := pe.feed()
	if !strings.Contains(out, `"base":"c_`) {
		t.Errorf("no compile by reference in the feed:\n%.2000s", out)
	}
	// The conversation is listed where users look, and shown.
	js, _, code := pe.run("conversations", "--json")
	var l api.ConversationList
	if err := json.Unmarshal([]byte(js), &l); err != nil || code != 0 || len(l.Conversations) != 1 {
		t.Fatalf("conversations --json (exit %d): %v\n%s", code, err, js)
	}
	c := l.Conversations[0]
	if c.Conversation != "bindery-test-host" || c.Client != "bindery-test-host" || !c.Engaged || c.Accepted != len(h.sent) || c.Releases == 0 || c.Branches != 1 {
		t.Errorf("listed as %+v; want the host's one history, %d accepted, its releases", c, len(h.sent))
	}
	text, _, _ := pe.run("conversations")
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("conversations: a line of %d columns: %q", len([]rune(l)), l)
		}
	}
	if !strings.Contains(text, "bindery-test-host\n") || !strings.Contains(text, fmt.Sprintf("%d accepted", len(h.sent))) {
		t.Errorf("conversations:\n%s", text)
	}
	if out, _, _ := pe.run("sessions"); !strings.Contains(out, "and 1 conversation from bindery proxy") {
		t.Errorf("sessions does not name the proxy's conversation:\n%s", out)
	}
	show, _, code := pe.run("show", "bindery-test-host")
	if code != 0 || !strings.Contains(show, "main/") {
		t.Errorf("show (exit %d):\n%s", code, show)
	}
	pe.checkNoCredential()
}

// madeWithout builds, straight against the provider, a history of two
// tool loops whose host sets prefix_mismatch_behavior to behavior ("" for
// none), clears its oldest tool result, and turns to the proxy: a
// conversation bindery never saw, edited where bindery could not see it.
func (pe *proxyE2E) madeWithout(behavior string) *apiHost {
	h := newAPIHost(pe.t, pe.up.URL, "claude-opus-5-5")
	if behavior != "" {
		h.top["thinking"] = map[string]any{"type": "adaptive", "block_binding": map[string]any{"prefix_mismatch_behavior": behavior}}
		h.header.Set("anthropic-beta", "thinking-binding-controls-2026-08-01")
	}
	h.cycle("fix the parser")
	h.cycle("now the tests")
	h.clearOldestToolResult()
	h.base = pe.addr
	return h
}

// TestProxyRetriesBindingRefusal: a history made without bindery, edited,
// then sent through the proxy: the conversation is new to bindery, so the
// blocks go on as sent; the provider refuses one; the proxy releases it
// and every later one, recompiles and retries once, and the host gets the
// answer, not the 400, with every block that was still valid read.
func TestProxyRetriesBindingRefusal(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(2))
	h := pe.madeWithout("")
	before := len(pe.up.Messages())
	h.user("and the docs")
	h.turn()
	got := pe.up.Messages()[before:]
	if len(got) != 2 || got[0].Status != 400 || got[1].Status != 200 {
		var st []int
		for _, r := range got {
			st = append(st, r.Status)
		}
		t.Fatalf("upstream statuses %v, want [400 200] (a refusal, then the retry)", st)
	}
	if !strings.Contains(got[0].Refused, "bound to a different conversation") {
		t.Errorf("the first request was refused for another reason: %s", got[0].Refused)
	}
	valid, total := pe.valid(h.sent[len(h.sent)-1])
	if read := len(got[1].Result.Read()); read != valid || valid == 0 {
		t.Errorf("the retry was read with %d blocks; %d of %d were valid", read, valid, total)
	}
	if !strings.Contains(pe.proxyLog(), "retrying once") {
		t.Errorf("the retry is not in the proxy's log:\n%s", pe.proxyLog())
	}
	// The next turn needs no retry: the release holds.
	h.toolResult(h.lastToolID(), "more")
	before = len(pe.up.Messages())
	h.turn()
	if got := pe.up.Messages()[before:]; len(got) != 1 || got[0].Status != 200 {
		t.Errorf("the turn after the retry took %d requests", len(got))
	}
	pe.checkNoCredential()
}

// TestProxyStrictStaysStrict: a host that asked for
// prefix_mismatch_behavior "error" gets the provider's 400, its body
// unchanged; the block is released, so the same request sent again goes
// through.
func TestProxyStrictStaysStrict(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(2))
	h := pe.madeWithout("error")
	h.user("and the docs")
	status, body, _ := h.post(h.body())
	if status != 400 {
		t.Fatalf("strict host got %d, want the provider's 400: %s", status, body)
	}
	last := pe.up.Messages()[len(pe.up.Messages())-1]
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message != last.Refused {
		t.Errorf("the 400's body was changed:\n got %s\nwant message %q", body, last.Refused)
	}
	h.turn() // the same request again: the refused block is released
}

// TestProxyDropBlockClientReleasesDrops: a client that sends drop_block
// keeps it; the drops the provider reports are released by the accept, so
// the next request no longer carries them.
func TestProxyDropBlockClientReleasesDrops(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(2))
	h := pe.madeWithout("drop_block")
	before := len(pe.up.Messages())
	h.user("and the docs")
	h.turn()
	first := pe.up.Messages()[before]
	if first.Status != 200 || len(first.Result.Transformations) == 0 {
		t.Fatalf("want a 200 that reports drops; got %d with %v", first.Status, first.Result.Transformations)
	}
	if !bytes.Contains(first.Body, []byte(`"drop_block"`)) {
		t.Error("the client's drop_block did not reach the upstream")
	}
	h.toolResult(h.lastToolID(), "more")
	h.turn()
	next := pe.up.Messages()[len(pe.up.Messages())-1]
	if len(next.Result.Transformations) != 0 {
		t.Errorf("the blocks the provider dropped were sent again: %v", next.Result.Transformations)
	}
	out := pe.feed()
	if !strings.Contains(out, `"type":"release"`) {
		t.Errorf("no release in the feed:\n%.2000s", out)
	}
}

// checkNoCredential: the API key (and any other credential named) is
// nowhere bindery writes: the proxy's log, the daemon's, the state folder
// (database, WAL), the event feed.
func (pe *proxyE2E) checkNoCredential(others ...string) {
	t := pe.t
	t.Helper()
	out := pe.feed()
	for _, cred := range append([]string{testAPIKey}, others...) {
		if strings.Contains(pe.proxyLog(), cred) {
			t.Errorf("the proxy logged the credential %.12s…", cred)
		}
		if strings.Contains(pe.daemon.cmd.Stderr.(*lockedWriter).String(), cred) {
			t.Errorf("the daemon logged the credential %.12s…", cred)
		}
		filepath.Walk(pe.state, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(cred)) {
					t.Errorf("%s holds the credential %.12s…", p, cred)
				}
			}
			return nil
		})
		if strings.Contains(out, cred) {
			t.Errorf("the event feed carries the credential %.12s…", cred)
		}
	}
}

var _ = http.StatusOK
var _ = api.ReturnPlan
