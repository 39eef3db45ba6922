package db

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// idAggregator is a ReportAggregator whose aggregate is the list of entry
// ids it was built from: the test reads back what ingest gave it. It
// extends only by a batch whose first entry is a reply to its last one.
type idAggregator struct{ builds, extends int }

func (g *idAggregator) BuildAggregate(es []Entry) (Aggregate, error) {
	g.builds++
	return idsAggregate(ids(es))
}

func (g *idAggregator) ExtendAggregate(prev Aggregate, es []Entry) (Aggregate, bool, error) {
	g.extends++
	var have []string
	if err := json.Unmarshal(prev.Sums, &have); err != nil {
		return Aggregate{}, false, err
	}
	if len(have) > 0 && es[0].ParentID != have[len(have)-1] {
		return Aggregate{}, false, nil
	}
	a, err := idsAggregate(append(have, ids(es)...), ids(es)...)
	return a, true, err
}

func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// idsAggregate's breaks are its replies ("a..." ids): a built one has all
// of them, an extended one those of the entries it added (added).
func idsAggregate(ids []string, added ...string) (Aggregate, error) {
	b, err := json.Marshal(ids)
	a := Aggregate{Sums: b, Walk: []byte(`{}`)}
	from := ids
	if added != nil {
		from = added
	}
	for _, id := range from {
		if strings.HasPrefix(id, "a") {
			a.Breaks = append(a.Breaks, []byte(id))
		}
	}
	return a, err
}

// aggregateOf reads a file's aggregate: its ids, fresh, and whether there
// is one; its breaks must be its replies, in order.
func aggregateOf(t *testing.T, d *DB, file int64) ([]string, bool, bool) {
	t.Helper()
	as, err := d.ReportAggregates(t.Context(), []int64{file})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := as[file]
	if !ok {
		return nil, false, false
	}
	var got []string
	if err := json.Unmarshal(a.Sums, &got); err != nil {
		t.Fatal(err)
	}
	var replies, breaks []string
	for _, id := range got {
		if strings.HasPrefix(id, "a") {
			replies = append(replies, id)
		}
	}
	for _, b := range a.Breaks {
		breaks = append(breaks, string(b))
	}
	if !slices.Equal(breaks, replies) {
		t.Fatalf("file %d: breaks %v, want %v", file, breaks, replies)
	}
	return got, a.Fresh, true
}

