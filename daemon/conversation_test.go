package daemon

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// piIndex writes a pi session's entries into the index the way the
// watcher's batches do, one line at a time.
type piIndex struct {
	tb     testing.TB
	e      *bindingEnv
	id     string
	path   string
	parent string // the header's parentSession
	line   int
}

// add ingests en as the file's next line (a message unless en.Type says
// otherwise) and returns the batch and what its ingest did.
func (p *piIndex) add(en db.Entry) (db.Batch, db.Ingested) {
	p.tb.Helper()
	kind := db.Grew
	var hdr *db.Header
	if p.line == 0 {
		p.line = 1
		kind, hdr = db.Found, &db.Header{ID: p.id, Version: 3, Cwd: "/tmp", Timestamp: "2026-11-29T10:00:00.000Z", ParentSession: p.parent}
	}
	p.line++
	en.Line = p.line
	if en.Length == 0 { // no real line behind it (piFile's have one)
		en.Offset, en.Length = int64(p.line*100), 100
	}
	if en.Type == "" {
		en.Type = "message"
	}
	en.Timestamp = fmt.Sprintf("2026-11-29T10:%02d:00.000Z", p.line)
	c := db.Cursor{Path: p.path, Dev: 1, Ino: 1, Offset: int64(p.line*100 + 100), Lines: p.line, Check: []byte{byte(p.line)}}
	b := db.Batch{Kind: kind, Path: p.path, Cursor: c, Header: hdr, Entries: []db.Entry{en}}
	ing, err := p.e.db.Ingest(p.tb.Context(), b)
	if err != nil {
		p.tb.Fatal(err)
	}
	return b, ing
}

func (p *piIndex) user(id, parent string) {
	p.add(db.Entry{ID: id, ParentID: parent, Role: "user", UserText: true})
}

func (p *piIndex) assistant(id, parent, sig string) {
	d := sha256.Sum256([]byte(sig))
	p.add(db.Entry{ID: id, ParentID: parent, Role: "assistant",
		Thinking: []db.Thinking{{Index: 0, Signed: true, SigDigest: d[:], Chars: 1}}})
}

// compile compiles pi's request at leaf (turns earlier exchanges, then
// text) in the session's conversation.
func (p *piIndex) compile(leaf string, turns []int, text string) *api.CompileAnswer {
	p.tb.Helper()
	ans, err := p.e.client.Compile(p.tb.Context(), &api.CompileCall{Conversation: p.id, Branch: leaf, Request: piRequest(turns, text), Return: api.ReturnPlan})
	if err != nil {
		p.tb.Fatalf("compile at %s: %v", leaf, err)
	}
	return ans
}

// linear writes n turns of a linear session, u1 a1 ... un an, each
// compiled at its user entry and accepted with a reply signed sig-<i> that
// the file then shows; it returns the compile ids.
func (p *piIndex) linear(n int) []string {
	p.tb.Helper()
	var ids []string
	var turns []int
	parent := ""
	for i := 1; i <= n; i++ {
		u, a := fmt.Sprint("u", i), fmt.Sprint("a", i)
		p.user(u, parent)
		id := p.compile(u, turns, fmt.Sprint("turn ", i)).CompileID
		if _, err := p.e.client.Accept(p.tb.Context(), &api.AcceptCall{CompileID: id, Reply: reply(fmt.Sprint("sig-", i))}); err != nil {
			p.tb.Fatalf("accept %d: %v", i, err)
		}
		p.assistant(a, u, fmt.Sprint("sig-", i))
		ids = append(ids, id)
		turns = append(turns, i)
		parent = a
	}
	return ids
}

