package daemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/daemon/report/reporter"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// aggEnv is a session folder watched by the real watcher into a real
// database, with a raw connection to the same file that forgets the
// report's summary cache (bindery itself never does).
type aggEnv struct {
	t      *testing.T
	dir    string
	store  *db.DB
	raw    *sql.DB
	prices *report.Prices
	stop   func()
}

func newAggEnv(t *testing.T, aggregate bool) *aggEnv {
	root := t.TempDir()
	e := &aggEnv{t: t, dir: filepath.Join(root, "sessions", pisessiontest.ProjectDir("/home/dev/src/app")), prices: report.DefaultPrices()}
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := db.Open(t.Context(), filepath.Join(root, "b.db"), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	if aggregate {
		store.SetReportAggregator(reporter.Aggregator{Prices: e.prices})
	}
	e.raw = rawConn(t, store.Path())
	raw := e.raw
	in := newIngester(store, nil, nil)
	w := watcher.New(watcher.Config{Roots: []watcher.Root{{Dir: filepath.Join(root, "sessions"), Recursive: true}}, Rescan: 20 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, in.sink) }()
	e.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		e.stop()
		raw.Close()
		store.Close()
	})
	return e
}

// rawConn is a second connection to the database file, for a test's own
// writes. It waits for the daemon's writer as the daemon's connections do
// (busy_timeout): without it, a write that meets an ingest in progress
// fails at once with SQLITE_BUSY.
func rawConn(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// caughtUp waits until every file in the folder is ingested to its end
// and no removed file is still live.
func (e *aggEnv) caughtUp() {
	e.t.Helper()
	waitFor(e.t, "ingest to catch up", func() (bool, string) {
		cs, err := e.store.Cursors(e.t.Context())
		if err != nil {
			return false, err.Error()
		}
		live := map[string]int64{}
		for _, c := range cs {
			live[c.Path] = c.Offset
		}
		files, _ := filepath.Glob(filepath.Join(e.dir, "*.jsonl"))
		if len(live) != len(files) {
			return false, fmt.Sprintf("%d live cursors, %d files", len(live), len(files))
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				return false, err.Error()
			}
			if off, ok := live[f]; !ok || off != fi.Size() {
				return false, fmt.Sprintf("%s at %d of %d", filepath.Base(f), off, fi.Size())
			}
		}
		return true, ""
	})
}

