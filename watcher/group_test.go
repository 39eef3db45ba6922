package watcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// coldArchive writes a first scan's mix into root: small sessions, one
// larger than a batch, one with a malformed line, an empty file, a file
// with no complete line and a FIFO, and returns the small sessions (the
// malformed one included) by path.
func coldArchive(t *testing.T, root string, small int) (sessions map[string]*pisessiontest.Session, big string, bigSess *pisessiontest.Session, bad, fifo string) {
	t.Helper()
	sessions = map[string]*pisessiontest.Session{}
	for i := range small {
		sess := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(3000 + i), Turns: 1 + i%3, Plain: true, ToolResultBytes: 200})
		sessions[writeSession(t, filepath.Join(root, fmt.Sprintf("--p%d--", i%3)), sess)] = sess
	}
	bigSess = pisessiontest.Generate(pisessiontest.Options{Seed: 3999, TargetBytes: 400 << 10})
	big = writeSession(t, filepath.Join(root, "--p1--"), bigSess)
	dir := filepath.Join(root, "--p0--")
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 3998, Turns: 3})
	mid := sess.Offsets[len(sess.Offsets)/2]
	bad = filepath.Join(dir, "m-bad.jsonl")
	if err := os.WriteFile(bad, slices.Concat(sess.Data[:mid], []byte("{\"type\":\"message\",\"id\":\"brok\n"), sess.Data[mid:]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "e-empty.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p-partial.jsonl"), []byte(`{"type":"session","id":"x"`), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo = filepath.Join(dir, "f-fifo.jsonl")
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	return sessions, big, bigSess, bad, fifo
}

// firstScan runs a watcher over root until its first rescan is over.
func firstScan(t *testing.T, cfg Config, s *store, hook func(*Watcher)) *running {
	t.Helper()
	r := start(t, cfg, nil, s, hook)
	deadline := time.Now().Add(20 * time.Second)
	for r.w.Status().LastRescan.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("first rescan did not end")
		}
		time.Sleep(time.Millisecond)
	}
	return r
}

