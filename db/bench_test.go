package db

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommit: one small batch (an assistant entry with a thinking
// block, its cursor and its event) per transaction, as a live append is
// committed. Both are synced commits (DB.write and DB.Write both commit
// Synced): "ingest" goes through DB.Ingest, the watcher's path (with its
// fallback to one row per INSERT); "durable" writes the same rows inside
// a DB.Write transaction, the path of every binding write. p50/p99 are
// per commit.
func BenchmarkCommit(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "ingest"
		if durable {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) {
			d, err := Open(b.Context(), filepath.Join(b.TempDir(), "c.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			path := "/p/s.jsonl"
			if _, err := d.Ingest(b.Context(), Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, 100, 1), Header: &Header{ID: "s", Version: 3}}); err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			line := 1
			for b.Loop() {
				line++
				e := assistant(line, fmt.Sprint("e", line), fmt.Sprint("e", line-1), signed(0, fmt.Sprint(line)))
				batch := Batch{Kind: Grew, Path: path, Cursor: cursor(path, 1, int64(100*line), line), Entries: []Entry{e}}
				t0 := time.Now()
				if durable {
					err = d.Write(b.Context(), func(ctx context.Context, tx *Tx) error {
						_, err := d.ingestTx(ctx, tx.tx, batch, rowsPerInsert)
						return err
					})
				} else {
					_, err = d.Ingest(b.Context(), batch)
				}
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkIngestRows: a first scan's batch of 4,000 pi-shaped entries
// (user turns, assistant replies with usage and a signed thinking block,
// tool results) into a fresh file, per entry: the rows' share of a cold
// ingest.
func BenchmarkIngestRows(b *testing.B) {
	d, err := Open(b.Context(), filepath.Join(b.TempDir(), "r.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const n = 4000
	entries := make([]Entry, 0, n)
	parent := ""
	for i := 0; len(entries) < n; i++ {
		line := len(entries) + 2
		id := fmt.Sprintf("%08x", i)
		var e Entry
		switch {
		case i%10 == 0:
			e = entry(line, id, parent, "message")
			e.Role, e.UserText = "user", true
		case i%2 == 1:
			e = assistant(line, id, parent, signed(0, id))
			e.Usage.CacheWrite, e.Usage.TotalTokens = i64(200), i64(1230)
			e.Usage.CostTotal, e.Usage.CostInput, e.Usage.CostOutput, e.Usage.CostCacheRead, e.Usage.CostCacheWrite = f64(0.01), f64(0.001), f64(0.002), f64(0.003), f64(0.004)
		default:
			e = entry(line, id, parent, "message")
			e.Role = "toolResult"
		}
		parent = id
		entries = append(entries, e)
	}
	k := 0
	for b.Loop() {
		k++
		path := fmt.Sprintf("/p/s%d.jsonl", k)
		if _, err := d.Ingest(b.Context(), Batch{Kind: Found, Path: path, Cursor: cursor(path, uint64(k), int64(100*n), n+1),
			Header: &Header{ID: fmt.Sprint("s", k), Version: 3}, Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
