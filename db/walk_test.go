package db

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func pathIDs(p []PathEntry) []string {
	var out []string
	for _, e := range p {
		out = append(out, e.ID)
	}
	return out
}

func cycleEntries(ids, parents []string, line0 int) []Entry {
	var es []Entry
	for i, id := range ids {
		es = append(es, Entry{Line: line0 + i, Offset: int64(100 * (line0 + i)), Length: 100, Type: "message", Role: "user", ID: id, ParentID: parents[i]})
	}
	return es
}

// Two entries naming each other (a damaged file's three lines): every walk
// ends, cut at the cycle's earliest entry, the same way in SQL and in the
// tree, and the cycle is an ingest error naming the file and the entries.
// Before, SessionPath walked the cycle a million times (2.4 s a compile).
func TestParentCycleInOneBatch(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	path := "/s/cycle.jsonl"
	if _, err := d.Ingest(ctx, Batch{Kind: Found, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: 300, Lines: 3},
		Header:  &Header{ID: "cyc", Version: 3, Cwd: "/"},
		Entries: cycleEntries([]string{"aaaa", "bbbb"}, []string{"bbbb", "aaaa"}, 2)}); err != nil {
		t.Fatal(err)
	}
	for from, want := range map[string][]string{"bbbb": {"aaaa", "bbbb"}, "aaaa": {"aaaa"}} {
		p, found, err := d.SessionPath(ctx, "cyc", from)
		if err != nil || !found || !slices.Equal(pathIDs(p), want) {
			t.Errorf("SessionPath from %s = %v %v %v, want %v", from, pathIDs(p), found, err, want)
		}
	}
	up, err := d.Ancestors(ctx, "cyc", "bbbb", 100)
	if err != nil || !slices.Equal(pathIDs(up), []string{"bbbb", "aaaa"}) {
		t.Errorf("Ancestors = %v %v", pathIDs(up), err)
	}
	_, tree, _, err := d.SessionTree(ctx, "cyc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := tree.PathEntries("bbbb"); !slices.Equal(pathIDs(p), []string{"aaaa", "bbbb"}) {
		t.Errorf("tree path %v", pathIDs(p))
	}
	if bs := tree.Branches(); len(bs) != 1 || bs[0].Leaf != "bbbb" || bs[0].Depth != 2 {
		t.Errorf("branches %+v", bs)
	}
	errs, err := d.IngestErrors(ctx, "cyc", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || errs[0].Path != path || errs[0].Line != 2 ||
		!strings.Contains(errs[0].Reason, `"aaaa" (line 2) → "bbbb" (line 3) → "aaaa"`) || !strings.Contains(errs[0].Reason, "taken as a root") {
		t.Errorf("errors %+v", errs)
	}
}

// A cycle closed by a later batch (through entries already stored) is
// recorded by the first walk that meets it, once.
func TestParentCycleAcrossBatches(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	path := "/s/cycle2.jsonl"
	if _, err := d.Ingest(ctx, Batch{Kind: Found, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: 400, Lines: 3},
		Header:  &Header{ID: "cyc2", Version: 3, Cwd: "/"},
		Entries: cycleEntries([]string{"aaaa", "bbbb"}, []string{"xxxx", "aaaa"}, 2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Ingest(ctx, Batch{Kind: Grew, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: 500, Lines: 4},
		Entries: cycleEntries([]string{"xxxx"}, []string{"bbbb"}, 4)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p, _, err := d.SessionPath(ctx, "cyc2", "xxxx")
		if err != nil || !slices.Equal(pathIDs(p), []string{"aaaa", "bbbb", "xxxx"}) {
			t.Fatalf("SessionPath = %v %v", pathIDs(p), err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		errs, err := d.IngestErrors(ctx, "cyc2", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) == 1 {
			if errs[0].Line != 2 || !strings.Contains(errs[0].Reason, `"aaaa" (line 2) → "xxxx" (line 4) → "bbbb" (line 3) → "aaaa"`) {
				t.Errorf("error %+v", errs[0])
			}
			break
		}
		if len(errs) > 1 || time.Now().After(deadline) {
			t.Fatalf("errors %+v", errs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, tree, _, err := d.SessionTree(ctx, "cyc2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if bs := tree.Branches(); len(bs) != 1 || bs[0].Leaf != "xxxx" || bs[0].Depth != 3 {
		t.Errorf("branches %+v", bs)
	}
}

// A file written in reverse (every parent after its child, no cycle): the
// tree's branches cost one pass, and the walks agree.
func TestReversedFileTree(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	path := "/s/rev.jsonl"
	const n = 1000
	var ids, parents []string
	for i := range n {
		ids = append(ids, "e"+itoa(n-i))
		p := ""
		if n-i > 1 {
			p = "e" + itoa(n-i-1)
		}
		parents = append(parents, p)
	}
	if _, err := d.Ingest(ctx, Batch{Kind: Found, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: 1e6, Lines: n + 1},
		Header: &Header{ID: "rev", Version: 3, Cwd: "/"}, Entries: cycleEntries(ids, parents, 2)}); err != nil {
		t.Fatal(err)
	}
	_, tree, _, err := d.SessionTree(ctx, "rev", nil)
	if err != nil {
		t.Fatal(err)
	}
	if bs := tree.Branches(); len(bs) != 1 || bs[0].Leaf != "e"+itoa(n) || bs[0].Depth != n {
		t.Errorf("branches %+v", bs)
	}
	p, _, err := d.SessionPath(ctx, "rev", "e"+itoa(n))
	if err != nil || len(p) != n || p[0].ID != "e1" {
		t.Errorf("SessionPath: %d entries, %v", len(p), err)
	}
	if errs, _ := d.IngestErrors(ctx, "rev", 10); len(errs) != 0 {
		t.Errorf("errors for a file without a cycle: %+v", errs)
	}
}

// BenchmarkSessionPathCycle: a compile's walk on a session whose three
// lines are a header and two entries naming each other.
func BenchmarkSessionPathCycle(b *testing.B) {
	d := mustOpen(b)
	path := "/s/cycle.jsonl"
	if _, err := d.Ingest(b.Context(), Batch{Kind: Found, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: 300, Lines: 3},
		Header:  &Header{ID: "cyc", Version: 3, Cwd: "/"},
		Entries: cycleEntries([]string{"aaaa", "bbbb"}, []string{"bbbb", "aaaa"}, 2)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := d.SessionPath(b.Context(), "cyc", "bbbb"); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
