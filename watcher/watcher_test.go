package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// store is what a sink commits: per file, the entries and cursor, applied
// the way the daemon's transaction does (Found/Grew append, Rewritten
// replaces, Removed deletes).
type store struct {
	mu      sync.Mutex
	files   map[string]*storedFile
	batches []Batch // every committed batch, in order
	errs    []IngestError
	fail    func(Batch) error // if set and returns non-nil, the batch is refused
	groups  [][]Batch         // every group offered to group, in order
	changed chan struct{}
}

type storedFile struct {
	header  *Header
	entries []Entry
	cursor  Cursor
}

func newStore() *store {
	return &store{files: make(map[string]*storedFile), changed: make(chan struct{}, 1)}
}

func (s *store) sink(_ context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(b); err != nil {
			return err
		}
	}
	s.apply(b)
	return nil
}

// apply commits b (s.mu held).
func (s *store) apply(b Batch) {
	if b.Path == "" || b.Path != b.Cursor.Path {
		panic(fmt.Sprintf("batch path %q cursor path %q", b.Path, b.Cursor.Path))
	}
	f := s.files[b.Path]
	switch b.Kind {
	case Found, Rewritten:
		if b.Kind == Found && f != nil {
			panic("Found for a file already stored: " + b.Path)
		}
		f = &storedFile{}
		s.files[b.Path] = f
	case Grew:
		if f == nil {
			panic("Grew for an unknown file: " + b.Path)
		}
		if len(b.Entries) > 0 && len(f.entries) > 0 && b.Entries[0].Offset < f.cursor.Offset {
			panic("Grew re-delivers ingested bytes: " + b.Path)
		}
	case Removed:
		delete(s.files, b.Path)
	}
	if b.Kind != Removed {
		if b.Header != nil {
			f.header = b.Header
		}
		f.entries = append(f.entries, b.Entries...)
		f.cursor = b.Cursor
	}
	s.batches = append(s.batches, b)
	s.errs = append(s.errs, b.Errors...)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// group is the store's GroupSink: every batch or none, as one
// transaction would (fail refuses the group if it refuses any batch).
func (s *store) group(_ context.Context, bs []Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, slices.Clone(bs))
	if s.fail != nil {
		for _, b := range bs {
			if err := s.fail(b); err != nil {
				return err
			}
		}
	}
	for _, b := range bs {
		s.apply(b)
	}
	return nil
}

func (s *store) cursors() []Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []Cursor
	for _, f := range s.files {
		cs = append(cs, f.cursor)
	}
	return cs
}

func (s *store) file(path string) (storedFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	if !ok {
		return storedFile{}, false
	}
	return storedFile{header: f.header, entries: slices.Clone(f.entries), cursor: f.cursor}, true
}

func (s *store) kinds(path string) []BatchKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks []BatchKind
	for _, b := range s.batches {
		if b.Path == path {
			ks = append(ks, b.Kind)
		}
	}
	return ks
}

// waitFor waits until cond holds, re-checking after every committed batch
// and at least every 50ms, and fails the test after the deadline.
func (s *store) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-s.changed:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// entriesMatch reports whether the stored file holds exactly the session's
// entries (by id, line and offset), each once.
func (s *store) entriesMatch(path string, sess *pisessiontest.Session) bool {
	f, ok := s.file(path)
	if !ok || f.header == nil || f.header.ID != sess.ID {
		return false
	}
	if len(f.entries) != len(sess.Lines)-1 {
		return false
	}
	for i, e := range f.entries {
		l := sess.Lines[i+1]
		want := l.ID
		if sess.Version == 1 {
			want = V1ID(l.Index)
		}
		if e.ID != want || e.Line != i+2 || e.Offset != int64(sess.Offsets[i+1]) {
			return false
		}
	}
	return f.cursor.Offset == int64(len(sess.Data))
}

type running struct {
	w      *Watcher
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// start runs a watcher over cfg into s, with s's GroupSink as the daemon
// wires it (a hook may take it away: w.cfg.GroupSink = nil).
func start(t *testing.T, cfg Config, saved []Cursor, s *store, hook func(*Watcher)) *running {
	t.Helper()
	if cfg.GroupSink == nil {
		cfg.GroupSink = s.group
	}
	w := New(cfg, saved)
	if hook != nil {
		hook(w)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = w.Run(ctx, s.sink)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func sessionsRoot(t *testing.T) (agent, root string) {
	agent = t.TempDir()
	root = filepath.Join(agent, "sessions")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return agent, root
}

func writeSession(t *testing.T, dir string, sess *pisessiontest.Session) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, pisessiontest.FileName(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), sess.ID))
	if err := sess.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return inodeOf(fi)
}

