package daemon

import (
	"testing"

	"github.com/my-pi/bindery/api"
)

// A stamp is linked to the session entry holding its reply whichever
// lands first, the accept or the line, and no stop of the daemon between
// an ingest's commit and the hooks that follow it can lose the link: the
// ingest links in its own transaction. The order is forced, not raced:
// piIndex commits each line with db.Ingest and never runs Binder.Ingested,
// exactly what a daemon stopped (kill -9, or SIGTERM cancelling the hook's
// context) right after the commit leaves behind. Before the link moved
// into the ingest transaction, TestPiSessionForksAndFileAttribution
// (cmd/bindery) timed out on this about one run in four.
func TestStampLinkedWhicheverLandsFirst(t *testing.T) {
	e := newBindingEnv(t, nil)
	const sid = "0193e6c4-cccc-7000-8000-000000000001"
	p := &piIndex{tb: t, e: e, id: sid, path: "/sessions/" + sid + ".jsonl"}
	linked := func() (int, int) {
		t.Helper()
		_, total, linked, err := e.db.StampCounts(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		return total, linked
	}
	turn := func(leaf string, turns []int) string {
		t.Helper()
		ans, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: sid, Branch: leaf, Request: piRequest(turns, "go"), Return: api.ReturnPlan})
		if err != nil {
			t.Fatalf("compile at %s: %v", leaf, err)
		}
		return ans.CompileID
	}
	accept := func(id, sig string) {
		t.Helper()
		if _, err := e.client.Accept(t.Context(), &api.AcceptCall{CompileID: id, Reply: reply(sig)}); err != nil {
			t.Fatalf("accept %s: %v", id, err)
		}
	}

	// The accept first: its reply is not in the index yet, so nothing to
	// link to; the line's ingest links it.
	p.user("u1", "")
	accept(turn("u1", nil), "sig-0")
	if total, n := linked(); total != 1 || n != 0 {
		t.Fatalf("after the accept, before the line: stamps %d, linked %d; want 1, 0", total, n)
	}
	p.assistant("a1", "u1", "sig-0")
	if total, n := linked(); total != 1 || n != 1 {
		t.Fatalf("after the line's ingest (no hook ran): stamps %d, linked %d; want 1, 1", total, n)
	}

	// The line first: the accept links it in its own transaction.
	p.user("u2", "a1")
	id := turn("u2", []int{0})
	p.assistant("a2", "u2", "sig-1")
	accept(id, "sig-1")
	if total, n := linked(); total != 2 || n != 2 {
		t.Fatalf("after the line, then the accept: stamps %d, linked %d; want 2, 2", total, n)
	}
}
