package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/daemon/report/reporter"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// archive is a generated pi archive shared by the benchmarks of one run.
type archive struct {
	dir   string // <agent>/sessions/<project>
	agent string
	bytes int64
	files []string
}

var (
	archives     = map[string]*archive{}
	archiveRoots []string // every archive's folder, complete or not (removeArchives)
	archiveMu    sync.Mutex
)

// genArchive writes sessions files of about per bytes each (cached per run).
func genArchive(b *testing.B, sessions, per int) *archive {
	archiveMu.Lock()
	defer archiveMu.Unlock()
	key := fmt.Sprint(sessions, "x", per)
	if a := archives[key]; a != nil {
		return a
	}
	root, err := os.MkdirTemp("", "bdarch")
	if err != nil {
		b.Fatal(err)
	}
	archiveRoots = append(archiveRoots, root)
	a := &archive{agent: filepath.Join(root, "agent")}
	a.dir = filepath.Join(a.agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range sessions {
		s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(i + 1), TargetBytes: per, Start: start.Add(time.Duration(i) * time.Minute)})
		p := filepath.Join(a.dir, pisessiontest.FileName(start.Add(time.Duration(i)*time.Minute), s.ID))
		if err := s.WriteFile(p); err != nil {
			b.Fatal(err)
		}
		a.bytes += int64(len(s.Data))
		a.files = append(a.files, p)
	}
	archives[key] = a // for the whole run: TestMain removes it (removeArchives)
	return a
}

// removeArchives removes the archives the run generated (each of a 1 GB
// benchmark's is as large; left behind, runs filled the disk).
func removeArchives() {
	archiveMu.Lock()
	defer archiveMu.Unlock()
	for _, root := range archiveRoots {
		os.RemoveAll(root)
	}
	archiveRoots = nil
	clear(archives)
}

// firstScan runs w until its first full scan is done, then stops it.
func firstScan(tb testing.TB, ctx context.Context, w *watcher.Watcher, sink watcher.Sink) {
	tb.Helper()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx, sink) }()
	for w.Status().LastRescan.IsZero() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
}

// ingestAll runs the watcher over the archive into a fresh database until
// the first full scan is done, and checks every byte was ingested.
func ingestAll(b *testing.B, a *archive) { ingestArchive(b, a, false) }

// ingestArchive is ingestAll; wired, the ingest goes as wireBinding wires
// the daemon's: through the journal (its events to a hub), each committed
// batch then to the Binder's reply attribution.
func ingestArchive(b *testing.B, a *archive, wired bool) {
	dir := b.TempDir()
	store, err := db.Open(context.Background(), filepath.Join(dir, "b.db"), db.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	// As the daemon wires it (report_wire.go): ingest keeps the report's
	// aggregates.
	store.SetReportAggregator(reporter.Aggregator{Prices: report.DefaultPrices()})
	in := newIngester(store, nil, nil)
	if wired {
		hub := api.NewHub(0, nil)
		defer hub.Close()
		in.journal = &Journal{DB: store, Hub: hub}
		binder := NewBinder(in.journal, BinderConfig{})
		in.attribute = func(ctx context.Context, batch db.Batch, ing db.Ingested) error {
			err := binder.Ingested(ctx, batch, ing)
			if err != nil {
				b.Errorf("attribute %s: %v", batch.Path, err)
			}
			return err
		}
	}
	firstScan(b, context.Background(), watcher.New(watcher.Config{Roots: []watcher.Root{{Dir: filepath.Join(a.agent, "sessions"), Recursive: true}}, Rescan: time.Hour, GroupSink: in.sinkGroup, Prepare: in.prepare}, nil), in.sink)
	if got := in.done.Load(); got != a.bytes {
		b.Fatalf("ingested %d bytes of %d", got, a.bytes)
	}
}

// validAll is the floor of any pass that reads every byte: read each file
// and json.Valid each line.
func validAll(b *testing.B, a *archive) {
	buf := make([]byte, 0, 1<<20)
	for _, p := range a.files {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(buf, 64<<20)
		for sc.Scan() {
			if !json.Valid(sc.Bytes()) {
				b.Fatalf("%s: invalid line", p)
			}
		}
		f.Close()
	}
}

// BenchmarkColdIngest: a ~100 MB archive (100 sessions of ~1 MB) through
// the real watcher and SQLite (synchronous=FULL), against json.Valid over
// the same files in the same run. Compare the MB/s of the two.
func BenchmarkColdIngest(b *testing.B) {
	a := genArchive(b, 100, 1<<20)
	b.Run("watcher+db", func(b *testing.B) {
		b.SetBytes(a.bytes)
		for b.Loop() {
			ingestAll(b, a)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(a.bytes)
		for b.Loop() {
			validAll(b, a)
		}
	})
}

// BenchmarkColdIngestRatio is BenchmarkColdIngest with the two passes
// alternated inside each iteration, so both see the same machine load (it
// is shared and noisy), reporting the ratio of their times: ingest time /
// json.Valid time over the same archive.
func BenchmarkColdIngestRatio(b *testing.B) { coldIngestRatio(b, false) }

// BenchmarkColdIngestWired is BenchmarkColdIngestRatio with the ingest
// wired as the daemon wires it (ingestArchive): the journal and the
// reply attribution each batch then goes through.
func BenchmarkColdIngestWired(b *testing.B) { coldIngestRatio(b, true) }

// BINDERY_BENCH_SESSIONS sets the archive's size in ~1 MB sessions, as
// for BenchmarkColdReport (default 100; 1000 is the issue's ~1 GB).
func coldIngestRatio(b *testing.B, wired bool) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("BINDERY_BENCH_SESSIONS")); err == nil && v > 0 {
		n = v
	}
	a := genArchive(b, n, 1<<20)
	var ingestT, validT time.Duration
	for b.Loop() {
		t0 := time.Now()
		ingestArchive(b, a, wired)
		t1 := time.Now()
		validAll(b, a)
		ingestT += t1.Sub(t0)
		validT += time.Since(t1)
	}
	mb := float64(a.bytes) / 1e6
	b.ReportMetric(mb/(ingestT.Seconds()/float64(b.N)), "ingest-MB/s")
	b.ReportMetric(mb/(validT.Seconds()/float64(b.N)), "valid-MB/s")
	b.ReportMetric(ingestT.Seconds()/validT.Seconds(), "ingest/valid")
}

