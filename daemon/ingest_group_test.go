package daemon

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/daemon/report/reporter"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// A first scan through the GroupSink (several files to a transaction)
// stores exactly what the scan one file at a time stores: every row of
// every table, report aggregates and events included, but the clock's.
func TestColdScanGroupedStoresWhatOneByOneDoes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 30 {
		s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(500 + i), TargetBytes: 20 << 10, Start: start.Add(time.Duration(i) * time.Minute)})
		data := s.Data
		if i == 7 {
			mid := s.Offsets[len(s.Offsets)/2]
			data = slices.Concat(data[:mid], []byte("{\"type\":\"message\",\"id\":\"brok\n"), data[mid:])
		}
		p := filepath.Join(dir, pisessiontest.FileName(start.Add(time.Duration(i)*time.Minute), s.ID))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := pisessiontest.Generate(pisessiontest.Options{Seed: 599, TargetBytes: 300 << 10, Start: start})
	if err := big.WriteFile(filepath.Join(dir, pisessiontest.FileName(start, big.ID))); err != nil {
		t.Fatal(err)
	}

	scan := func(grouped bool) (dump map[string][][]any, groups int) {
		store, err := db.Open(t.Context(), filepath.Join(t.TempDir(), "b.db"), db.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		store.SetReportAggregator(reporter.Aggregator{Prices: report.DefaultPrices()})
		in := newIngester(store, nil, nil)
		cfg := watcher.Config{Roots: []watcher.Root{{Dir: filepath.Join(root, "sessions"), Recursive: true}}, Rescan: time.Hour, MaxBatchBytes: 128 << 10}
		if grouped {
			cfg.GroupSink = func(ctx context.Context, bs []watcher.Batch) error {
				if len(bs) > 1 {
					groups++
				}
				return in.sinkGroup(ctx, bs)
			}
			cfg.Prepare = in.prepare
		}
		firstScan(t, t.Context(), watcher.New(cfg, nil), in.sink)
		raw := rawConn(t, store.Path())
		defer raw.Close()
		return dumpTables(t, raw), groups
	}
	want, _ := scan(false)
	got, groups := scan(true)
	if groups == 0 {
		t.Fatal("no group of more than one file")
	}
	for _, table := range []string{"files", "sessions", "entries", "thinking", "frontier", "ingest_errors", "events", "report_aggregates", "report_breaks"} {
		if len(want[table]) == 0 && table != "frontier" {
			t.Errorf("%s: no rows one by one", table)
		}
		if !reflect.DeepEqual(got[table], want[table]) {
			t.Errorf("%s: %d rows grouped, %d one by one, not the same", table, len(got[table]), len(want[table]))
		}
	}
}

// dumpTables reads every row of bindery's ingest tables in a fixed
// order, without the columns the clock writes.
func dumpTables(t *testing.T, raw *sql.DB) map[string][][]any {
	t.Helper()
	out := map[string][][]any{}
	for table, order := range map[string]string{"files": "id", "sessions": "file", "entries": "seq", "thinking": "entry, block",
		"frontier": "entry", "ingest_errors": "id", "events": "seq", "report_aggregates": "file", "report_breaks": "id"} {
		rows, err := raw.QueryContext(t.Context(), fmt.Sprintf("SELECT * FROM %s ORDER BY %s", table, order))
		if err != nil {
			t.Fatal(err)
		}
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
			var row []any
			for i, c := range cols {
				if c != "updated_ms" && c != "time_ms" {
					row = append(row, vals[i])
				}
			}
			out[table] = append(out[table], row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out
}
