package db

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/my-pi/bindery"
)

func mustOpen(tb testing.TB) *DB {
	tb.Helper()
	d, err := Open(tb.Context(), filepath.Join(tb.TempDir(), "bindery.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Error(err)
		}
	})
	return d
}

func pragma(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) string {
	t.Helper()
	var v string
	if err := q.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestOpenNewDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pragma(t, d.writer, "user_version"), fmt.Sprint(LatestSchemaVersion()); got != want {
		t.Errorf("user_version = %s, want %s", got, want)
	}
	if got, want := pragma(t, d.writer, "application_id"), fmt.Sprint(ApplicationID); got != want {
		t.Errorf("application_id = %s, want %s", got, want)
	}
	if got := pragma(t, d.writer, "journal_mode"); got != "wal" {
		t.Errorf("journal_mode = %s, want wal", got)
	}
	if got := pragma(t, d.writer, "synchronous"); got != "2" {
		t.Errorf("writer synchronous = %s, want 2 (FULL)", got)
	}
	if got := pragma(t, d.writer, "foreign_keys"); got != "1" {
		t.Errorf("writer foreign_keys = %s, want 1", got)
	}
	if got := pragma(t, d.readers, "query_only"); got != "1" {
		t.Errorf("reader query_only = %s, want 1", got)
	}
	if _, err := d.readers.ExecContext(t.Context(), "DELETE FROM events"); err == nil {
		t.Error("a reader connection could write")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening an up-to-date database works and changes nothing.
	d2, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pragma(t, d2.readers, "user_version"), fmt.Sprint(LatestSchemaVersion()); got != want {
		t.Errorf("reopened user_version = %s, want %s", got, want)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
}

// describe renders a schema as structure (tables, columns, indexes, foreign
// keys), independent of how the CREATE text was spelled or altered.
func describe(t *testing.T, db *sql.DB) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	type obj struct{ typ, name, tbl string }
	var objs []obj
	for rows.Next() {
		var o obj
		if err := rows.Scan(&o.typ, &o.name, &o.tbl); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	rows.Close()
	dump := func(q string) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "    %v\n", vals)
		}
	}
	for _, o := range objs {
		fmt.Fprintf(&b, "%s %s on %s\n", o.typ, o.name, o.tbl)
		switch o.typ {
		case "table":
			dump(fmt.Sprintf("PRAGMA table_xinfo(%q)", o.name))
			dump(fmt.Sprintf("PRAGMA foreign_key_list(%q)", o.name))
			dump(fmt.Sprintf("SELECT name, \"unique\", origin, partial FROM pragma_index_list(%q) ORDER BY name", o.name))
		case "index":
			dump(fmt.Sprintf("PRAGMA index_xinfo(%q)", o.name))
			var where sql.NullString
			db.QueryRowContext(ctx, `SELECT substr(sql, instr(upper(sql), ' WHERE ')) FROM sqlite_schema WHERE name = ? AND instr(upper(sql), ' WHERE ') > 0`, o.name).Scan(&where)
			fmt.Fprintf(&b, "    where %q\n", strings.Join(strings.Fields(where.String), " "))
		default:
			var s string
			db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = ?`, o.name).Scan(&s)
			fmt.Fprintf(&b, "    %s\n", strings.Join(strings.Fields(s), " "))
		}
	}
	return b.String()
}

func rawDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "raw.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestMigrationParity: version 1 plus every migration step must give the
// same schema as schema.sql. It fails when one is changed without the other.
func TestMigrationParity(t *testing.T) {
	fromSchema := rawDB(t)
	if err := migrate(t.Context(), fromSchema, bindery.Schema, steps); err != nil {
		t.Fatal(err)
	}
	fromSteps := rawDB(t)
	// Build version 1 as release 1 did, then migrate like an upgrade would.
	if err := migrate(t.Context(), fromSteps, steps[0].SQL, steps[:1]); err != nil {
		t.Fatal(err)
	}
	if got := pragma(t, fromSteps, "user_version"); got != "1" {
		t.Fatalf("v1 database has user_version %s", got)
	}
	if err := migrate(t.Context(), fromSteps, bindery.Schema, steps); err != nil {
		t.Fatal(err)
	}
	a, b := describe(t, fromSchema), describe(t, fromSteps)
	if a != b {
		t.Errorf("schema.sql and v1+migrations differ:\n--- schema.sql\n%s\n--- migrations\n%s", a, b)
	}
	if !strings.Contains(a, "table entries") || !strings.Contains(a, "index files_live_path") {
		t.Errorf("schema description is missing objects:\n%s", a)
	}
	for _, db := range []*sql.DB{fromSchema, fromSteps} {
		if got, want := pragma(t, db, "user_version"), fmt.Sprint(len(steps)); got != want {
			t.Errorf("user_version = %s, want %s", got, want)
		}
	}
}

// TestMigrateSteps drives the step mechanism with a made-up version 2 and 3.
func TestMigrateSteps(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/001_initial.sql": {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"migrations/002_add_y.sql":   {Data: []byte(`ALTER TABLE a ADD COLUMN y TEXT;`)},
		"migrations/003_bad.sql":     {Data: []byte(`CREATE TABLE b (z INTEGER); ALTER TABLE nope ADD COLUMN q;`)},
	}
	all, err := loadSteps(fsys)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t)
	if err := migrate(t.Context(), db, all[0].SQL, all[:1]); err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, "unused", all[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO a (x, y) VALUES (1, 'y')`); err != nil {
		t.Fatalf("step 2 not applied: %v", err)
	}
	err = migrate(t.Context(), db, "unused", all)
	if err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("failing step: err = %v", err)
	}
	if got := pragma(t, db, "user_version"); got != "2" {
		t.Errorf("after a failed step user_version = %s, want 2", got)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'b'`).Scan(&n)
	if n != 0 {
		t.Error("a failed step left a table behind")
	}

	bad := fstest.MapFS{"migrations/001_a.sql": {}, "migrations/003_c.sql": {}}
	if _, err := loadSteps(bad); err == nil {
		t.Error("a gap in migration numbers was accepted")
	}
}

func TestRefusesForeignDatabases(t *testing.T) {
	for name, setup := range map[string]string{
		"other application":  `PRAGMA application_id = 42; CREATE TABLE t (x);`,
		"tables, no version": `CREATE TABLE t (x);`,
		"newer bindery":      fmt.Sprintf(`PRAGMA application_id = %d; PRAGMA user_version = 999; CREATE TABLE t (x);`, ApplicationID),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.db")
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(setup); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			d, err := Open(t.Context(), path, Options{})
			if err == nil {
				d.Close()
				t.Fatal("opened a database that is not bindery's")
			}
			t.Log(err)
		})
	}
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "a?b.db"), Options{}); err == nil {
		t.Error("a path with '?' was accepted")
	}
}

// ---- ingest

func i64(v int64) *int64 { return &v }

func digest(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func entry(line int, id, parent, typ string) Entry {
	return Entry{Line: line, Offset: int64(line * 100), Length: 100, Type: typ, ID: id, ParentID: parent,
		Timestamp: fmt.Sprintf("2026-11-29T10:%02d:00.000Z", line)}
}

func assistant(line int, id, parent string, blocks ...Thinking) Entry {
	e := entry(line, id, parent, "message")
	e.Role, e.Model, e.Provider, e.StopReason = "assistant", "claude-opus-4-5", "anthropic", "toolUse"
	e.Usage = Usage{Input: i64(10), Output: i64(20), CacheRead: i64(1000)}
	e.Thinking = blocks
	e.ToolCalls = 1
	return e
}

func signed(i int, sig string) Thinking {
	return Thinking{Index: i, Signed: true, SigDigest: digest(sig), Chars: 100}
}

func frontierEntry(line int, id, parent, data string) Entry {
	e := entry(line, id, parent, "custom")
	e.CustomType = FrontierType
	e.Data = json.RawMessage(data)
	return e
}

func cursor(path string, ino uint64, off int64, lines int) Cursor {
	return Cursor{Path: path, Dev: 1, Ino: ino, Offset: off, Lines: lines, Check: digest(fmt.Sprint(off))}
}

func count(t *testing.T, d *DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := d.readers.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func ingest(t *testing.T, d *DB, b Batch) Ingested {
	t.Helper()
	r, err := d.Ingest(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestIngestFoundGrewAndTree(t *testing.T) {
	d := mustOpen(t)
	hdr := &Header{ID: "s1", Version: 3, Cwd: "/src/app", Timestamp: "2026-11-29T10:00:00.000Z"}
	r := ingest(t, d, Batch{Kind: Found, Path: "/p/s1.jsonl", Cursor: cursor("/p/s1.jsonl", 7, 500, 5), Header: hdr,
		Entries: []Entry{
			entry(2, "u1", "", "message"),
			assistant(3, "a1", "u1", signed(0, "sig-a1")),
			frontierEntry(4, "f1", "a1", `{"lastAttemptedToolCallId":"t1"}`),
			entry(5, "u2", "f1", "message"),
		}})
	if r.SessionID != "s1" || r.Entries != 4 || len(r.Events) != 1 || r.Events[0].Type != EventSession {
		t.Fatalf("ingested %+v", r)
	}
	// Branch off a1 (a /tree jump), then continue the first branch.
	ingest(t, d, Batch{Kind: Grew, Path: "/p/s1.jsonl", Cursor: cursor("/p/s1.jsonl", 7, 800, 8),
		Entries: []Entry{
			assistant(6, "a2", "a1", signed(0, "sig-a2"), Thinking{Index: 1, Redacted: true, Signed: true, SigDigest: digest("r")}),
			frontierEntry(7, "f2", "a2", `{"lastAttemptedToolCallId":"t2"}`),
			entry(8, "u3", "u2", "message"),
		},
		Errors: []IngestError{{Line: 9, Offset: 800, Reason: "invalid JSON"}},
	})

	s, err := d.Session(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := Session{File: s.File, ID: "s1", Path: "/p/s1.jsonl", Cwd: "/src/app", Version: 3,
		HeaderTime: hdr.Timestamp, Entries: 7, Thinking: 3, Leaf: "u3", LastActivity: "2026-11-29T10:08:00.000Z", Offset: 800}
	if s != want {
		t.Errorf("session\n got %+v\nwant %+v", s, want)
	}
	if _, err := d.Session(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	cs, err := d.Cursors(t.Context())
	if err != nil || len(cs) != 1 || cs[0].Offset != 800 || cs[0].Lines != 8 || cs[0].Ino != 7 {
		t.Fatalf("cursors %+v, %v", cs, err)
	}

	tree, err := d.Tree(t.Context(), s.File)
	if err != nil {
		t.Fatal(err)
	}
	br := tree.Branches()
	if len(br) != 2 {
		t.Fatalf("branches %+v", br)
	}
	// f2 (leaf of the a1->a2 branch) and u3 (current leaf).
	if br[0].Leaf != "f2" || br[0].Current || br[0].Depth != 4 || br[0].Frontier == nil || br[0].Frontier.Entry != "f2" {
		t.Errorf("branch 0: %+v frontier %+v", br[0], br[0].Frontier)
	}
	if br[1].Leaf != "u3" || !br[1].Current || br[1].Depth != 5 || br[1].Frontier == nil || br[1].Frontier.Entry != "f1" {
		t.Errorf("branch 1: %+v frontier %+v", br[1], br[1].Frontier)
	}
	if string(br[1].Frontier.Data) != `{"lastAttemptedToolCallId":"t1"}` {
		t.Errorf("frontier data %s", br[1].Frontier.Data)
	}
	p, err := tree.Path("u3")
	if err != nil || !reflect.DeepEqual(p, []string{"u1", "a1", "f1", "u2", "u3"}) {
		t.Errorf("path to u3 = %v, %v", p, err)
	}
	if _, err := tree.Path("zz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("path to unknown: %v", err)
	}
	// PathEntries follows the same links as SessionPath, with seqs.
	pe, found := tree.PathEntries("u3")
	sp, sfound, err := d.SessionPath(t.Context(), "s1", "u3")
	if err != nil || !found || !sfound || len(pe) != 5 || len(sp) != len(pe) {
		t.Fatalf("path entries to u3 = %v %v, session path %v %v %v", pe, found, sp, sfound, err)
	}
	for i := range pe {
		if pe[i].ID != sp[i].ID || pe[i].Seq != sp[i].Seq || pe[i].Seq == 0 {
			t.Errorf("path entry %d: tree %+v, session path %+v", i, pe[i], sp[i])
		}
	}
	if _, found := tree.PathEntries("zz"); found {
		t.Errorf("path entries to unknown entry found")
	}
	if n := count(t, d, `SELECT count(*) FROM ingest_errors`); n != 1 {
		t.Errorf("ingest errors = %d", n)
	}
	if n := count(t, d, `SELECT count(*) FROM events WHERE type = 'ingest-error'`); n != 1 {
		t.Errorf("ingest-error events = %d", n)
	}
	// Ingest commits relax synchronous for their own transaction only.
	if got := pragma(t, d.writer, "synchronous"); got != "2" {
		t.Errorf("writer synchronous after ingest = %s, want 2 (FULL)", got)
	}
	st, err := d.Stats(t.Context())
	if err != nil || st.Sessions != 1 || st.Entries != 7 || st.ThinkingBlocks != 3 || st.IngestErrors != 1 || st.IngestedBytes != 800 {
		t.Errorf("stats %+v %v", st, err)
	}
}

// TestIngestIsAtomic: a batch that fails part-way leaves neither rows nor
// a moved cursor behind.
func TestIngestIsAtomic(t *testing.T) {
	d := mustOpen(t)
	path := "/p/s.jsonl"
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, 200, 2), Header: &Header{ID: "s", Version: 3},
		Entries: []Entry{entry(2, "u1", "", "message")}})
	bad := assistant(4, "a2", "u1", signed(0, "x"), signed(0, "dup")) // duplicate block index: the insert fails
	_, err := d.Ingest(t.Context(), Batch{Kind: Grew, Path: path, Cursor: cursor(path, 1, 400, 4),
		Entries: []Entry{assistant(3, "a1", "u1", signed(0, "ok")), bad}})
	if err == nil {
		t.Fatal("a batch with a failing row was committed")
	}
	cs, _ := d.Cursors(t.Context())
	if len(cs) != 1 || cs[0].Offset != 200 {
		t.Errorf("cursor moved: %+v", cs)
	}
	if n := count(t, d, `SELECT count(*) FROM entries`); n != 1 {
		t.Errorf("entries = %d, want 1 (the failed batch left rows)", n)
	}
	if n := count(t, d, `SELECT count(*) FROM thinking`); n != 0 {
		t.Errorf("thinking = %d, want 0", n)
	}
	s, _ := d.Session(t.Context(), "s")
	if s.Entries != 1 || s.Leaf != "u1" {
		t.Errorf("session counters moved: %+v", s)
	}

	// A group commit is all or nothing too.
	_, err = d.IngestAll(t.Context(), []Batch{
		{Kind: Found, Path: "/p/t.jsonl", Cursor: cursor("/p/t.jsonl", 2, 100, 1), Header: &Header{ID: "t", Version: 3}},
		{Kind: Grew, Path: path, Cursor: cursor(path, 1, 400, 4), Entries: []Entry{bad}},
	})
	if err == nil {
		t.Fatal("a failing group commit succeeded")
	}
	if _, err := d.Session(t.Context(), "t"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed group commit kept its first batch: %v", err)
	}
	rs, err := d.IngestAll(t.Context(), []Batch{
		{Kind: Found, Path: "/p/t.jsonl", Cursor: cursor("/p/t.jsonl", 2, 100, 1), Header: &Header{ID: "t", Version: 3}},
		{Kind: Grew, Path: path, Cursor: cursor(path, 1, 300, 3), Entries: []Entry{assistant(3, "a1", "u1", signed(0, "ok"))}},
	})
	if err != nil || len(rs) != 2 {
		t.Fatalf("group commit: %v", err)
	}
	if n := count(t, d, `SELECT count(*) FROM files`); n != 2 {
		t.Errorf("files = %d", n)
	}
}

func TestRewriteReplacesRows(t *testing.T) {
	d := mustOpen(t)
	path := "/p/old.jsonl"
	// A v1 file: synthesized ids, one frontier, an error line.
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 5, 400, 4), Header: &Header{ID: "s", Version: 1, Cwd: "/c"},
		Entries: []Entry{entry(2, "L2", "", "message"), assistant(3, "L3", "L2", signed(0, "sig")), frontierEntry(4, "L4", "L3", `{}`)},
		Errors:  []IngestError{{Line: 5, Offset: 400, Reason: "torn"}}})
	// pi migrates it to v3 in place (same inode) and it comes back longer.
	ingest(t, d, Batch{Kind: Rewritten, Path: path, Cursor: cursor(path, 5, 900, 5), Header: &Header{ID: "s", Version: 3, Cwd: "/c"},
		Entries: []Entry{entry(2, "aa", "", "message"), assistant(3, "bb", "aa", signed(0, "sig")), entry(4, "cc", "bb", "message"), entry(5, "dd", "cc", "message")}})
	s, err := d.Session(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 3 || s.Entries != 4 || s.Thinking != 1 || s.Leaf != "dd" || s.Offset != 900 {
		t.Errorf("after rewrite: %+v", s)
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM entries`:                     4,
		`SELECT count(*) FROM entries WHERE id LIKE 'L%'`:  0,
		`SELECT count(*) FROM thinking`:                    1,
		`SELECT count(*) FROM frontier`:                    0,
		`SELECT count(*) FROM ingest_errors`:               0,
		`SELECT count(*) FROM files`:                       1,
		`SELECT count(*) FROM events WHERE type='session'`: 2,
	} {
		if n := count(t, d, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
	// Rewritten shorter.
	ingest(t, d, Batch{Kind: Rewritten, Path: path, Cursor: cursor(path, 5, 150, 2), Header: &Header{ID: "s", Version: 3, Cwd: "/c"},
		Entries: []Entry{entry(2, "aa", "", "message")}})
	s, _ = d.Session(t.Context(), "s")
	if s.Entries != 1 || s.Thinking != 0 || s.Leaf != "aa" {
		t.Errorf("after shorter rewrite: %+v", s)
	}
}

func TestRemovedKeepsThinking(t *testing.T) {
	d := mustOpen(t)
	path := "/p/gone.jsonl"
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 9, 300, 3), Header: &Header{ID: "g", Version: 3},
		Entries: []Entry{entry(2, "u", "", "message"), assistant(3, "a", "u", signed(0, "keep-me"))}})
	r := ingest(t, d, Batch{Kind: Removed, Path: path})
	if len(r.Events) != 1 {
		t.Errorf("removed events %+v", r.Events)
	}
	if ss, _ := d.Sessions(t.Context(), false); len(ss) != 0 {
		t.Errorf("a removed session is listed: %+v", ss)
	}
	ss, _ := d.Sessions(t.Context(), true)
	if len(ss) != 1 || !ss[0].Removed {
		t.Fatalf("with removed: %+v", ss)
	}
	if n := count(t, d, `SELECT count(*) FROM thinking WHERE sig_digest = ?`, digest("keep-me")); n != 1 {
		t.Error("thinking of a removed session was lost")
	}
	if cs, _ := d.Cursors(t.Context()); len(cs) != 0 {
		t.Errorf("a removed file still has a live cursor: %+v", cs)
	}
	// Removing an unknown file is a no-op; the path can come back as a new file.
	ingest(t, d, Batch{Kind: Removed, Path: "/p/never.jsonl"})
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 10, 100, 1), Header: &Header{ID: "g2", Version: 3}})
	if n := count(t, d, `SELECT count(*) FROM files WHERE path = ?`, path); n != 2 {
		t.Errorf("files at the path = %d, want 2 (old removed + new)", n)
	}
	// The same path with another inode: the old file is removed, not overwritten.
	ingest(t, d, Batch{Kind: Grew, Path: path, Cursor: cursor(path, 11, 100, 1), Header: &Header{ID: "g3", Version: 3}})
	if n := count(t, d, `SELECT count(*) FROM files WHERE path = ? AND removed = 0`, path); n != 1 {
		t.Errorf("live files at the path = %d", n)
	}
	if s, err := d.Session(t.Context(), "g2"); err != nil || !s.Removed {
		t.Errorf("replaced file's session: %+v %v", s, err)
	}
}

