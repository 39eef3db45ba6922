package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/db"
)

func p64(v int64) *int64 { return &v }

// sessionRows generates a session's rows: one cycle per entry of lens,
// each a user message then that many assistant turns joined by tool
// results, the prompt growing 700 tokens a turn and read from cache.
// first is the first line number (2 for a new file).
func sessionRows(id string, lens []int, first int) []db.Entry {
	var out []db.Entry
	line := first
	parent := ""
	add := func(e db.Entry) {
		e.Line, e.Offset, e.Length = line, int64(line)*100, 100
		e.ParentID = parent
		if e.Type == "" {
			e.Type = "message"
		}
		parent = e.ID
		line++
		out = append(out, e)
	}
	prompt := int64(4000)
	n := 0
	for c, l := range lens {
		add(db.Entry{ID: fmt.Sprintf("%s-u%d-%d", id, first, c), Role: "user", UserText: true})
		for k := 1; k <= l; k++ {
			n++
			cr := prompt
			prompt += 700
			stop := "toolUse"
			if k == l {
				stop = "stop"
			}
			cost := float64(cr)*0.3e-6 + 700*3.75e-6 + 200*15e-6
			add(db.Entry{ID: fmt.Sprintf("%s-a%d-%d", id, first, n), Role: "assistant", Model: "claude-sonnet-4-5", StopReason: stop,
				Timestamp: fmt.Sprintf("2026-11-01T10:%02d:%02dZ", n/60%60, n%60),
				Usage:     db.Usage{Input: p64(0), Output: p64(200), CacheRead: p64(cr), CacheWrite: p64(700), CostTotal: &cost},
				Thinking:  []db.Thinking{{Index: 0, Signed: true, SigDigest: []byte(fmt.Sprintf("%-32s", id+fmt.Sprint(first, n))), Chars: 800}}})
			if stop == "toolUse" {
				add(db.Entry{ID: fmt.Sprintf("%s-t%d-%d", id, first, n), Role: "toolResult"})
			}
		}
	}
	return out
}

// ingestSession ingests a new session and returns its last line and leaf.
func ingestSession(tb testing.TB, d *db.DB, id string, lens []int) (int, string) {
	tb.Helper()
	rows := sessionRows(id, lens, 2)
	path := "/sessions/" + id + ".jsonl"
	last := rows[len(rows)-1]
	_, err := d.Ingest(context.Background(), db.Batch{Kind: db.Found, Path: path,
		Cursor:  db.Cursor{Path: path, Dev: 1, Ino: uint64(len(id)*7919 + int(id[len(id)-1])), Offset: last.Offset + 100, Lines: last.Line},
		Header:  &db.Header{ID: id, Version: 3, Cwd: "/w", Timestamp: "2026-11-01T10:00:00Z"},
		Entries: rows})
	if err != nil {
		tb.Fatal(err)
	}
	return last.Line, last.ID
}

// growSession appends one more cycle of turns to a session after its leaf.
func growSession(tb testing.TB, d *db.DB, id string, prevLines int, leaf string, turns int) (int, string) {
	tb.Helper()
	rows := sessionRows(id, []int{turns}, prevLines+1)
	rows[0].ParentID = leaf
	path := "/sessions/" + id + ".jsonl"
	last := rows[len(rows)-1]
	_, err := d.Ingest(context.Background(), db.Batch{Kind: db.Grew, Path: path,
		Cursor:  db.Cursor{Path: path, Dev: 1, Ino: uint64(len(id)*7919 + int(id[len(id)-1])), Offset: last.Offset + 100, Lines: last.Line},
		Entries: rows})
	if err != nil {
		tb.Fatal(err)
	}
	return last.Line, last.ID
}

