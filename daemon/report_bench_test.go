package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/daemon/report/reporter"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// BenchmarkColdReport: `bindery report` with no cached summary (right
// after install, or after the summary format changed) over a generated
// pi archive ingested through the real watcher into SQLite, as the daemon
// wires it. aggregates reads the aggregates ingest kept; full-scan forgets
// them too, so every session's rows are read and analysed (the report
// before aggregates, and an upgraded database's first report): the two
// in one run are the ratio. BINDERY_BENCH_SESSIONS sets the archive's size
// in ~1 MB sessions (default 100; 1000 is the issue's ~1 GB archive).
func BenchmarkColdReport(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("BINDERY_BENCH_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	a := genArchive(b, n, 1<<20)
	ctx := context.Background()
	store, err := db.Open(ctx, filepath.Join(b.TempDir(), "b.db"), db.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	prices := report.DefaultPrices()
	store.SetReportAggregator(reporter.Aggregator{Prices: prices})
	in := newIngester(store, nil, nil)
	firstScan(b, ctx, watcher.New(watcher.Config{Roots: []watcher.Root{{Dir: filepath.Join(a.agent, "sessions"), Recursive: true}}, Rescan: time.Hour, GroupSink: in.sinkGroup}, nil), in.sink)
	raw := rawConn(b, store.Path())
	defer raw.Close()
	exec := func(q string) {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, forget string, scanned int) {
		for b.Loop() {
			b.StopTimer()
			exec(forget)
			r := reporter.New(store, prices, nil, nil)
			b.StartTimer()
			_, st, err := r.Archive(ctx)
			if err != nil || st.Sessions != n || st.Scanned != scanned {
				b.Fatalf("%+v %v", st, err)
			}
		}
	}
	b.Run("aggregates", func(b *testing.B) { run(b, `DELETE FROM report_summaries`, 0) })
	b.Run("full-scan", func(b *testing.B) { run(b, `DELETE FROM report_summaries; DELETE FROM report_aggregates`, n) })
}