func TestBadBatches(t *testing.T) {
	d := mustOpen(t)
	if _, err := d.Ingest(t.Context(), Batch{Kind: Found}); err == nil {
		t.Error("a batch without a path was accepted")
	}
	if _, err := d.Ingest(t.Context(), Batch{Kind: "moved", Path: "/x"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

func TestEventsSince(t *testing.T) {
	d := mustOpen(t)
	for i := range 3 {
		p := fmt.Sprintf("/p/%d.jsonl", i)
		ingest(t, d, Batch{Kind: Found, Path: p, Cursor: cursor(p, uint64(i+1), 10, 1), Header: &Header{ID: fmt.Sprint("s", i), Version: 3}})
	}
	evs, oldest, err := d.EventsSince(t.Context(), 1, "", 10)
	if err != nil || oldest != 1 || len(evs) != 2 || evs[0].Seq != 2 {
		t.Fatalf("since 1: %+v oldest %d %v", evs, oldest, err)
	}
	evs, _, err = d.EventsSince(t.Context(), 0, "s2", 10)
	if err != nil || len(evs) != 1 || evs[0].Conversation != "s2" {
		t.Fatalf("filtered: %+v %v", evs, err)
	}
	var f map[string]any
	if err := json.Unmarshal(evs[0].Fields, &f); err != nil || f["change"] != "found" {
		t.Errorf("fields %s", evs[0].Fields)
	}
}

// TestConcurrentReadersAndWriter runs under -race: readers see whole
// batches only (a session's counters always match its rows), and no
// SQLITE_BUSY reaches a caller.
func TestConcurrentReadersAndWriter(t *testing.T) {
	d := mustOpen(t)
	path := "/p/busy.jsonl"
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, 100, 1), Header: &Header{ID: "busy", Version: 3}})
	const batches, per = 60, 10
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				tx, err := d.readers.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
				if err != nil {
					errs <- err
					return
				}
				var counted, rows int
				err = tx.QueryRow(`SELECT entries FROM sessions WHERE id = 'busy'`).Scan(&counted)
				if err == nil {
					err = tx.QueryRow(`SELECT count(*) FROM entries`).Scan(&rows)
				}
				tx.Rollback()
				if err != nil {
					errs <- err
					return
				}
				if counted != rows || rows%per != 0 {
					errs <- fmt.Errorf("reader saw a partial batch: counter %d, rows %d", counted, rows)
					return
				}
				if _, err := d.Sessions(t.Context(), false); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	line := 1
	for i := range batches {
		var es []Entry
		for range per {
			line++
			es = append(es, assistant(line, fmt.Sprint("e", line), fmt.Sprint("e", line-1), signed(0, fmt.Sprint(line))))
		}
		if _, err := d.Ingest(t.Context(), Batch{Kind: Grew, Path: path, Cursor: cursor(path, 1, int64(100*(i+2)), line), Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := count(t, d, `SELECT count(*) FROM entries`); n != batches*per {
		t.Errorf("entries = %d", n)
	}
}

// TestSessionTreeExtends: a tree extended from an earlier one equals a
// tree read whole, the earlier tree is left as it was, and a rewrite is
// noticed.
func TestSessionTreeExtends(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	path := "/p/x.jsonl"
	ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, 300, 3), Header: &Header{ID: "x", Version: 3},
		Entries: []Entry{entry(2, "a", "", "message"), frontierEntry(3, "f", "a", `{"n":1}`)}})
	_, t1, _, err := d.SessionTree(ctx, "x", nil)
	if err != nil || t1.Len() != 2 {
		t.Fatalf("first tree: %v", err)
	}
	before := fmt.Sprint(t1.Branches())
	// Grow: continue from f, and branch off a (a sibling of f).
	ingest(t, d, Batch{Kind: Grew, Path: path, Cursor: cursor(path, 1, 600, 6),
		Entries: []Entry{entry(4, "b", "f", "message"), entry(5, "c", "a", "message"), frontierEntry(6, "g", "c", `{"n":2}`)}})
	s, t2, _, err := d.SessionTree(ctx, "x", t1)
	if err != nil || t2.Len() != 5 || s.Entries != 5 {
		t.Fatalf("extended tree: len %d, %v", t2.Len(), err)
	}
	_, whole, _, _ := d.SessionTree(ctx, "x", nil)
	br := func(tr *Tree) string {
		var b strings.Builder
		for _, x := range tr.Branches() {
			fmt.Fprintf(&b, "%s/%d/%v/", x.Leaf, x.Depth, x.Current)
			if x.Frontier != nil {
				fmt.Fprintf(&b, "%s:%s ", x.Frontier.Entry, x.Frontier.Data)
			}
		}
		return b.String()
	}
	if br(t2) != br(whole) || br(t2) != `b/3/false/f:{"n":1} g/3/true/g:{"n":2} ` {
		t.Errorf("extended %q, whole %q", br(t2), br(whole))
	}
	if after := fmt.Sprint(t1.Branches()); after != before {
		t.Errorf("extending changed the earlier tree: %s -> %s", before, after)
	}
	// A rewrite replaces the rows: the earlier tree must not be extended.
	ingest(t, d, Batch{Kind: Rewritten, Path: path, Cursor: cursor(path, 1, 300, 3), Header: &Header{ID: "x", Version: 3},
		Entries: []Entry{entry(2, "r1", "", "message"), entry(3, "r2", "r1", "message")}})
	_, t3, _, err := d.SessionTree(ctx, "x", t2)
	if err != nil || t3.Len() != 2 || br(t3) != "r2/2/true/" {
		t.Errorf("after a rewrite: %q %v", br(t3), err)
	}
	// A duplicate id re-parents (pi's byId keeps the later entry).
	ingest(t, d, Batch{Kind: Grew, Path: path, Cursor: cursor(path, 1, 500, 5),
		Entries: []Entry{entry(4, "k", "r1", "message"), entry(5, "r1", "r2", "message")}})
	_, t4, _, _ := d.SessionTree(ctx, "x", t3)
	_, w4, _, _ := d.SessionTree(ctx, "x", nil)
	if br(t4) != br(w4) {
		t.Errorf("duplicate id: extended %q, whole %q", br(t4), br(w4))
	}
}