func TestFollowsExistingAndAppendedLines(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 11, Turns: 10})
	path := writeSession(t, filepath.Join(root, pisessiontest.ProjectDir("/home/dev/app")), sess)
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "initial ingest", func() bool { return s.entriesMatch(path, sess) })

	ts := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	last := sess.Lines[len(sess.Lines)-1].ID
	line := pisessiontest.UserLine("feed0001", last, "and now?", ts)
	if err := pisessiontest.AppendLine(path, line); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "appended line", func() bool {
		f, _ := s.file(path)
		return len(f.entries) == len(sess.Lines) && f.entries[len(f.entries)-1].ID == "feed0001"
	})
	f, _ := s.file(path)
	if e := f.entries[len(f.entries)-1]; e.ParentID != last || !e.UserText || e.Offset != int64(len(sess.Data)) || e.Length != len(line) {
		t.Errorf("appended entry %+v", e)
	}
	if got := s.kinds(path); got[0] != Found || got[len(got)-1] != Grew {
		t.Errorf("kinds = %v", got)
	}
}

func TestLineWrittenInTwoHalves(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 12, Turns: 3})
	path := writeSession(t, filepath.Join(root, "--p--"), sess)
	s := newStore()
	visits := make(chan string, 100)
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, func(w *Watcher) {
		w.afterVisit = func(p string) {
			select {
			case visits <- p:
			default:
			}
		}
	})
	s.waitFor(t, "initial ingest", func() bool { return s.entriesMatch(path, sess) })

	// A 150 KB line, torn in the middle: the watcher must read the first
	// half, see no newline, and wait for the rest.
	big := strings.Repeat("0123456789abcdef", 150_000/16)
	line := pisessiontest.AssistantLine("bigline1", sess.Lines[len(sess.Lines)-1].ID, "think", "sig", big, time.Now())
	for len(visits) > 0 {
		<-visits
	}
	err := pisessiontest.AppendHalves(path, line, func() {
		select {
		case <-visits: // the watcher has looked at the file after the first half
		case <-time.After(10 * time.Second):
			t.Error("no visit after the first half")
		}
		f, _ := s.file(path)
		if len(f.entries) != len(sess.Lines)-1 || f.cursor.Offset != int64(len(sess.Data)) {
			t.Errorf("torn line was acted on: %d entries, offset %d", len(f.entries), f.cursor.Offset)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the completed line", func() bool {
		f, _ := s.file(path)
		return len(f.entries) == len(sess.Lines)
	})
	f, _ := s.file(path)
	e := f.entries[len(f.entries)-1]
	if e.ID != "bigline1" || e.Length != len(line) || len(e.Thinking) != 1 || f.cursor.Offset != int64(len(sess.Data)+len(line)) {
		t.Errorf("entry %+v cursor %+v", e, f.cursor)
	}
	if len(s.errs) != 0 {
		t.Errorf("ingest errors: %+v", s.errs)
	}
}

func TestRewrittenShorter(t *testing.T) {
	_, root := sessionsRoot(t)
	long := pisessiontest.Generate(pisessiontest.Options{Seed: 13, Turns: 12})
	path := writeSession(t, filepath.Join(root, "--p--"), long)
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "initial ingest", func() bool { return s.entriesMatch(path, long) })

	short := pisessiontest.Generate(pisessiontest.Options{Seed: 14, Turns: 2})
	if len(short.Data) >= len(long.Data) {
		t.Fatal("test needs a shorter session")
	}
	if err := pisessiontest.RewriteInPlace(path, short.Data); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "re-ingest of the shorter file", func() bool { return s.entriesMatch(path, short) })
	if !slices.Contains(s.kinds(path), Rewritten) {
		t.Errorf("kinds = %v, want a Rewritten batch", s.kinds(path))
	}
}