// A first scan hands the new files that fit a batch to the GroupSink in
// groups of at most MaxBatchBytes (in path order, each file once); what
// does not fit or is not a session file goes the ordinary way. Each
// grouped file's cursor is where the watcher goes on from: a rescan
// offers nothing again, an append is one Grew batch.
func TestColdScanGroups(t *testing.T) {
	_, root := sessionsRoot(t)
	sessions, big, bigSess, bad, fifo := coldArchive(t, root, 40)
	const maxBatch = 128 << 10
	s := newStore()
	r := firstScan(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: maxBatch, Rescan: time.Hour}, s, nil)

	for p, sess := range sessions {
		if !s.entriesMatch(p, sess) {
			t.Fatalf("%s not ingested exactly", p)
		}
		if got := s.kinds(p); !slices.Equal(got, []BatchKind{Found}) {
			t.Errorf("%s: batches %v, want one Found", p, got)
		}
	}
	if !s.entriesMatch(big, bigSess) {
		t.Errorf("the file larger than a batch was not ingested exactly")
	}
	if f, ok := s.file(bad); !ok || len(s.errs) != 1 || s.errs[0].Path != bad || f.cursor.Offset == 0 {
		t.Errorf("the malformed line: errors %+v", s.errs)
	}
	waitProblem(t, r.w, fifo, NotRegular)

	s.mu.Lock()
	groups := slices.Clone(s.groups)
	batches := slices.Clone(s.batches)
	s.mu.Unlock()
	grouped := map[string]bool{}
	multi := false
	var prev string
	for _, g := range groups {
		var bytes int64
		for _, b := range g {
			if grouped[b.Path] || b.Path <= prev {
				t.Fatalf("%s grouped twice or out of order (after %s)", b.Path, prev)
			}
			grouped[b.Path], prev = true, b.Path
			bytes += b.Cursor.Offset
			if b.Kind != Found {
				t.Errorf("%s: a %s batch in a group", b.Path, b.Kind)
			}
		}
		if len(g) > 1 && bytes > maxBatch {
			t.Errorf("a group of %d files holds %d bytes, more than a batch", len(g), bytes)
		}
		multi = multi || len(g) > 1
	}
	if !multi {
		t.Errorf("no group holds more than one file: %d groups", len(groups))
	}
	for p := range sessions {
		if !grouped[p] {
			t.Errorf("%s fits a batch and was not grouped", p)
		}
	}
	if grouped[big] {
		t.Errorf("the file larger than a batch was grouped")
	}
	if !grouped[bad] {
		t.Errorf("the file with a malformed line was not grouped")
	}

	// Another rescan finds every grouped file up to date.
	before := r.w.Status().LastRescan
	r.w.mu.Lock()
	r.w.rescanNow = true
	r.w.mu.Unlock()
	r.w.signal()
	for deadline := time.Now().Add(10 * time.Second); r.w.Status().LastRescan == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second rescan did not end")
		}
	}
	s.mu.Lock()
	again := s.batches[len(batches):]
	s.mu.Unlock()
	if len(again) != 0 {
		t.Fatalf("a rescan offered %d batches again, first %s %s", len(again), again[0].Kind, again[0].Path)
	}

	// An append to a grouped file: one Grew batch of the new line.
	var p string
	for p = range sessions {
		break
	}
	line := pisessiontest.UserLine("feed0001", sessions[p].Lines[len(sessions[p].Lines)-1].ID, "more", time.Now())
	if err := pisessiontest.AppendLine(p, line); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the appended line", func() bool {
		f, _ := s.file(p)
		return f.cursor.Offset == int64(len(sessions[p].Data)+len(line))
	})
	if got := s.kinds(p); !slices.Equal(got, []BatchKind{Found, Grew}) {
		t.Errorf("batches %v after an append, want Found, Grew", got)
	}
	f, _ := s.file(p)
	if n := len(f.entries); n != len(sessions[p].Lines) || f.entries[n-1].ID != "feed0001" {
		t.Errorf("%d entries after the append, last %q", n, f.entries[n-1].ID)
	}
	r.stop(t)
}

// The grouped first scan offers exactly the batches, cursors and checks
// included, that the scan one file at a time does.
func TestColdScanGroupedMatchesOneByOne(t *testing.T) {
	_, root := sessionsRoot(t)
	coldArchive(t, root, 30)
	cfg := Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: 128 << 10, Rescan: time.Hour}
	byPath := func(s *store) map[string][]Batch {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := map[string][]Batch{}
		for _, b := range s.batches {
			out[b.Path] = append(out[b.Path], b)
		}
		return out
	}
	one := newStore()
	firstScan(t, cfg, one, func(w *Watcher) { w.cfg.GroupSink = nil }).stop(t)
	grouped := newStore()
	firstScan(t, cfg, grouped, nil).stop(t)
	if len(one.groups) != 0 || len(grouped.groups) == 0 {
		t.Fatalf("groups: %d one by one, %d grouped", len(one.groups), len(grouped.groups))
	}
	want, got := byPath(one), byPath(grouped)
	if len(got) != len(want) {
		t.Fatalf("%d files offered grouped, %d one by one", len(got), len(want))
	}
	for p, bs := range want {
		if !reflect.DeepEqual(got[p], bs) {
			t.Errorf("%s: grouped batches differ from one by one's", p)
		}
	}
}

