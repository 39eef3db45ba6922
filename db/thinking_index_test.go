package db

import (
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// queryPlan is EXPLAIN QUERY PLAN of q on d's readers, one step a line.
func queryPlan(t *testing.T, d *DB, q string, args ...any) string {
	t.Helper()
	rows, err := d.readers.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkBlockPlans: every lookup of a block by digest finds the session's
// files, then each file's block through thinking_file_sig; none scans the
// thinking table or reads it by digest alone.
func checkBlockPlans(t *testing.T, d *DB) {
	t.Helper()
	sig := digest("sig")
	for name, q := range map[string]string{"BlockEntries": sqlBlockEntry, "link in session": sqlLinkStampInSession} {
		plan := queryPlan(t, d, q, sig, "sid")
		searches := 0
		for _, step := range strings.Split(strings.TrimSpace(plan), "\n") {
			if strings.Contains(step, " t ") || strings.HasSuffix(step, " t") {
				if !strings.HasPrefix(step, "SEARCH t ") || !strings.HasSuffix(step, "INDEX thinking_file_sig (file=? AND sig_digest=?)") {
					t.Errorf("%s reads thinking by %q; plan:\n%s", name, step, plan)
				}
				searches++
			}
		}
		if searches == 0 {
			t.Errorf("%s: no step reads thinking; plan:\n%s", name, plan)
		}
	}
}

// checkFileBlockPlans: a file's blocks are read (a report) and deleted
// (a rewrite) through thinking_file_sig's first column, never by a scan of
// the thinking table.
func checkFileBlockPlans(t *testing.T, d *DB) {
	t.Helper()
	for name, q := range map[string]string{"report": sqlReportThinking, "clear": sqlClearThinking} {
		plan := queryPlan(t, d, q, 1)
		if !strings.Contains(plan, "SEARCH thinking USING INDEX thinking_file_sig (file=?)") || strings.Contains(plan, "SCAN thinking") {
			t.Errorf("%s does not find a file's blocks by thinking_file_sig; plan:\n%s", name, plan)
		}
	}
}

func TestBlockLookupsUseFileSigIndex(t *testing.T) {
	d := mustOpen(t)
	checkBlockPlans(t, d)
	checkFileBlockPlans(t, d)
}

// A version 10 database (thinking_file, and thinking_file_sig over signed
// blocks only) upgrades to the one index over every block: its blocks,
// signed or not, are found, read and cleared by file, and by digest
// within their session, as before.
func TestUpgradeFromVersion10ThinkingIndex(t *testing.T) {
	d, sig := openWithSharedBlock(t, 10)
	if v, err := d.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() || v < 11 {
		t.Fatalf("upgraded to version %d (%v), want %d", v, err, LatestSchemaVersion())
	}
	if n := count(t, d, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'thinking_file'`); n != 0 {
		t.Errorf("thinking_file kept")
	}
	// Every block is in the index, the unsigned one too.
	if n := count(t, d, `SELECT count(*) FROM thinking INDEXED BY thinking_file_sig WHERE file = 2`); n != 3 {
		t.Errorf("file 2's blocks in thinking_file_sig: %d, want 3", n)
	}
	checkBlockPlans(t, d)
	checkFileBlockPlans(t, d)
	es, err := d.ReportEntries(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(es[0].Thinking, es[1].Thinking); len(es) != 2 || got != fmt.Sprintf("%v %v", []Thinking{{Index: 0, Signed: true, Chars: 5}}, []Thinking{{Index: 0, Signed: true, Chars: 5}, {Index: 1, Chars: 7}}) {
		t.Errorf("file 2's report blocks: %s", got)
	}
	checkSessionBlockEntries(t, d, sig)
}

// A version 9 database (thinking_sig on the digest alone) upgrades to the
// (file, digest) index, and its blocks are found as before, each in its
// own session.
func TestUpgradeFromVersion9ThinkingIndex(t *testing.T) {
	d, sig := openWithSharedBlock(t, 9)
	if v, err := d.SchemaVersion(t.Context()); err != nil || v != LatestSchemaVersion() || v < 10 {
		t.Fatalf("upgraded to version %d (%v), want %d", v, err, LatestSchemaVersion())
	}
	if n := count(t, d, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'thinking_sig'`); n != 0 {
		t.Errorf("thinking_sig kept")
	}
	checkBlockPlans(t, d)
	checkSessionBlockEntries(t, d, sig)
	if got, err := d.BlockEntries(t.Context(), "none", []binding.Digest{binding.Digest(sig)}); err != nil || len(got) != 0 {
		t.Errorf("a session without the block: %v, %v", got, err)
	}
}

// openWithSharedBlock makes a database at schema version v holding two
// sessions' files whose signed blocks share one digest (file 2 holds it
// twice, and an unsigned block after it), opens it (which upgrades it)
// and returns it with the digest.
func openWithSharedBlock(t *testing.T, v int) (*DB, []byte) {
	t.Helper()
	raw, path := databaseAt(t, fmt.Sprintf("v%d.db", v), v)
	sig := digest("shared")
	for _, q := range []string{
		`INSERT INTO files (id, path, dev, ino, offset, lines, updated_ms) VALUES (1, '/a.jsonl', 1, 1, 10, 2, 0), (2, '/b.jsonl', 1, 2, 10, 3, 0)`,
		`INSERT INTO sessions (file, id, cwd, version) VALUES (1, 'sid', '/', 3), (2, 'other', '/', 3)`,
		`INSERT INTO entries (seq, file, id, type, line, offset, length) VALUES (1, 1, 'a', 'message', 2, 0, 1), (2, 2, 'b1', 'message', 2, 0, 1), (3, 2, 'b2', 'message', 3, 1, 1)`,
		`INSERT INTO thinking (entry, block, file, redacted, signed, sig_digest, chars) VALUES
			(1, 0, 1, 0, 1, ?1, 5), (2, 0, 2, 0, 1, ?1, 5), (3, 0, 2, 0, 1, ?1, 5), (3, 1, 2, 0, 0, NULL, 7)`,
	} {
		if _, err := raw.Exec(q, sig); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("open a version %d database: %v", v, err)
	}
	t.Cleanup(func() { d.Close() })
	return d, sig
}

// checkSessionBlockEntries: openWithSharedBlock's block is found in each
// session's own file, the newest message holding it.
func checkSessionBlockEntries(t *testing.T, d *DB, sig []byte) {
	t.Helper()
	for session, want := range map[string]string{"sid": "a", "other": "b2"} {
		got, err := d.BlockEntries(t.Context(), session, []binding.Digest{binding.Digest(sig)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[binding.Digest(sig)] != want {
			t.Errorf("session %s: block entries %v, want %s", session, got, want)
		}
	}
}