func TestV1MigratedInPlace(t *testing.T) {
	_, root := sessionsRoot(t)
	v1 := pisessiontest.Generate(pisessiontest.Options{Seed: 15, Version: 1, Turns: 15})
	path := writeSession(t, filepath.Join(root, "--p--"), v1)
	ino := inode(t, path)
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "v1 ingest", func() bool { return s.entriesMatch(path, v1) })
	f, _ := s.file(path)
	if f.header.Version != 1 || f.entries[1].ParentID != f.entries[0].ID {
		t.Fatalf("v1 header %+v, first entries %+v", f.header, f.entries[:2])
	}

	v3 := v1.Migrated(99)
	if len(v3.Data) <= len(v1.Data) {
		t.Fatal("a migrated file is longer")
	}
	if err := pisessiontest.RewriteInPlace(path, v3.Data); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != ino {
		t.Fatal("rewrite changed the inode")
	}
	s.waitFor(t, "re-ingest of the migrated file", func() bool { return s.entriesMatch(path, v3) })
	f, _ = s.file(path)
	if f.header.Version != 3 {
		t.Errorf("header %+v", f.header)
	}
	ks := s.kinds(path)
	if !slices.Contains(ks, Rewritten) || slices.Contains(ks, Removed) {
		t.Errorf("kinds = %v, want Rewritten and no Removed", ks)
	}
}

func TestThousandFiles(t *testing.T) {
	_, root := sessionsRoot(t)
	var paths []string
	var sessions []*pisessiontest.Session
	for i := 0; i < 1000; i++ {
		sess := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(1000 + i), Turns: 1, Plain: true, ToolResultBytes: 100})
		paths = append(paths, writeSession(t, filepath.Join(root, fmt.Sprintf("--proj%02d--", i%20)), sess))
		sessions = append(sessions, sess)
	}
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "1000 files", func() bool {
		s.mu.Lock()
		n := len(s.files)
		s.mu.Unlock()
		return n == 1000
	})
	var total int64
	for i, p := range paths {
		if !s.entriesMatch(p, sessions[i]) {
			t.Fatalf("file %d not ingested exactly", i)
		}
		total += int64(len(sessions[i].Data))
	}
	s.waitFor(t, "status", func() bool {
		st := r.w.Status()
		return st.Files == 1000 && st.Bytes == total && st.Ingested == total && st.Watches == 21 && !st.Degraded
	})
}

func TestDirectoryCreatedAfterStart(t *testing.T) {
	agent := t.TempDir()
	root := filepath.Join(agent, "sessions") // does not exist yet
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: time.Hour}, nil, s, nil)

	a := pisessiontest.Generate(pisessiontest.Options{Seed: 21, Turns: 2})
	pa := writeSession(t, filepath.Join(root, "--first--"), a) // creates sessions/ and the project dir
	s.waitFor(t, "file in a new root", func() bool { return s.entriesMatch(pa, a) })

	b := pisessiontest.Generate(pisessiontest.Options{Seed: 22, Turns: 2})
	pb := writeSession(t, filepath.Join(root, "--second--", "nested"), b)
	s.waitFor(t, "file in a new project dir", func() bool { return s.entriesMatch(pb, b) })
}

func TestMalformedLineInTheMiddle(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 23, Turns: 4})
	mid := sess.Offsets[len(sess.Offsets)/2]
	data := slices.Concat(sess.Data[:mid], []byte("{\"type\":\"message\",\"id\":\"brok\n"), sess.Data[mid:])
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "x.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "ingest", func() bool {
		f, ok := s.file(path)
		return ok && f.cursor.Offset == int64(len(data))
	})
	f, _ := s.file(path)
	if len(f.entries) != len(sess.Lines)-1 {
		t.Errorf("%d entries, want %d", len(f.entries), len(sess.Lines)-1)
	}
	badLine := len(sess.Offsets)/2 + 1
	if len(s.errs) != 1 || s.errs[0].Line != badLine || s.errs[0].Offset != int64(mid) || s.errs[0].Path != path {
		t.Errorf("errors %+v, want one at line %d", s.errs, badLine)
	}
	for i, e := range f.entries {
		if e.ID != sess.Lines[i+1].ID {
			t.Fatalf("entry %d is %s, want %s", i, e.ID, sess.Lines[i+1].ID)
		}
	}
}

