package db

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestReadStmts: a reader query is prepared once and kept; past the bound
// queries still answer, prepared per call; a query that does not prepare
// reports its own error; and after Close nothing is kept.
func TestReadStmts(t *testing.T) {
	d, err := Open(t.Context(), filepath.Join(t.TempDir(), "r.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := `SELECT count(*) FROM sessions WHERE id = ?`
	for range 3 {
		var n int
		if err := d.readRow(t.Context(), q, "x").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d, %v", n, err)
		}
	}
	first := d.reads.m[q]
	if first == nil || len(d.reads.m) != 1 {
		t.Fatalf("kept %d statements", len(d.reads.m))
	}
	for i := range readStmtsMax + 10 {
		var n int
		if err := d.readRow(t.Context(), fmt.Sprintf(`SELECT %d`, i)).Scan(&n); err != nil || n != i {
			t.Fatalf("query %d past the bound: %d, %v", i, n, err)
		}
	}
	if len(d.reads.m) != readStmtsMax || d.reads.m[q] != first {
		t.Fatalf("kept %d statements (bound %d), first replaced: %v", len(d.reads.m), readStmtsMax, d.reads.m[q] != first)
	}
	rows, err := d.readQuery(t.Context(), `SELECT nope FROM nowhere`)
	if err == nil {
		rows.Close()
		t.Fatal("a query that does not prepare answered")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d.reads.m != nil {
		t.Fatal("statements kept after Close")
	}
}
