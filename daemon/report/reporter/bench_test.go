package reporter

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/my-pi/bindery/daemon/report"
)

func lensFor(rng *rand.Rand) []int {
	lens := make([]int, 3+rng.IntN(8))
	for i := range lens {
		if rng.IntN(5) == 0 {
			lens[i] = 17 + rng.IntN(20)
		} else {
			lens[i] = 1 + rng.IntN(6)
		}
	}
	return lens
}

// BenchmarkArchive measures GET /v1/report's work over a real SQLite
// index of 1,000 sessions: from cold (no cached summary) reading the
// aggregates ingest kept, and the same with no aggregate either (every
// session's rows read and analysed: the report before aggregates, and a
// database from before schema version 7 on its first report); then again
// after 10 sessions are added (1,000 summaries cached), then with nothing
// new (the fixed cost of listing sessions and merging summaries).
func BenchmarkArchive(b *testing.B) {
	ctx := context.Background()
	d := openDB(b)
	d.SetReportAggregator(Aggregator{Prices: report.DefaultPrices()})
	// A second connection to the same file forgets the cached summaries
	// (bindery itself never does: db exposes no such write).
	raw, err := sql.Open("sqlite", d.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 1000 {
		ingestSession(b, d, fmt.Sprintf("s%05d", i), lensFor(rng))
	}
	exec := func(q string) {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	clear := func() { exec(`DELETE FROM report_summaries`) }
	b.Run("cold-1000", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			clear()
			r := New(d, nil, nil, nil)
			b.StartTimer()
			if _, st, err := r.Archive(ctx); err != nil || st.Analysed != 1000 || st.Scanned != 0 {
				b.Fatalf("%+v %v", st, err)
			}
		}
	})
	b.Run("cold-1000-scan", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			clear()
			exec(`DELETE FROM report_aggregates`)
			r := New(d, nil, nil, nil)
			b.StartTimer()
			if _, st, err := r.Archive(ctx); err != nil || st.Analysed != 1000 || st.Scanned != 1000 {
				b.Fatalf("%+v %v", st, err)
			}
		}
	})
	clear()
	r := New(d, nil, nil, nil)
	if _, _, err := r.Archive(ctx); err != nil {
		b.Fatal(err)
	}
	next := 1000
	b.Run("plus-10", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			for range 10 {
				ingestSession(b, d, fmt.Sprintf("s%05d", next), lensFor(rng))
				next++
			}
			b.StartTimer()
			if _, st, err := r.Archive(ctx); err != nil || st.Analysed != 10 {
				b.Fatalf("%+v %v", st, err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			if _, st, err := r.Archive(ctx); err != nil || st.Analysed != 0 {
				b.Fatalf("%+v %v", st, err)
			}
		}
	})
}
