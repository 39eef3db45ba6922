package reporter

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

const piFile = `{"type":"session","version":3,"id":"s-cost","timestamp":"2026-11-01T10:00:00.000Z","cwd":"/w"}
{"type":"message","id":"u1","parentId":null,"timestamp":"2026-11-01T10:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}
{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-11-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-5-5","usage":{"input":3,"output":120,"cacheRead":20500,"cacheWrite":310,"totalTokens":20933,"cost":{"input":0.00001,"output":0.003,"cacheRead":0.0102,"cacheWrite":0.0019,"total":0.01521}},"stopReason":"stop","timestamp":2}}
{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-11-01T10:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-5-5","usage":{"input":1,"output":10,"cacheRead":20830,"cacheWrite":20,"cost":{"input":0.000005,"output":0.00025,"cacheRead":0.0104,"cacheWrite":0.0001,"total":0.010755}},"stopReason":"stop","timestamp":3}}
`

// parseFile parses a session file as the watcher does, then keeps only
// cost.total, as the index does.
func parseFile(t *testing.T, data []byte) []watcher.Entry {
	t.Helper()
	p := watcher.NewParser("x")
	var out []watcher.Entry
	off := int64(0)
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if got := p.Line(line, off); got.Entry != nil {
			e := *got.Entry
			if e.Usage != nil && e.Usage.Cost != nil {
				e.Usage.Cost = &watcher.Cost{Total: e.Usage.Cost.Total}
			}
			out = append(out, e)
		}
		off += int64(len(line))
	}
	return out
}

func TestCostsFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(piFile), 0o644); err != nil {
		t.Fatal(err)
	}
	entries := parseFile(t, []byte(piFile))
	if len(entries) != 3 || entries[1].Usage.Cost.CacheWrite != nil {
		t.Fatalf("entries %+v", entries)
	}
	if err := CostsFromFile(path, 3, entries); err != nil {
		t.Fatal(err)
	}
	c := entries[1].Usage.Cost
	if c.Input == nil || *c.Input != 0.00001 || *c.Output != 0.003 || *c.CacheRead != 0.0102 || *c.CacheWrite != 0.0019 {
		t.Errorf("a1 cost = %+v", c)
	}
	if c := entries[2].Usage.Cost; c.CacheWrite == nil || *c.CacheWrite != 0.0001 {
		t.Errorf("a2 cost = %+v", c)
	}

	// Rewritten with other content at the same offsets: totals kept.
	other := bytes.Replace([]byte(piFile), []byte(`"id":"a1"`), []byte(`"id":"b1"`), 1)
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	entries = parseFile(t, []byte(piFile))
	if err := CostsFromFile(path, 3, entries); err != nil {
		t.Fatal(err)
	}
	if entries[1].Usage.Cost.CacheWrite != nil || *entries[1].Usage.Cost.Total != 0.01521 {
		t.Errorf("a1 from a rewritten file = %+v", entries[1].Usage.Cost)
	}
	if entries[2].Usage.Cost.CacheWrite == nil {
		t.Errorf("a2, unchanged, lost its split")
	}
	// Truncated: nothing more read, no error.
	if err := os.WriteFile(path, []byte(piFile)[:200], 0o644); err != nil {
		t.Fatal(err)
	}
	entries = parseFile(t, []byte(piFile))
	if err := CostsFromFile(path, 3, entries); err != nil || entries[1].Usage.Cost.CacheWrite != nil {
		t.Errorf("truncated: %v %+v", err, entries[1].Usage.Cost)
	}
	// Gone: an error, totals kept.
	os.Remove(path)
	if err := CostsFromFile(path, 3, entries); err == nil {
		t.Error("missing file: no error")
	}
}

// Rows ingested with schema version 4 carry pi's cost split: the report
// takes it from the index and never reads those lines back, so a file
// changed since (here a1's cacheWrite, same length) does not override it.
func TestCostSplitFromTheIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(piFile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := watcher.NewParser(path)
	var rows []db.Entry
	off := int64(0)
	for _, line := range bytes.SplitAfter([]byte(piFile), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if got := p.Line(line, off); got.Entry != nil {
			e := got.Entry
			row := db.Entry{Line: e.Line, Offset: e.Offset, Length: e.Length, Type: e.Type, ID: e.ID, ParentID: e.ParentID, Role: e.Role, Model: e.Model}
			if u := e.Usage; u != nil {
				row.Usage = db.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, TotalTokens: u.TotalTokens,
					CostTotal: u.Cost.Total, CostInput: u.Cost.Input, CostOutput: u.Cost.Output, CostCacheRead: u.Cost.CacheRead, CostCacheWrite: u.Cost.CacheWrite}
			}
			rows = append(rows, row)
		}
		off += int64(len(line))
	}
	d := openDB(t)
	res, err := d.Ingest(t.Context(), db.Batch{Kind: db.Found, Path: path, Cursor: db.Cursor{Path: path, Dev: 1, Ino: 1, Offset: off, Lines: 4},
		Header: &db.Header{ID: "s-cost", Version: 3, Cwd: "/w"}, Entries: rows})
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace([]byte(piFile), []byte(`"cacheWrite":0.0019`), []byte(`"cacheWrite":0.0091`), 1)
	if len(changed) != len(piFile) || bytes.Equal(changed, []byte(piFile)) {
		t.Fatal("the changed file must differ with the same length")
	}
	if err := os.WriteFile(path, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	stored, err := d.ReportEntries(t.Context(), res.File)
	if err != nil {
		t.Fatal(err)
	}
	entries := Entries(stored)
	if slices.ContainsFunc(entries, costSplitMissing) {
		t.Fatalf("rows ingested with the split still need the file: %+v", entries)
	}
	if err := CostsFromFile(path, 3, entries); err != nil {
		t.Fatal(err)
	}
	c := entries[1].Usage.Cost
	if c == nil || c.Input == nil || *c.Input != 0.00001 || *c.Output != 0.003 || *c.CacheRead != 0.0102 || *c.CacheWrite != 0.0019 || *c.Total != 0.01521 {
		t.Errorf("a1 cost = %+v", c)
	}
	if c := entries[2].Usage.Cost; c == nil || c.CacheWrite == nil || *c.CacheWrite != 0.0001 {
		t.Errorf("a2 cost = %+v", c)
	}
	if entries[0].Usage != nil {
		t.Errorf("the user entry got usage %+v", entries[0].Usage)
	}
}