// A sink that fails part-way through a large file: the cursor stays at the
// last committed batch, and a restart from the saved cursors resumes there
// without re-delivering committed bytes or losing any.
func TestRestartMidIngest(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 24, TargetBytes: 600_000})
	path := writeSession(t, filepath.Join(root, "--p--"), sess)
	cfg := Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: 64 << 10, RetryMin: time.Hour}

	s := newStore()
	var calls int
	s.fail = func(b Batch) error {
		calls++
		if calls == 4 {
			return errors.New("disk full")
		}
		return nil
	}
	r := start(t, cfg, nil, s, nil)
	s.waitFor(t, "three committed batches", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return calls >= 4
	})
	r.stop(t)
	f, _ := s.file(path)
	if len(s.batches) != 3 || f.cursor.Offset == 0 || f.cursor.Offset >= int64(len(sess.Data)) {
		t.Fatalf("%d batches, cursor %d of %d", len(s.batches), f.cursor.Offset, len(sess.Data))
	}
	saved := s.cursors()

	// Restart: a fresh watcher with the saved cursors and a healthy sink.
	s.fail = nil
	start(t, cfg, saved, s, nil)
	s.waitFor(t, "resumed ingest", func() bool { return s.entriesMatch(path, sess) })
	for _, k := range s.kinds(path)[3:] {
		if k != Grew {
			t.Fatalf("after restart got %v, want only Grew (kinds %v)", k, s.kinds(path))
		}
	}
}

func TestSinkErrorIsRetried(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 25, Turns: 3})
	path := writeSession(t, filepath.Join(root, "--p--"), sess)
	s := newStore()
	failures := 0
	s.fail = func(b Batch) error {
		if failures < 2 {
			failures++
			return errors.New("database is locked")
		}
		return nil
	}
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, RetryMin: 10 * time.Millisecond, Rescan: time.Hour}, nil, s, nil)
	s.waitFor(t, "ingest after retries", func() bool { return s.entriesMatch(path, sess) })
	if got := s.kinds(path); len(got) != 1 || got[0] != Found {
		t.Errorf("kinds = %v", got)
	}
}

func TestDeletionAndReplacement(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	a := pisessiontest.Generate(pisessiontest.Options{Seed: 26, Turns: 2})
	pa := writeSession(t, dir, a)
	b := pisessiontest.Generate(pisessiontest.Options{Seed: 27, Turns: 2})
	pb := writeSession(t, dir, b)
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "ingest", func() bool { return s.entriesMatch(pa, a) && s.entriesMatch(pb, b) })
	ida, _ := s.file(pa)

	if err := os.Remove(pa); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "removal", func() bool { _, ok := s.file(pa); return !ok })
	last := s.batches[len(s.batches)-1]
	if last.Kind != Removed || last.Cursor.ID != ida.cursor.ID {
		t.Errorf("last batch %+v", last)
	}

	// Replace b by another file renamed over it (a new inode).
	c := pisessiontest.Generate(pisessiontest.Options{Seed: 28, Turns: 3})
	tmp := filepath.Join(t.TempDir(), "c.jsonl")
	if err := c.WriteFile(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pb); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "replacement", func() bool { return s.entriesMatch(pb, c) })
	ks := s.kinds(pb)
	if len(ks) < 3 || ks[len(ks)-2] != Removed || ks[len(ks)-1] != Found {
		t.Errorf("kinds = %v, want ... Removed, Found", ks)
	}
}

func TestMissedEventCaughtByRescan(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 29, Turns: 2})
	path := writeSession(t, dir, sess)
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 200 * time.Millisecond}, nil, s, nil)
	s.waitFor(t, "ingest", func() bool { return s.entriesMatch(path, sess) })

	// Lose the directory's watch, as an overflowed queue or a full watch
	// table would: only the rescan can find the append.
	r.w.fsw.Remove(dir)
	line := pisessiontest.UserLine("late0001", sess.Lines[len(sess.Lines)-1].ID, "missed?", time.Now())
	if err := pisessiontest.AppendLine(path, line); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "rescan", func() bool {
		f, _ := s.file(path)
		return len(f.entries) == len(sess.Lines)
	})
}