// BenchmarkAppendLatency: the time from appending one line to a session
// file until GET /v1/sessions/{id} shows it, through a daemon running in
// this process (fsnotify, watcher, SQLite commit, HTTP over the socket).
// Run with -benchtime=1000x for 1,000 appends; p50 and p99 are reported.
func BenchmarkAppendLatency(b *testing.B) {
	e := newTestEnv(b)
	long := pisessiontest.Generate(pisessiontest.Options{Seed: 42, Turns: 400, Plain: true})
	path := filepath.Join(e.sessions, pisessiontest.FileName(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), long.ID))
	const initial = 5
	if err := os.WriteFile(path, long.Data[:long.Offsets[initial]], 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := e.config(b)
	cfg.Rescan = time.Minute // fsnotify only, no rescan help
	// The progress hook runs right after each batch's commit: it splits
	// the latency into append-to-commit and commit-to-visible.
	var committed atomic.Int64
	cfg.Progress = func(Progress) { committed.Store(time.Now().UnixNano()) }
	if os.Getenv("BENCH_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	start(b, cfg)
	c := api.NewClient(e.sock)
	defer c.Close()
	ctx := context.Background()
	entries := func() int {
		s, err := c.Session(ctx, long.ID)
		if err != nil {
			return -1
		}
		return s.Entries
	}
	for entries() != initial-1 {
		time.Sleep(time.Millisecond)
	}
	lines := long.Lines
	if b.N > len(lines)-initial-1 {
		b.Fatalf("the generated session has %d lines; run with -benchtime=%dx at most", len(lines), len(lines)-initial-1)
	}
	lat := make([]time.Duration, 0, b.N)
	toCommit := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		n := initial + i
		line := long.Data[long.Offsets[n]:long.Offsets[n+1]]
		t0 := time.Now()
		if err := pisessiontest.AppendLine(path, line); err != nil {
			b.Fatal(err)
		}
		// Poll at most every 250µs: a tighter loop would take the CPU the
		// daemon needs on a 2-core machine and measure itself.
		for entries() != n {
			time.Sleep(250 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
		toCommit = append(toCommit, time.Duration(committed.Load()-t0.UnixNano()))
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(toCommit)
	b.ReportMetric(float64(toCommit[len(toCommit)/2].Microseconds()), "commit-p50-µs")
	b.ReportMetric(float64(toCommit[len(toCommit)*99/100].Microseconds()), "commit-p99-µs")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkIngestMemory ingests 1,000 sessions at two archive sizes and
// reports the Go heap in use afterwards (after a GC) and the process's
// peak RSS: the heap must not grow with the archive, only the database.
func BenchmarkIngestMemory(b *testing.B) {
	for _, per := range []int{50 << 10, 250 << 10} {
		a := genArchive(b, 1000, per)
		b.Run(fmt.Sprintf("sessions=1000/archive=%dMB", a.bytes>>20), func(b *testing.B) {
			b.SetBytes(a.bytes)
			var ms runtime.MemStats
			for b.Loop() {
				ingestAll(b, a)
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-inuse-MB")
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
		})
	}
}

// peakRSS is VmHWM from /proc/self/status, in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			var kb int64
			fmt.Sscan(string(rest), &kb)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkGetSession: GET /v1/sessions/{id} over the socket for one
// session of about 1,000 and 10,000 entries (the tree is derived per call).
func BenchmarkGetSession(b *testing.B) {
	for _, turns := range []int{100, 1000} {
		s := pisessiontest.Generate(pisessiontest.Options{Seed: 9, Turns: turns})
		b.Run(fmt.Sprintf("entries=%d", len(s.Lines)-1), func(b *testing.B) {
			e := newTestEnv(b)
			if err := s.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), s.ID))); err != nil {
				b.Fatal(err)
			}
			start(b, e.config(b))
			c := api.NewClient(e.sock)
			defer c.Close()
			for {
				d, err := c.Session(context.Background(), s.ID)
				if err == nil && d.Entries == len(s.Lines)-1 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			for b.Loop() {
				if _, err := c.Session(context.Background(), s.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