// oldWay is the archive report as bindery made it before aggregates: every
// session's entries read and analysed in full.
func (e *aggEnv) oldWay() api.Report {
	e.t.Helper()
	ctx := e.t.Context()
	sessions, err := e.store.ReportSessions(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var sums []report.Summary
	for _, s := range sessions {
		rows, err := e.store.ReportEntries(ctx, s.File)
		if err != nil {
			e.t.Fatal(err)
		}
		entries := reporter.Entries(rows)
		if !s.Removed {
			// What the report reads back for rows older schemas kept short
			// (none here: every row is this release's).
			reporter.CostsFromFile(s.Path, s.Version, entries)
			reporter.Pi16FromFile(s.Path, s.Version, entries)
		}
		compiles, err := reporter.EventLog{DB: e.store}.Compiles(ctx, s.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		sums = append(sums, report.Analyze(report.SessionInput{Session: s.ID, Entries: entries, Compiles: compiles}, e.prices).Summary)
	}
	rep := report.ArchiveReport(sums, e.prices)
	for _, s := range sessions {
		if !s.Removed {
			rep.Latest = s.ID
			break
		}
	}
	return rep
}

// cold is `bindery report` with no cached summary (a new reporter, the
// summary cache emptied).
func (e *aggEnv) cold() (api.Report, reporter.Stats) {
	e.t.Helper()
	if _, err := e.raw.Exec(`DELETE FROM report_summaries`); err != nil {
		e.t.Fatal(err)
	}
	rep, st, err := reporter.New(e.store, e.prices, nil, nil).Archive(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return rep, st
}

// agree checks the cold report against the old way, exactly (its JSON),
// and returns its stats.
func (e *aggEnv) agree(phase string) reporter.Stats {
	e.t.Helper()
	rep, st := e.cold()
	got, _ := json.Marshal(rep)
	want, _ := json.Marshal(e.oldWay())
	if string(got) != string(want) {
		e.t.Fatalf("%s: the report from aggregates differs from the full analysis:\n got %s\nwant %s", phase, got, want)
	}
	if rep.Figures.Sessions != st.Sessions || st.Sessions == 0 || rep.Figures.Requests.Total == 0 {
		e.t.Fatalf("%s: %d sessions in the figures, %+v", phase, rep.Figures.Sessions, st)
	}
	return st
}

// compileOn records compile events for some replies of a generated
// session, as bindery's compile does (branch: the entry the request was
// built on), with each cache cause.
func (e *aggEnv) compileOn(s *pisessiontest.Session, rng *rand.Rand) int {
	e.t.Helper()
	n := 0
	err := e.store.Write(e.t.Context(), func(ctx context.Context, tx *db.Tx) error {
		for _, l := range s.Lines {
			if l.Role != "assistant" || l.ParentID == "" || rng.IntN(3) != 0 {
				continue
			}
			cause := []string{"host", "bindery", "none"}[rng.IntN(3)]
			f := fmt.Sprintf(`{"compileId":"c%d","branch":%q,"binds":true,"strips":[{"path":"messages.1.content.0","reason":"prefix-changed","tokens":%d}],"cache":{"cause":%q}}`,
				n, l.ParentID, 10+rng.IntN(90), cause)
			if _, err := tx.AppendEvent(ctx, "compile", s.ID, json.RawMessage(f)); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// genSessions makes pi-shaped sessions: compactions, branches, custom
// entries, pi 1.6's entries, a v1 file, a plain one.
func genSessions(n int) []*pisessiontest.Session {
	var out []*pisessiontest.Session
	for i := range n {
		o := pisessiontest.Options{Seed: uint64(100 + i), Turns: 8 + i%7, Start: time.Date(2026, 3, 1, 10, i, 0, 0, time.UTC)}
		switch i % 4 {
		case 0:
			o.Pi16 = true
		case 1:
			o.Plain = true
		case 2:
			if i%8 == 2 {
				o.Version = 1
			}
		}
		out = append(out, pisessiontest.Generate(o))
	}
	return out
}

func countType(s *pisessiontest.Session, from int, typ string) int {
	n := 0
	for _, l := range s.Lines[from:] {
		if l.Type == typ {
			n++
		}
	}
	return n
}

// A cold report from the aggregates ingest keeps gives exactly the report
// a full analysis of every session gives, and reads no session's entries:
// after the first scan, after appends (compactions and replies to older
// entries among them), with compile events, after a file is rewritten and
// after one is removed.
func TestReportFromAggregatesMatchesFullAnalysis(t *testing.T) {
	e := newAggEnv(t, true)
	rng := rand.New(rand.NewPCG(3, 4))
	sessions := genSessions(12)
	paths := make([]string, len(sessions))
	cuts := make([]int, len(sessions))
	for i, s := range sessions {
		paths[i] = filepath.Join(e.dir, pisessiontest.FileName(time.Date(2026, 3, 1, 10, i, 0, 0, time.UTC), s.ID))
		cuts[i] = len(s.Offsets) * (30 + rng.IntN(40)) / 100
		if err := os.WriteFile(paths[i], s.Data[:s.Offsets[cuts[i]]], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.caughtUp()
	if st := e.agree("first scan"); st.Scanned != 0 || st.Analysed != len(sessions) {
		t.Errorf("first scan: %+v, want every session from its aggregate", st)
	}

	compactions, moved := 0, 0
	for i, s := range sessions {
		compactions += countType(s, cuts[i], "compaction")
		for j := max(cuts[i], 2); j < len(s.Lines); j++ {
			if l := s.Lines[j]; l.ParentID != "" && s.Lines[j-1].ID != l.ParentID {
				moved++ // a reply to an older entry: the branch moves
			}
		}
		// Appended in a few pieces, each its own batch.
		for at := cuts[i]; at < len(s.Offsets); {
			end := min(len(s.Offsets), at+1+rng.IntN(12))
			stop := len(s.Data)
			if end < len(s.Offsets) {
				stop = s.Offsets[end]
			}
			if err := pisessiontest.AppendLine(paths[i], s.Data[s.Offsets[at]:stop]); err != nil {
				t.Fatal(err)
			}
			at = end
		}
	}
	if compactions == 0 || moved == 0 {
		t.Fatalf("the appends hold %d compactions and %d replies to older entries: generate others", compactions, moved)
	}
	e.caughtUp()
	if st := e.agree("after appends"); st.Scanned != 0 {
		t.Errorf("after appends: %+v, want no session scanned", st)
	}

	compiles := 0
	for _, s := range sessions {
		compiles += e.compileOn(s, rng)
	}
	if compiles == 0 {
		t.Fatal("no compile events")
	}
	rep, st := e.cold()
	if st.Scanned != 0 || rep.Figures.Bindery.Compiles != compiles {
		t.Errorf("with compiles: %+v, %d compiles counted of %d", st, rep.Figures.Bindery.Compiles, compiles)
	}
	e.agree("with compile events")

	// A rewrite: another session's bytes under the first file's name.
	other := pisessiontest.Generate(pisessiontest.Options{Seed: 999, Turns: 5, Pi16: true})
	if err := pisessiontest.RewriteInPlace(paths[0], other.Data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rewrite to be ingested", func() (bool, string) {
		_, err := e.store.Session(t.Context(), other.ID)
		return err == nil, fmt.Sprint(err)
	})
	e.caughtUp()
	if st := e.agree("after a rewrite"); st.Scanned != 0 {
		t.Errorf("after a rewrite: %+v", st)
	}

	// A removed file still counts (its rows are kept).
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	e.caughtUp()
	if st := e.agree("after a removal"); st.Scanned != 0 || st.Sessions != len(sessions) {
		t.Errorf("after a removal: %+v", st)
	}
}

// A database whose sessions were ingested before report aggregates existed
// (schema version 6: the rows are the same, no aggregate) reports right:
// the first report analyses every session and stores its aggregate, the
// next cold one reads aggregates, and ingest keeps them current after.
func TestReportAggregatesForEarlierSessions(t *testing.T) {
	e := newAggEnv(t, false)
	sessions := genSessions(6)
	paths := make([]string, len(sessions))
	for i, s := range sessions {
		paths[i] = filepath.Join(e.dir, pisessiontest.FileName(time.Date(2026, 3, 1, 10, i, 0, 0, time.UTC), s.ID))
		if err := os.WriteFile(paths[i], s.Data[:s.Offsets[len(s.Offsets)/2]], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.caughtUp()
	var n int
	if err := e.raw.QueryRow(`SELECT count(*) FROM report_aggregates`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("aggregates without an aggregator: %d %v", n, err)
	}
	e.store.SetReportAggregator(reporter.Aggregator{Prices: e.prices})
	if st := e.agree("the first report"); st.Scanned != len(sessions) {
		t.Errorf("first report: %+v, want every session analysed", st)
	}
	if st := e.agree("the next cold report"); st.Scanned != 0 {
		t.Errorf("next cold report: %+v, want none scanned", st)
	}
	for i, s := range sessions {
		if err := pisessiontest.AppendLine(paths[i], s.Data[s.Offsets[len(s.Offsets)/2]:]); err != nil {
			t.Fatal(err)
		}
	}
	e.caughtUp()
	st := e.agree("after appends")
	if st.Scanned == len(sessions) {
		t.Errorf("after appends: %+v, ingest kept no aggregate current", st)
	}
}

// The aggregates a report reads are a few KB a session; the branch's ids
// are in the walk, which a report does not read.
func TestReportAggregateRows(t *testing.T) {
	e := newAggEnv(t, true)
	s := genSessions(1)[0]
	p := filepath.Join(e.dir, pisessiontest.FileName(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), s.ID))
	if err := s.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	e.caughtUp()
	var sums, walk string
	if err := e.raw.QueryRow(`SELECT sums, walk FROM report_aggregates`).Scan(&sums, &walk); err != nil {
		t.Fatal(err)
	}
	root := s.Lines[1].ID // the first entry, the branch's root
	if root == "" || !strings.Contains(walk, "\n"+root+"\n") || strings.Contains(sums, root) || len(sums) > 16<<10 || len(walk) > 64*len(s.Lines) {
		t.Errorf("sums %d bytes, walk %d bytes for %d lines; the walk holds the root %q: %v", len(sums), len(walk), len(s.Lines), root, strings.Contains(walk, root))
	}
}