func TestFollowExtraFile(t *testing.T) {
	_, root := sessionsRoot(t)
	elsewhere := t.TempDir()
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 30, Turns: 2})
	path := writeSession(t, elsewhere, sess)
	other := writeSession(t, elsewhere, pisessiontest.Generate(pisessiontest.Options{Seed: 31, Turns: 1}))
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	if err := r.w.Follow(path); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "followed file", func() bool { return s.entriesMatch(path, sess) })
	line := pisessiontest.UserLine("more0001", sess.Lines[len(sess.Lines)-1].ID, "more", time.Now())
	if err := pisessiontest.AppendLine(path, line); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "append to followed file", func() bool {
		f, _ := s.file(path)
		return len(f.entries) == len(sess.Lines)
	})
	if _, ok := s.file(other); ok {
		t.Error("a file next to the followed one was ingested")
	}
}

func TestNotASessionFileIsFollowedUntilRewritten(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "junk.jsonl")
	if err := os.WriteFile(path, []byte("{\"hello\":1}\n{\"type\":\"message\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}}, nil, s, nil)
	s.waitFor(t, "junk file", func() bool { f, ok := s.file(path); return ok && f.cursor.Offset > 0 })
	f, _ := s.file(path)
	if f.header != nil || len(f.entries) != 0 || len(s.errs) != 1 || s.errs[0].Line != 1 {
		t.Fatalf("header %v entries %v errors %+v", f.header, f.entries, s.errs)
	}
	// pi re-initialises the file with a fresh header: now it is a session.
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 32, Turns: 1})
	if err := pisessiontest.RewriteInPlace(path, sess.Data); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "re-initialised file", func() bool { return s.entriesMatch(path, sess) })
}

func genSession(seed uint64) *pisessiontest.Session {
	return pisessiontest.Generate(pisessiontest.Options{Seed: seed, Turns: 2})
}

// A large file with a 1 MB line and a line over MaxLineBytes: batches stay
// bounded, the read buffer grows only to the longest kept line, the
// overlong line is an IngestError and every other line is ingested.
func TestLargeFileBoundedMemory(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 33, TargetBytes: 6 << 20})
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "big.jsonl")
	last := sess.Lines[len(sess.Lines)-1].ID
	mb := pisessiontest.AssistantLine("onemega1", last, "t", "sig", strings.Repeat("x", 1<<20), time.Now())
	huge := pisessiontest.AssistantLine("huge0001", "onemega1", "t", "sig", strings.Repeat("y", 3<<20), time.Now())
	after := pisessiontest.UserLine("after001", "onemega1", "still here", time.Now())
	data := slices.Concat(sess.Data, mb, huge, after)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	var maxEntries int
	s.fail = func(b Batch) error {
		maxEntries = max(maxEntries, len(b.Entries))
		return nil
	}
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, MaxBatchBytes: 512 << 10, MaxLineBytes: 2 << 20}, nil, s, nil)
	s.waitFor(t, "large file", func() bool {
		f, ok := s.file(path)
		return ok && f.cursor.Offset == int64(len(data))
	})
	r.stop(t)
	f, _ := s.file(path)
	if n := len(f.entries); n != len(sess.Lines)-1+2 || f.entries[n-1].ID != "after001" || f.entries[n-2].ID != "onemega1" {
		t.Errorf("%d entries, last %+v", n, f.entries[n-1])
	}
	if len(s.errs) != 1 || !strings.Contains(s.errs[0].Reason, "longer than") || s.errs[0].Offset != int64(len(sess.Data)+len(mb)) || s.errs[0].Line != len(sess.Lines)+2 {
		t.Errorf("errors %+v", s.errs)
	}
	if len(s.kinds(path)) < 12 {
		t.Errorf("%d batches for %d bytes in 512 KiB batches", len(s.kinds(path)), len(data))
	}
	if c := cap(r.w.rd.buf); c > 4*readChunk {
		t.Errorf("read buffer grew to %d bytes", c)
	}
	if maxEntries > 2000 {
		t.Errorf("a batch held %d entries", maxEntries)
	}
}

