package db

import (
	"encoding/json"
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