func openDB(tb testing.TB) *db.DB {
	d, err := db.Open(context.Background(), filepath.Join(tb.TempDir(), "bindery.db"), db.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

func TestArchiveIsIncremental(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	ingestSession(t, d, "s1", []int{3, 2})
	ingestSession(t, d, "s2", []int{1, 20})
	s3Lines, s3Leaf := ingestSession(t, d, "s3", []int{5})

	r := New(d, nil, nil, nil)
	rep, st, err := r.Archive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st != (Stats{Sessions: 3, Analysed: 3, Scanned: 3}) {
		t.Errorf("first report: %+v", st)
	}
	f := rep.Figures
	// Turns 3+2+1+20+5 = 31; cycles 5, one over 16.
	if f.Requests.Turns != 31 || f.Cycles.Count != 5 || f.Cycles.Over16 != 1 || f.Sessions != 3 {
		t.Errorf("figures: %+v %+v", f.Requests, f.Cycles)
	}
	// pi's cost.total is the spend, split by the table's proportions.
	if f.Spend.FromPi != 31 || f.Spend.Unpriced != 0 || f.Spend.Unsplit != 0 {
		t.Errorf("spend: %+v", f.Spend)
	}

	_, st, _ = r.Archive(ctx)
	if st.Analysed != 0 {
		t.Errorf("second report analysed %d sessions, want 0", st.Analysed)
	}

	// One session grows: only it is analysed again.
	growSession(t, d, "s3", s3Lines, s3Leaf, 4)
	rep, st, _ = r.Archive(ctx)
	if st.Analysed != 1 || rep.Figures.Requests.Turns != 35 {
		t.Errorf("after growth: %+v, turns %d", st, rep.Figures.Requests.Turns)
	}

	// A restarted daemon finds the summaries in the database.
	r2 := New(d, nil, nil, nil)
	rep2, st, _ := r2.Archive(ctx)
	if st.Analysed != 0 || rep2.Figures.Requests.Turns != 35 {
		t.Errorf("after restart: %+v", st)
	}
	// Another price table invalidates every summary.
	prices, err := report.ParsePrices([]byte(`{"claude-opus-5-5": {"input": 1, "source": "test"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, st, _ = New(d, prices, nil, nil).Archive(ctx); st.Analysed != 3 {
		t.Errorf("after a price change: %+v", st)
	}

	// Compile events enter the stamp and the figures.
	cs := &fakeCompiles{seq: 1, events: []report.CompileEvent{{Seq: 1, Strips: []report.Strip{{Reason: "no-stamp", Tokens: 10}}}}}
	rc := New(d, nil, cs, nil)
	rep, _, _ = rc.Archive(ctx)
	if rep.Figures.Bindery.Compiles != 3 || rep.Figures.Bindery.Strips["no-stamp"] != 3 {
		t.Errorf("bindery: %+v", rep.Figures.Bindery)
	}
	if _, st, _ = rc.Archive(ctx); st.Analysed != 0 {
		t.Errorf("unchanged compiles re-analysed %d", st.Analysed)
	}
	cs.seq = 2
	if _, st, _ = rc.Archive(ctx); st.Analysed != 3 {
		t.Errorf("new compiles analysed %d, want 3", st.Analysed)
	}
}

type fakeCompiles struct {
	seq    int64
	events []report.CompileEvent
}

func (f *fakeCompiles) Seqs(context.Context) (map[string]int64, error) {
	return map[string]int64{"s1": f.seq, "s2": f.seq, "s3": f.seq}, nil
}

func (f *fakeCompiles) Compiles(context.Context, string) ([]report.CompileEvent, error) {
	return f.events, nil
}

func TestSessionReport(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	ingestSession(t, d, "s1", []int{3, 2})
	r := New(d, nil, nil, nil)
	rep, err := r.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scope != "session" || len(rep.Requests) != 5 || rep.Figures.Cycles.Closed != 1 || rep.Figures.Cycles.Open != 1 {
		t.Errorf("session report: %+v", rep.Figures.Cycles)
	}
	// Billed thinking: 200 tokens per turn on a last-turn-only model:
	// cycle 1 carries 0, 200, 400; cycle 2 carries 0, 200 (600 free each).
	if rep.Figures.Thinking.Billed != 800 || rep.Figures.Thinking.Free != 1200 {
		t.Errorf("thinking: %+v", rep.Figures.Thinking)
	}
	_, err = r.Session(ctx, "nope")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("unknown session: %v", err)
	}
	if got, err := r.Report(ctx, "s1"); err != nil || got.Figures.Total != rep.Figures.Total || len(got.Requests) != 5 {
		t.Errorf("report of s1: %v, %v", got.Figures.Total, err)
	}
	// The replay of the same session: append-only, so calibrated.
	w, err := r.WhatIf(ctx, api.WhatIfQuery{Session: "s1"})
	if err != nil || w.Scope != "session" || len(w.Sessions) != 1 || !w.Sessions[0].Calibration.OK || w.Sessions[0].Requests != 5 {
		t.Errorf("whatif s1: %+v %v", w, err)
	}
	if _, err := r.WhatIf(ctx, api.WhatIfQuery{Session: "nope"}); !api.IsCode(err, api.CodeNotFound) {
		t.Errorf("whatif of an unknown session: %v", err)
	}
}

func TestCompileEventsFromTheLog(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	ingestSession(t, d, "s1", []int{3, 2})
	ingestSession(t, d, "s2", []int{4})
	r := New(d, nil, nil, nil)
	if _, st, err := r.Archive(ctx); err != nil || st.Analysed != 2 {
		t.Fatalf("first: %+v %v", st, err)
	}
	// A compile built on s1's second user message (so it answers the
	// reply after it, the 4th request), and a dry run that must not count.
	err := d.Write(ctx, func(ctx context.Context, tx *db.Tx) error {
		for _, f := range []string{
			`{"compileId":"c1","branch":"s1-u2-1","binds":true,"engaged":true,"strips":[{"path":"messages.3.content.0","reason":"prefix-changed","tokens":50},{"path":"messages.5.content.0","reason":"gap","tokens":20}],"cache":{"firstChange":"messages.3.content.0","cause":"bindery"}}`,
			`{"compileId":"c2","branch":"s1-u2-1","dryRun":true,"strips":[{"path":"x","reason":"released","tokens":1}]}`,
		} {
			if _, err := tx.AppendEvent(ctx, "compile", "s1", json.RawMessage(f)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, st, err := r.Archive(ctx)
	if err != nil || st.Analysed != 1 {
		t.Fatalf("after a compile: %+v %v", st, err)
	}
	b := rep.Figures.Bindery
	if b.Compiles != 1 || b.Strips["prefix-changed"] != 1 || b.Strips["gap"] != 1 || b.StrippedTokens != 70 ||
		b.RefusalsAvoided != 1 || b.RequestsRescued != 1 {
		t.Errorf("bindery: %+v", b)
	}
	one, err := r.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if one.Requests[3].Strips != 2 || one.Requests[3].StrippedTokens != 70 {
		t.Errorf("request 4: %+v", one.Requests[3])
	}
}