// Ancestors walks up from an entry, nearest first, and stops at n entries
// or at the root; SessionPath gives the same entries root first.
func TestAncestors(t *testing.T) {
	d := mustOpen(t)
	hdr := &Header{ID: "anc", Version: 3, Cwd: "/src", Timestamp: "2026-11-29T10:00:00.000Z"}
	es := []Entry{entry(2, "e0", "", "message")}
	for i := 1; i < 20; i++ {
		es = append(es, entry(i+2, fmt.Sprintf("e%d", i), fmt.Sprintf("e%d", i-1), "custom"))
	}
	ingest(t, d, Batch{Kind: Found, Path: "/p/anc.jsonl", Cursor: cursor("/p/anc.jsonl", 9, 2200, 21), Header: hdr, Entries: es})
	ids := func(p []PathEntry) []string {
		var out []string
		for _, e := range p {
			out = append(out, e.ID)
		}
		return out
	}
	up, err := d.Ancestors(t.Context(), "anc", "e10", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(up)); got != "[e10 e9 e8]" {
		t.Fatalf("ancestors of e10, 3: %s", got)
	}
	up, err = d.Ancestors(t.Context(), "anc", "e2", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(up)); got != "[e2 e1 e0]" {
		t.Fatalf("ancestors of e2 to the root: %s", got)
	}
	path, found, err := d.SessionPath(t.Context(), "anc", "e2")
	if err != nil || !found || fmt.Sprint(ids(path)) != "[e0 e1 e2]" {
		t.Fatalf("session path: %v %v %v", ids(path), found, err)
	}
	if up, err := d.Ancestors(t.Context(), "anc", "nope", 5); err != nil || len(up) != 0 {
		t.Fatalf("unknown entry: %v %v", up, err)
	}
	if up, err := d.Ancestors(t.Context(), "nosession", "e1", 5); err != nil || up != nil {
		t.Fatalf("unknown session: %v %v", up, err)
	}
}