// Ingest keeps a file's aggregate equal to its rows in the batch's own
// transaction: built by a first scan or a rewrite, extended by appends,
// rebuilt from the rows when the branch moves, dropped when it cannot be
// kept (no aggregator, or one a report built from older rows).
func TestIngestKeepsAggregates(t *testing.T) {
	d := mustOpen(t)
	g := &idAggregator{}
	d.SetReportAggregator(g)
	hdr := &Header{ID: "s1", Version: 3, Cwd: "/w", Timestamp: "2026-11-29T10:00:00.000Z"}
	p := "/p/s1.jsonl"
	r := ingest(t, d, Batch{Kind: Found, Path: p, Cursor: cursor(p, 7, 300, 3), Header: hdr,
		Entries: []Entry{entry(2, "u1", "", "message"), assistant(3, "a1", "u1")}})
	want := []string{"u1", "a1"}
	check := func(what string, wantFresh bool) {
		t.Helper()
		got, fresh, ok := aggregateOf(t, d, r.File)
		if !ok || !slices.Equal(got, want) || fresh != wantFresh {
			t.Fatalf("%s: aggregate %v (fresh %v, present %v), want %v", what, got, fresh, ok, want)
		}
	}
	check("first scan", true)

	ingest(t, d, Batch{Kind: Grew, Path: p, Cursor: cursor(p, 7, 500, 5),
		Entries: []Entry{entry(4, "u2", "a1", "message"), assistant(5, "a2", "u2")}})
	want = append(want, "u2", "a2")
	check("append", true)
	if g.builds != 1 || g.extends != 1 {
		t.Errorf("builds %d, extends %d", g.builds, g.extends)
	}

	// A reply to an older entry (pi's /tree): rebuilt from every row.
	ingest(t, d, Batch{Kind: Grew, Path: p, Cursor: cursor(p, 7, 600, 6),
		Entries: []Entry{entry(6, "u3", "a1", "message")}})
	want = append(want, "u3")
	check("branch moved", true)
	if g.builds != 2 {
		t.Errorf("builds %d after the branch moved, want 2", g.builds)
	}

	// A rewrite: the batch is the whole file.
	ingest(t, d, Batch{Kind: Rewritten, Path: p, Cursor: cursor(p, 7, 200, 2), Header: hdr,
		Entries: []Entry{entry(2, "x1", "", "message")}})
	want = []string{"x1"}
	check("rewrite", true)

	// An aggregate a report built from older rows is dropped, not rebuilt,
	// when the branch moves.
	s, err := d.ReportSessions(t.Context())
	if err != nil || len(s) != 1 {
		t.Fatal(s, err)
	}
	old, _ := idsAggregate([]string{"x1"})
	if err := d.PutReportAggregates(t.Context(), []AggregateAt{{File: s[0].File, Offset: s[0].Offset, Lines: s[0].Lines, MS: s[0].UpdatedMS, Aggregate: old}}); err != nil {
		t.Fatal(err)
	}
	check("stored by a report", false)
	ingest(t, d, Batch{Kind: Grew, Path: p, Cursor: cursor(p, 7, 300, 3), Entries: []Entry{entry(3, "y1", "nowhere", "message")}})
	if _, _, ok := aggregateOf(t, d, r.File); ok {
		t.Error("an aggregate built from older rows survived a moved branch")
	}
	// None yet (as for a session ingested before version 7): an append
	// leaves it to the report.
	ingest(t, d, Batch{Kind: Grew, Path: p, Cursor: cursor(p, 7, 400, 4), Entries: []Entry{entry(4, "y2", "y1", "message")}})
	if _, _, ok := aggregateOf(t, d, r.File); ok {
		t.Error("an append made an aggregate of part of the rows")
	}

	// Without an aggregator an append drops the aggregate: it would no
	// longer hold every row.
	p2 := "/p/s2.jsonl"
	r2 := ingest(t, d, Batch{Kind: Found, Path: p2, Cursor: cursor(p2, 8, 200, 2), Header: &Header{ID: "s2", Version: 3, Cwd: "/w"},
		Entries: []Entry{entry(2, "v1", "", "message")}})
	if _, _, ok := aggregateOf(t, d, r2.File); !ok {
		t.Fatal("no aggregate after a first scan")
	}
	d.SetReportAggregator(nil)
	ingest(t, d, Batch{Kind: Grew, Path: p2, Cursor: cursor(p2, 8, 300, 3), Entries: []Entry{entry(3, "v2", "v1", "message")}})
	if _, _, ok := aggregateOf(t, d, r2.File); ok {
		t.Error("an append without an aggregator kept the aggregate")
	}
}