// Changes made while the daemon was down are found at start from the saved
// cursors: an append is read from the cursor on, a v1 file migrated in
// place is Rewritten, a deleted file is Removed, and a cursor whose Check
// cannot be decoded is re-read whole.
func TestRestartSeesOfflineChanges(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	grow := pisessiontest.Generate(pisessiontest.Options{Seed: 50, Turns: 3})
	v1 := pisessiontest.Generate(pisessiontest.Options{Seed: 51, Version: 1, Turns: 3})
	gone := pisessiontest.Generate(pisessiontest.Options{Seed: 52, Turns: 1})
	odd := pisessiontest.Generate(pisessiontest.Options{Seed: 53, Turns: 1})
	pg, pv, pd, po := writeSession(t, dir, grow), writeSession(t, dir, v1), writeSession(t, dir, gone), writeSession(t, dir, odd)
	cfg := Config{Roots: []Root{{Dir: root, Recursive: true}}}
	s := newStore()
	r := start(t, cfg, nil, s, nil)
	s.waitFor(t, "first run", func() bool {
		return s.entriesMatch(pg, grow) && s.entriesMatch(pv, v1) && s.entriesMatch(pd, gone) && s.entriesMatch(po, odd)
	})
	r.stop(t)
	saved := s.cursors()
	for i := range saved {
		if saved[i].Path == po {
			saved[i].Check = []byte("from another version")
		}
	}
	nBefore := len(s.batches)

	line := pisessiontest.UserLine("offline1", grow.Lines[len(grow.Lines)-1].ID, "while you were away", time.Now())
	if err := pisessiontest.AppendLine(pg, line); err != nil {
		t.Fatal(err)
	}
	v3 := v1.Migrated(7)
	if err := pisessiontest.RewriteInPlace(pv, v3.Data); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pd); err != nil {
		t.Fatal(err)
	}

	start(t, cfg, saved, s, nil)
	s.waitFor(t, "second run", func() bool {
		f, _ := s.file(pg)
		_, dok := s.file(pd)
		return len(f.entries) == len(grow.Lines) && s.entriesMatch(pv, v3) && !dok && s.entriesMatch(po, odd)
	})
	s.mu.Lock()
	after := slices.Clone(s.batches[nBefore:])
	s.mu.Unlock()
	want := map[string]BatchKind{pg: Grew, pv: Rewritten, pd: Removed, po: Rewritten}
	if len(after) != len(want) {
		t.Fatalf("%d batches after restart, want %d", len(after), len(want))
	}
	for _, b := range after {
		if want[b.Path] != b.Kind {
			t.Errorf("%s: %s, want %s", filepath.Base(b.Path), b.Kind, want[b.Path])
		}
		if b.Path == pg && (len(b.Entries) != 1 || b.Entries[0].Offset != int64(len(grow.Data))) {
			t.Errorf("grown file re-read: %+v", b.Entries)
		}
	}
}

// With the inotify watch table full, the watcher says so once and keeps
// following by rescans.
func TestWatchLimitFallsBackToRescans(t *testing.T) {
	_, root := sessionsRoot(t)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 100 * time.Millisecond, Logger: logger}, nil, s, func(w *Watcher) {
		w.addWatch = func(string) error { return fmt.Errorf("add watch: %w", syscall.ENOSPC) }
	})
	a := pisessiontest.Generate(pisessiontest.Options{Seed: 60, Turns: 2})
	pa := writeSession(t, filepath.Join(root, "--a--"), a)
	b := pisessiontest.Generate(pisessiontest.Options{Seed: 61, Turns: 2})
	pb := writeSession(t, filepath.Join(root, "--b--"), b)
	s.waitFor(t, "files found by rescans", func() bool { return s.entriesMatch(pa, a) && s.entriesMatch(pb, b) })
	if st := r.w.Status(); !st.Degraded || st.Watches != 0 {
		t.Errorf("status %+v", st)
	}
	r.stop(t)
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "watch limit"); n != 1 {
		t.Errorf("watch limit logged %d times:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestProjectDirectoryRemoved(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--gone--")
	a, b := genSession(70), genSession(71)
	pa, pb := writeSession(t, dir, a), writeSession(t, dir, b)
	s := newStore()
	start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: time.Hour}, nil, s, nil)
	s.waitFor(t, "ingest", func() bool { return s.entriesMatch(pa, a) && s.entriesMatch(pb, b) })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "both removed", func() bool {
		_, oka := s.file(pa)
		_, okb := s.file(pb)
		return !oka && !okb
	})
	// The same project folder created again is watched again.
	c := genSession(72)
	pc := writeSession(t, dir, c)
	s.waitFor(t, "file in the recreated folder", func() bool { return s.entriesMatch(pc, c) })
}