// TestUpgradeFromVersion3: a database made by version 3 (the release
// before the cost split) with rows in it opens, is upgraded in place, and
// keeps every row: old entries read back with cost.total and no split,
// entries ingested after the upgrade with the split.
func TestUpgradeFromVersion3(t *testing.T) {
	raw, path := databaseAt(t, "v3.db", 3)
	for _, q := range []string{
		`INSERT INTO files (id, path, dev, ino, offset, lines, check_digest, updated_ms) VALUES (1, '/p/old.jsonl', 1, 9, 400, 4, x'00', 1)`,
		`INSERT INTO sessions (file, id, cwd, version, header_time, last_activity, entries, thinking, leaf) VALUES (1, 'old', '/w', 3, '2026-11-01T10:00:00Z', '2026-11-01T10:00:02Z', 2, 1, 'a1')`,
		`INSERT INTO entries (seq, file, id, parent_id, type, line, offset, length, role) VALUES (1, 1, 'u1', NULL, 'message', 2, 100, 100, 'user')`,
		`INSERT INTO entries (seq, file, id, parent_id, type, line, offset, length, role, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_total, tool_calls)
			VALUES (2, 1, 'a1', 'u1', 'message', 3, 200, 100, 'assistant', 'claude-opus-4-5', 3, 120, 20500, 310, 0.01521, 1)`,
		`INSERT INTO thinking (entry, block, file, redacted, signed, sig_digest, chars) VALUES (2, 0, 1, 0, 1, x'` + fmt.Sprintf("%x", digest("sig-old")) + `', 80)`,
		`INSERT INTO report_summaries (file, stamp, summary, updated_ms) VALUES (1, 'st', '{}', 1)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("open a version 3 database: %v", err)
	}
	defer d.Close()
	if v, err := d.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() || v < 4 {
		t.Fatalf("upgraded to version %d (%v), want %d", v, err, LatestSchemaVersion())
	}
	s, err := d.Session(t.Context(), "old")
	if err != nil || s.Entries != 2 || s.Leaf != "a1" {
		t.Fatalf("session after upgrade: %+v %v", s, err)
	}
	rows, err := d.ReportEntries(t.Context(), 1)
	if err != nil || len(rows) != 2 {
		t.Fatalf("entries after upgrade: %+v %v", rows, err)
	}
	u := rows[1].Usage
	if u.CostTotal == nil || *u.CostTotal != 0.01521 || *u.CacheRead != 20500 || u.CostInput != nil || u.CostOutput != nil || u.CostCacheRead != nil || u.CostCacheWrite != nil {
		t.Errorf("old entry usage after upgrade: %+v", u)
	}
	if len(rows[1].Thinking) != 1 || rows[1].Thinking[0].Chars != 80 {
		t.Errorf("old thinking after upgrade: %+v", rows[1].Thinking)
	}
	// the file grows: the new rows carry pi's split
	a2 := assistant(4, "a2", "a1")
	a2.Usage.CostTotal, a2.Usage.CostInput, a2.Usage.CostOutput = f64(0.010755), f64(0.000005), f64(0.00025)
	a2.Usage.CostCacheRead, a2.Usage.CostCacheWrite = f64(0.0104), f64(0.0001)
	ingest(t, d, Batch{Kind: Grew, Path: "/p/old.jsonl", Cursor: Cursor{Path: "/p/old.jsonl", Dev: 1, Ino: 9, Offset: 500, Lines: 5}, Entries: []Entry{a2}})
	rows, err = d.ReportEntries(t.Context(), 1)
	if err != nil || len(rows) != 3 {
		t.Fatalf("entries after growing: %+v %v", rows, err)
	}
	u = rows[2].Usage
	if u.CostTotal == nil || u.CostInput == nil || u.CostOutput == nil || u.CostCacheRead == nil || u.CostCacheWrite == nil ||
		*u.CostTotal != 0.010755 || *u.CostInput != 0.000005 || *u.CostOutput != 0.00025 || *u.CostCacheRead != 0.0104 || *u.CostCacheWrite != 0.0001 {
		t.Errorf("new entry usage: %+v", u)
	}
	if rows[1].Usage.CostInput != nil {
		t.Errorf("the old row gained a split it never had")
	}
	if n := count(t, d, `SELECT count(*) FROM report_summaries`); n != 1 {
		t.Errorf("report summaries after upgrade = %d", n)
	}
}

func f64(v float64) *float64 { return &v }

// Two or more files may carry one session id (a copied file): Session
// picks the live one with the latest last activity, a tie going to the
// file ingested last, and SessionFiles lists them all in that order.
func TestSessionFilesSameID(t *testing.T) {
	d := mustOpen(t)
	found := func(id, path string, ino uint64, line int) {
		ingest(t, d, Batch{Kind: Found, Path: path, Cursor: cursor(path, ino, int64(line*100+100), line), Header: &Header{ID: id, Version: 3},
			Entries: []Entry{entry(line, "u", "", "message")}})
	}
	found("s", "/p/a.jsonl", 1, 2)
	found("s", "/p/b.jsonl", 2, 2) // a's copy: the same last activity, ingested later
	found("s", "/p/c.jsonl", 3, 5) // active later, then removed
	ingest(t, d, Batch{Kind: Removed, Path: "/p/c.jsonl"})
	found("other", "/p/other.jsonl", 4, 9)

	files, err := d.SessionFiles(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	want := []SessionFile{
		{Path: "/p/b.jsonl", LastActivity: "2026-11-29T10:02:00.000Z"},
		{Path: "/p/a.jsonl", LastActivity: "2026-11-29T10:02:00.000Z"},
		{Path: "/p/c.jsonl", Removed: true, LastActivity: "2026-11-29T10:05:00.000Z"},
	}
	if !slices.Equal(files, want) {
		t.Errorf("files of s:\n got %+v\nwant %+v", files, want)
	}
	if s, err := d.Session(t.Context(), "s"); err != nil || s.Path != want[0].Path {
		t.Errorf("Session(s) = %s, %v; want %s", s.Path, err, want[0].Path)
	}
	// SessionTree reads the files with the session, in one snapshot
	if s, _, files, err := d.SessionTree(t.Context(), "s", nil); err != nil || s.Path != want[0].Path || !slices.Equal(files, want) {
		t.Errorf("SessionTree(s) = %s, files %+v, %v; want %s, %+v", s.Path, files, err, want[0].Path, want)
	}
	if files, err := d.SessionFiles(t.Context(), "nope"); err != nil || len(files) != 0 {
		t.Errorf("unknown id: %+v %v", files, err)
	}
}

// databaseAt is a new database file brought to schema version v the way
// releases did: version 1 as release 1 made it, then each step to v. Its
// one connection is the caller's to close.
func databaseAt(t *testing.T, name string, v int) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	if err := migrate(t.Context(), raw, steps[0].SQL, steps[:1]); err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), raw, "unused", steps[:v]); err != nil {
		t.Fatal(err)
	}
	if got := pragma(t, raw, "user_version"); got != fmt.Sprint(v) {
		t.Fatalf("built user_version %s, want %d", got, v)
	}
	return raw, path
}