// A group the sink refuses is offered again file by file: the file it
// refuses backs off alone and is ingested once it is taken; every other
// file of the group is ingested at once, each exactly once.
func TestColdScanGroupRefused(t *testing.T) {
	_, root := sessionsRoot(t)
	sessions, _, _, _, _ := coldArchive(t, root, 20)
	paths := make([]string, 0, len(sessions))
	for p := range sessions {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	refused := paths[len(paths)/2]
	s := newStore()
	s.fail = func(b Batch) error {
		if b.Path == refused {
			return errors.New("disk I/O error")
		}
		return nil
	}
	r := firstScan(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: 128 << 10, Rescan: time.Hour, RetryMin: 20 * time.Millisecond}, s, nil)
	for _, p := range paths {
		if p == refused {
			continue
		}
		if !s.entriesMatch(p, sessions[p]) {
			t.Fatalf("%s, grouped with a refused file, not ingested", p)
		}
		if got := s.kinds(p); !slices.Equal(got, []BatchKind{Found}) {
			t.Errorf("%s: batches %v, want one Found", p, got)
		}
	}
	if _, ok := s.file(refused); ok {
		t.Fatalf("the refused file is stored")
	}
	for deadline := time.Now().Add(10 * time.Second); r.w.Status().Pending != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d files pending a retry, want 1", r.w.Status().Pending)
		}
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	s.waitFor(t, "the refused file, retried", func() bool { return s.entriesMatch(refused, sessions[refused]) })
	if got := s.kinds(refused); !slices.Equal(got, []BatchKind{Found}) {
		t.Errorf("refused file: batches %v, want one Found", got)
	}
	r.stop(t)
}

// Config.Prepare is called with each batch of a group as it is read
// ahead, and what it returns reaches the GroupSink with that batch, which
// no longer carries the entries Prepare took (the next file is parsed into
// their slice); a batch that goes the ordinary way is neither prepared nor
// carries one.
func TestColdScanPrepare(t *testing.T) {
	_, root := sessionsRoot(t)
	sessions, big, _, _, _ := coldArchive(t, root, 12)
	var mu sync.Mutex
	prepared := map[string]int{}
	marks := map[string]string{} // path -> the batch as Prepare saw it
	// A digest of the entries themselves: a slot reused before Prepare
	// saw it would change it.
	mark := func(b Batch) string {
		ids := make([]string, len(b.Entries))
		for i, e := range b.Entries {
			ids[i] = fmt.Sprint(e.Line, e.ID, e.Type, e.Offset, e.Length)
		}
		return fmt.Sprint(b.Path, " ", b.Cursor.Offset, " ", ids)
	}
	s := newStore()
	cfg := Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: 128 << 10, Rescan: time.Hour,
		Prepare: func(b Batch) any {
			mu.Lock()
			prepared[b.Path]++
			mu.Unlock()
			if len(b.Entries) == 0 {
				t.Errorf("%s: prepared without entries", b.Path)
			}
			m := mark(b)
			mu.Lock()
			marks[b.Path] = m
			mu.Unlock()
			return m
		}}
	firstScan(t, cfg, s, nil).stop(t)
	s.mu.Lock()
	groups := slices.Clone(s.groups)
	batches := slices.Clone(s.batches)
	s.mu.Unlock()
	grouped := 0
	for _, g := range groups {
		for _, b := range g {
			grouped++
			mu.Lock()
			want := marks[b.Path]
			mu.Unlock()
			if b.Prepared != want {
				t.Errorf("%s: prepared %v, want %q", b.Path, b.Prepared, want)
			}
			if b.Entries != nil {
				t.Errorf("%s: the group's batch carries %d entries Prepare took", b.Path, len(b.Entries))
			}
		}
	}
	if grouped < len(sessions) {
		t.Fatalf("%d batches grouped, want at least %d", grouped, len(sessions))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range batches {
		if b.Path == big && (b.Prepared != nil || prepared[big] != 0) {
			t.Errorf("the file larger than a batch: prepared %d times, carries %v", prepared[big], b.Prepared)
		}
	}
	for p := range sessions {
		if prepared[p] != 1 {
			t.Errorf("%s prepared %d times, want once", p, prepared[p])
		}
	}
}
