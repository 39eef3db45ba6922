package db

import (
	"testing"

	"github.com/my-pi/bindery/binding"
)

// pi 1.6's entries round-trip through ingest and ReportEntries; a
// context_edit's copy of a block is stored for the report but is neither
// the session's thinking nor where BlockEntries finds the block (the copy
// is branch-local; the message that minted it is on every branch).
func TestPi16EntriesRoundTrip(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	sig := bdigest("sig-a1")
	i := func(n int64) *int64 { return &n }
	f := func(v float64) *float64 { return &v }
	b := Batch{Kind: Found, Path: "/s/2026_sid.jsonl", Cursor: Cursor{Path: "/s/2026_sid.jsonl", Dev: 1, Ino: 2, Offset: 500, Lines: 6},
		Header: &Header{ID: "sid", Version: 3, Cwd: "/p", Timestamp: "2026-12-01T10:00:00Z"},
		Entries: []Entry{
			{Line: 2, Offset: 10, Length: 50, Type: "message", ID: "u1", Role: "user", UserText: true},
			{Line: 3, Offset: 60, Length: 90, Type: "message", ID: "a1", ParentID: "u1", Role: "assistant", Model: "claude-opus-5-5",
				Usage:    Usage{Input: i(10), Output: i(40), CacheRead: i(1000), CacheWrite: i(300), CacheWrite1h: i(100), Reasoning: i(20), CostTotal: f(0.01)},
				Thinking: []Thinking{{Index: 0, Signed: true, SigDigest: sig[:], Chars: 40}}},
			{Line: 4, Offset: 150, Length: 80, Type: "context_edit", ID: "e1", ParentID: "a1", TargetID: "a1",
				Thinking: []Thinking{{Index: 0, Signed: true, SigDigest: sig[:], Chars: 40}}},
			{Line: 5, Offset: 230, Length: 60, Type: "context_edit", ID: "e2", ParentID: "e1", TargetID: "u1", EditOmit: true},
			{Line: 6, Offset: 290, Length: 70, Type: "usage", ID: "w1", ParentID: "e2", UsageKind: "cache_warm", Model: "claude-opus-5-5", Provider: "anthropic",
				Usage: Usage{Input: i(3), Output: i(1), CacheRead: i(1400), CacheWrite: i(0), CacheWrite1h: i(0), Reasoning: i(0)}},
		}}
	ing, err := d.Ingest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Session(ctx, "sid")
	if err != nil || s.Thinking != 1 || s.Entries != 5 {
		t.Fatalf("session: thinking %d entries %d (%v)", s.Thinking, s.Entries, err)
	}
	where, err := d.BlockEntries(ctx, "sid", []binding.Digest{sig})
	if err != nil || where[sig] != "a1" {
		t.Fatalf("block entries: %v %v", where, err)
	}
	rows, err := d.ReportEntries(ctx, ing.File)
	if err != nil || len(rows) != 5 {
		t.Fatalf("report entries: %d %v", len(rows), err)
	}
	a1, e1, e2, w1 := rows[1], rows[2], rows[3], rows[4]
	if *a1.Usage.CacheWrite1h != 100 || *a1.Usage.Reasoning != 20 {
		t.Fatalf("a1 usage %+v", a1.Usage)
	}
	if e1.TargetID != "a1" || e1.EditOmit || len(e1.Thinking) != 1 || e2.TargetID != "u1" || !e2.EditOmit {
		t.Fatalf("edits %+v %+v", e1, e2)
	}
	if w1.UsageKind != "cache_warm" || w1.Model != "claude-opus-5-5" || *w1.Usage.CacheRead != 1400 || w1.Usage.CacheWrite1h == nil {
		t.Fatalf("usage entry %+v", w1)
	}
}
