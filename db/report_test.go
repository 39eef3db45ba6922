package db

import (
	"context"
	"reflect"
	"testing"
)

func reportBatch(path string, kind BatchKind, offset int64, lines int, entries []Entry) Batch {
	return Batch{Kind: kind, Path: path, Cursor: Cursor{Path: path, Dev: 1, Ino: 2, Offset: offset, Lines: lines},
		Header:  &Header{ID: "sess-1", Version: 3, Cwd: "/w", Timestamp: "2026-11-01T10:00:00Z"},
		Entries: entries}
}

func TestReportEntriesAndSummaries(t *testing.T) {
	d := mustOpen(t)
	ctx := context.Background()
	in, out, cr, cw := int64(3), int64(40), int64(2000), int64(100)
	cost := 0.0123
	entries := []Entry{
		{Line: 2, Offset: 100, Length: 50, Type: "message", ID: "u1", Role: "user", UserText: true, Timestamp: "2026-11-01T10:00:01Z"},
		{Line: 3, Offset: 150, Length: 80, Type: "message", ID: "a1", ParentID: "u1", Role: "assistant",
			Model: "claude-sonnet-4-5", Provider: "anthropic", StopReason: "toolUse", ToolCalls: 1, Timestamp: "2026-11-01T10:00:02Z",
			Usage:    Usage{Input: &in, Output: &out, CacheRead: &cr, CacheWrite: &cw, CostTotal: &cost},
			Thinking: []Thinking{{Index: 0, Signed: true, SigDigest: []byte("0123456789abcdef0123456789abcdef"), Chars: 400}, {Index: 2, Redacted: true, Signed: true, SigDigest: []byte("fedcba9876543210fedcba9876543210"), Chars: 9}}},
		{Line: 4, Offset: 230, Length: 30, Type: "compaction", ID: "c1", ParentID: "a1", FirstKeptEntryID: "u1"},
	}
	if _, err := d.Ingest(ctx, reportBatch("/w/s.jsonl", Found, 260, 4, entries)); err != nil {
		t.Fatal(err)
	}
	ss, err := d.ReportSessions(ctx)
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions = %v, %v", ss, err)
	}
	s := ss[0]
	if s.ID != "sess-1" || s.Path != "/w/s.jsonl" || s.Removed || s.Progress == "" {
		t.Errorf("session = %+v", s)
	}
	got, err := d.ReportEntries(ctx, s.File)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("entries = %d", len(got))
	}
	a := got[1]
	if a.ID != "a1" || a.ParentID != "u1" || a.Model != "claude-sonnet-4-5" || a.StopReason != "toolUse" || a.ToolCalls != 1 ||
		*a.Usage.Input != 3 || *a.Usage.CacheRead != 2000 || *a.Usage.CostTotal != cost || a.Usage.TotalTokens != nil {
		t.Errorf("assistant = %+v usage %+v", a, a.Usage)
	}
	wantThinking := []Thinking{{Index: 0, Signed: true, Chars: 400}, {Index: 2, Redacted: true, Signed: true, Chars: 9}}
	if !reflect.DeepEqual(a.Thinking, wantThinking) {
		t.Errorf("thinking = %+v", a.Thinking)
	}
	if !got[0].UserText || got[0].Usage.Input != nil || got[2].FirstKeptEntryID != "u1" {
		t.Errorf("user/compaction = %+v / %+v", got[0], got[2])
	}

	// Summaries: stored, replaced, read back.
	if err := d.PutReportSummaries(ctx, []ReportSummary{{File: s.File, Stamp: "a", Summary: []byte(`{"x":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutReportSummaries(ctx, []ReportSummary{{File: s.File, Stamp: "b", Summary: []byte(`{"x":2}`)},
		{File: 999, Stamp: "z", Summary: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	sums, err := d.ReportSummaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[s.File].Stamp != "b" || string(sums[s.File].Summary) != `{"x":2}` {
		t.Errorf("summaries = %+v", sums)
	}

	// Progress changes with every ingest of the file, so the stamp does.
	more := []Entry{{Line: 5, Offset: 260, Length: 20, Type: "message", ID: "u2", ParentID: "c1", Role: "user", UserText: true}}
	if _, err := d.Ingest(ctx, reportBatch("/w/s.jsonl", Grew, 280, 5, more)); err != nil {
		t.Fatal(err)
	}
	ss2, _ := d.ReportSessions(ctx)
	if ss2[0].Progress == s.Progress {
		t.Errorf("progress unchanged after growth: %s", s.Progress)
	}
	if got, _ := d.ReportEntries(ctx, s.File); len(got) != 4 {
		t.Errorf("entries after growth = %d", len(got))
	}
}