// A report's aggregate is stored only while the file's cursor is the one
// it was built at.
func TestPutReportAggregatesAtCursor(t *testing.T) {
	d := mustOpen(t)
	p := "/p/s1.jsonl"
	r := ingest(t, d, Batch{Kind: Found, Path: p, Cursor: cursor(p, 7, 200, 2), Header: &Header{ID: "s1", Version: 3, Cwd: "/w"},
		Entries: []Entry{entry(2, "u1", "", "message")}})
	s, err := d.ReportSessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	at := s[0]
	ingest(t, d, Batch{Kind: Grew, Path: p, Cursor: cursor(p, 7, 300, 3), Entries: []Entry{entry(3, "a1", "u1", "message")}})
	a, _ := idsAggregate([]string{"u1"})
	if err := d.PutReportAggregates(t.Context(), []AggregateAt{{File: r.File, Offset: at.Offset, Lines: at.Lines, MS: at.UpdatedMS, Aggregate: a}}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := aggregateOf(t, d, r.File); ok {
		t.Fatal("an aggregate of an older cursor was stored")
	}
	s, _ = d.ReportSessions(t.Context())
	a, _ = idsAggregate([]string{"u1", "a1"})
	if err := d.PutReportAggregates(t.Context(), []AggregateAt{{File: r.File, Offset: s[0].Offset, Lines: s[0].Lines, MS: s[0].UpdatedMS, Aggregate: a}}); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := aggregateOf(t, d, r.File); !ok || !slices.Equal(got, []string{"u1", "a1"}) {
		t.Fatalf("aggregate at the current cursor: %v %v", got, ok)
	}
	// Many files are read in one scan; the answer is the same.
	many := make([]int64, 100)
	for i := range many {
		many[i] = int64(i + 1)
	}
	as, err := d.ReportAggregates(t.Context(), many)
	if err != nil || len(as) != 1 {
		t.Fatalf("aggregates of 100 files: %d %v", len(as), err)
	}
}

// A version 6 database (the release before report aggregates) opens,
// upgrades to the aggregates table, and its sessions have none until a
// report builds them: an append does not make one of part of the rows.
func TestUpgradeFromVersion6(t *testing.T) {
	raw, path := databaseAt(t, "v6.db", 6)
	for _, q := range []string{
		`INSERT INTO files (id, path, dev, ino, offset, lines, check_digest, updated_ms) VALUES (1, '/p/old.jsonl', 1, 9, 300, 3, x'00', 1)`,
		`INSERT INTO sessions (file, id, cwd, version, header_time, last_activity, entries, thinking, leaf) VALUES (1, 'old', '/w', 3, '2026-11-01T10:00:00Z', '2026-11-01T10:00:02Z', 2, 0, 'a1')`,
		`INSERT INTO entries (seq, file, id, parent_id, type, line, offset, length, role) VALUES (1, 1, 'u1', NULL, 'message', 2, 100, 100, 'user')`,
		`INSERT INTO entries (seq, file, id, parent_id, type, line, offset, length, role) VALUES (2, 1, 'a1', 'u1', 'message', 3, 200, 100, 'assistant')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("open a version 6 database: %v", err)
	}
	defer d.Close()
	if v, err := d.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() || v < 7 {
		t.Fatalf("upgraded to version %d (%v)", v, err)
	}
	if n := count(t, d, `SELECT count(*) FROM report_aggregates`); n != 0 {
		t.Fatalf("%d aggregates after the upgrade", n)
	}
	g := &idAggregator{}
	d.SetReportAggregator(g)
	ingest(t, d, Batch{Kind: Grew, Path: "/p/old.jsonl", Cursor: Cursor{Path: "/p/old.jsonl", Dev: 1, Ino: 9, Offset: 400, Lines: 4},
		Entries: []Entry{entry(4, "u2", "a1", "message")}})
	if _, _, ok := aggregateOf(t, d, 1); ok || g.builds+g.extends != 0 {
		t.Errorf("an append to an old session made an aggregate (builds %d, extends %d)", g.builds, g.extends)
	}
	// The report's rebuild (reporter) reads every row, old and new.
	rows, err := d.ReportEntries(t.Context(), 1)
	if err != nil || strings.Join(ids(rows), ",") != "u1,a1,u2" {
		t.Fatalf("rows %v %v", ids(rows), err)
	}
}

// A batch prepared ahead (PrepareBatch) is stored exactly as one that was
// not: the same rows and aggregates, for first scans, a group, a rewrite
// and an append; its aggregate is the one built ahead (not built again in
// the transaction), unless the aggregator changed since, which builds
// its own.
func TestPreparedBatchAsUnprepared(t *testing.T) {
	prepared, plain := mustOpen(t), mustOpen(t)
	gp, gq := &idAggregator{}, &idAggregator{}
	prepared.SetReportAggregator(gp)
	plain.SetReportAggregator(gq)
	hdr := func(id string) *Header {
		return &Header{ID: id, Version: 3, Cwd: "/w", Timestamp: "2026-11-29T10:00:00.000Z"}
	}
	found := func(p, tag string, n int) Batch {
		return Batch{Kind: Found, Path: p, Cursor: cursor(p, 7, int64(100*n+100), n+1), Header: hdr(tag), Entries: rowsBatch(2, n, tag)}
	}
	steps := [][]Batch{
		{found("/p/a.jsonl", "a", 40)},
		{found("/p/b.jsonl", "b", 33), found("/p/c.jsonl", "c", 5)}, // a group
		{{Kind: Rewritten, Path: "/p/a.jsonl", Cursor: cursor("/p/a.jsonl", 7, 800, 8), Header: hdr("a"), Entries: rowsBatch(2, 7, "r")}},
		{{Kind: Grew, Path: "/p/c.jsonl", Cursor: cursor("/p/c.jsonl", 7, 900, 9), Entries: rowsBatch(7, 3, "g")}},
	}
	for i, bs := range steps {
		var want, got string
		wholes := 0
		for _, b := range bs {
			if b.Kind != Grew {
				wholes++
			}
		}
		pbs := slices.Clone(bs)
		p0, q0 := gp.builds, gq.builds
		for j := range pbs {
			prepared.PrepareBatch(&pbs[j])
		}
		if ahead := gp.builds - p0; ahead != wholes {
			t.Fatalf("step %d: %d aggregates built ahead, want %d", i, ahead, wholes)
		}
		if len(bs) == 1 {
			got, want = ingested(prepared.Ingest(t.Context(), pbs[0])), ingested(plain.Ingest(t.Context(), bs[0]))
		} else {
			all := func(d *DB, bs []Batch) string {
				rs, err := d.IngestAll(t.Context(), bs)
				out := fmt.Sprint(err)
				for _, r := range rs {
					out += ingested(r, nil)
				}
				return out
			}
			got, want = all(prepared, pbs), all(plain, bs)
		}
		if got != want {
			t.Fatalf("step %d answered\n%s\nunprepared\n%s", i, got, want)
		}
		if got, want := dump(t, prepared), dump(t, plain); got != want {
			t.Fatalf("step %d: the rows differ:\n%s", i, diffLines(got, want))
		}
		// In the transaction, the prepared batches build only what the
		// unprepared build beyond the whole files' aggregates (here the
		// append's rebuild: it does not extend the branch).
		if inTx, plainTx := gp.builds-p0-wholes, gq.builds-q0; inTx != plainTx-wholes {
			t.Fatalf("step %d: %d aggregates built in the transaction, unprepared %d (of which %d whole files)", i, inTx, plainTx, wholes)
		}
		for f := int64(1); f <= 3; f++ {
			gotIDs, gotFresh, gotOK := aggregateOf(t, prepared, f)
			wantIDs, wantFresh, wantOK := aggregateOf(t, plain, f)
			if !slices.Equal(gotIDs, wantIDs) || gotFresh != wantFresh || gotOK != wantOK {
				t.Fatalf("step %d file %d: aggregate %v %v %v, unprepared %v %v %v", i, f, gotIDs, gotFresh, gotOK, wantIDs, wantFresh, wantOK)
			}
		}
	}
	if gp.builds != gq.builds {
		t.Errorf("builds: %d prepared, %d unprepared", gp.builds, gq.builds)
	}

	// Prepared with one aggregator, ingested with another: the other's.
	b := found("/p/d.jsonl", "d", 4)
	prepared.PrepareBatch(&b)
	other := &idAggregator{}
	prepared.SetReportAggregator(other)
	ingest(t, prepared, b)
	if other.builds != 1 {
		t.Errorf("a batch prepared with another aggregator: the current one built %d", other.builds)
	}
}