// piRequest is the request pi sends at a user entry: turns earlier
// exchanges (each reply with one thinking block signed sig-<i>), then text.
func piRequest(turns []int, text string) []byte {
	var msgs []any
	for _, i := range turns {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", i)},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "t", "signature": fmt.Sprintf("sig-%d", i)},
				map[string]any{"type": "text", "text": "ok"}}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": text})
	b, _ := json.Marshal(map[string]any{"model": "claude-fable-5-2", "max_tokens": 1024, "messages": msgs,
		"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
	return b
}

// A pi session's branches are its tree's: a linear session of seven
// compiled and accepted turns is one branch owned by the last accept, a
// fork adds one branch with its own owner and releases, and the per-leaf
// bookkeeping stays available as compileLeaves. A non-pi conversation
// keeps one branch per name.
func TestConversationPiBranchesAreTreeBranches(t *testing.T) {
	e := newBindingEnv(t, nil)
	const sid = "0193e6c4-bbbb-7000-8000-000000000001"
	p := &piIndex{tb: t, e: e, id: sid, path: "/sessions/" + sid + ".jsonl"}
	compile := func(leaf string, turns []int, text string) string { return p.compile(leaf, turns, text).CompileID }
	ids := p.linear(7)
	get := func() *api.ConversationState {
		t.Helper()
		st, err := e.client.Conversation(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := get()
	if !st.SessionTree || len(st.Branches) != 1 || len(st.CompileLeaves) != 7 {
		t.Fatalf("linear session: sessionTree %v, %d branches %+v, %d compile leaves", st.SessionTree, len(st.Branches), st.Branches, len(st.CompileLeaves))
	}
	want := api.BranchState{Branch: "a7", Owner: ids[6], Accepted: 7, Stamps: 7, Current: true, Entries: 14}
	if st.Branches[0] != want {
		t.Fatalf("linear branch\n got %+v\nwant %+v", st.Branches[0], want)
	}
	for _, l := range st.CompileLeaves {
		if l.Accepted != 1 || l.NotInTree || l.Entries != 0 {
			t.Errorf("compile leaf %+v", l)
		}
	}

	// Fork after a3: the fork's compile is not accepted; the host reports
	// that a3's block was refused there, releasing it on the fork only.
	p.user("f1", "a3")
	fork := compile("f1", []int{1, 2, 3}, "fork")
	if r, err := e.client.Release(t.Context(), &api.ReleaseCall{Conversation: sid, CompileID: fork, Path: "messages.5.content.0"}); err != nil || r.Released != 1 {
		t.Fatalf("release on the fork: %+v %v", r, err)
	}
	// A release by signature reaches every branch; a compile at a leaf the
	// file does not show yet keeps a row of its own.
	if r, err := e.client.Release(t.Context(), &api.ReleaseCall{Conversation: sid, Signature: "sig-1"}); err != nil || r.Released != 1 {
		t.Fatalf("release by signature: %+v %v", r, err)
	}
	compile("u8", []int{1, 2, 3, 4, 5, 6, 7}, "not written yet")

	for round, b := range []*Binder{e.b, NewBinder(e.j, BinderConfig{})} { // and after a restart
		st, err := b.Conversation(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		wantBranches := []api.BranchState{
			{Branch: "a7", Owner: ids[6], Accepted: 7, Stamps: 7, Releases: 1, Entries: 14},
			{Branch: "f1", Owner: ids[2], Accepted: 3, Unaccepted: 1, Stamps: 3, Releases: 2, Current: true, Entries: 7},
			{Branch: "u8", Unaccepted: 1, NotInTree: true},
		}
		if len(st.Branches) != len(wantBranches) {
			t.Fatalf("round %d: branches %+v", round, st.Branches)
		}
		for i := range wantBranches {
			if st.Branches[i] != wantBranches[i] {
				t.Errorf("round %d: branch %d\n got %+v\nwant %+v", round, i, st.Branches[i], wantBranches[i])
			}
		}
		leaves := map[string]api.BranchState{}
		for _, l := range st.CompileLeaves {
			leaves[l.Branch] = l
		}
		if len(leaves) != 10 || leaves["f1"].Releases != 1 || leaves["f1"].Unaccepted != 1 || leaves["*"].Releases != 1 || leaves["u8"].Unaccepted != 1 {
			t.Errorf("round %d: compile leaves %+v", round, st.CompileLeaves)
		}
		// GET /v1/sessions/{id}: each tree branch's frontier names its owner
		det, err := (&daemon{store: e.db, binder: b}).GetSession(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		if len(det.Frontier) != 2 || det.Frontier[0] != (api.Frontier{Branch: "a7", Owner: ids[6]}) || det.Frontier[1] != (api.Frontier{Branch: "f1", Owner: ids[2]}) {
			t.Errorf("round %d: session frontier %+v", round, det.Frontier)
		}
	}

	// not a pi session: one branch per name, as before
	body := request("plain", 1, 10)
	for _, br := range []string{"main", "main", "other"} {
		if _, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "plain", Branch: br, Request: body, Return: api.ReturnPlan}); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := e.client.Conversation(t.Context(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	if plain.SessionTree || plain.CompileLeaves != nil || len(plain.Branches) != 2 ||
		plain.Branches[0] != (api.BranchState{Branch: "main", Unaccepted: 2}) || plain.Branches[1] != (api.BranchState{Branch: "other", Unaccepted: 1}) {
		t.Fatalf("plain conversation: %+v", plain)
	}
}

// dbBatch keeps pi's whole usage.cost: the split goes to the index with
// the total (schema version 4), so the report need not read the file.
func TestDBBatchKeepsCostSplit(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	wb := watcher.Batch{Kind: watcher.Grew, Path: "/s.jsonl", Entries: []watcher.Entry{{Type: "message", ID: "a1", Role: "assistant",
		Usage: &watcher.Usage{Input: n(3), Output: n(120), Cost: &watcher.Cost{Input: f(0.00001), Output: f(0.003), CacheRead: f(0.0102), CacheWrite: f(0.0019), Total: f(0.01521)}}}}}
	u := dbBatch(wb).Entries[0].Usage
	if u.CostTotal == nil || u.CostInput == nil || u.CostOutput == nil || u.CostCacheRead == nil || u.CostCacheWrite == nil ||
		*u.CostTotal != 0.01521 || *u.CostInput != 0.00001 || *u.CostOutput != 0.003 || *u.CostCacheRead != 0.0102 || *u.CostCacheWrite != 0.0019 || *u.Input != 3 {
		t.Errorf("usage %+v", u)
	}
}
