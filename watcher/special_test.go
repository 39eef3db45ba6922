package watcher

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/watcher/pisessiontest"
)

func (w *Watcher) problem(path string) (Problem, bool) {
	for _, p := range w.Status().Problems {
		if p.Path == path {
			return p, true
		}
	}
	return Problem{}, false
}

func waitProblem(t *testing.T, w *Watcher, path string, kind ProblemKind) Problem {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, ok := w.problem(path)
		if ok && p.Kind == kind {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for a %s problem at %s; problems: %+v", kind, path, w.Status().Problems)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A FIFO named like a session, in a root and named by Follow: refused
// unread with a problem naming it, sessions written after it are
// ingested, and Run returns at once when cancelled. Before, open(2) of
// the FIFO blocked the watcher for good.
func TestSpecialFilesRefused(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	fifo := filepath.Join(dir, "a-first.jsonl")
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "named.jsonl")
	if err := mkfifo(outside, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 100 * time.Millisecond}, nil, s, nil)
	if err := r.w.Follow(outside); err != nil {
		t.Fatal(err)
	}
	p := waitProblem(t, r.w, fifo, NotRegular)
	if !strings.Contains(p.Reason, "named pipe") {
		t.Errorf("reason %q does not say what the file is", p.Reason)
	}
	waitProblem(t, r.w, outside, NotRegular)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 70, Turns: 2})
	path := filepath.Join(dir, "z-later.jsonl")
	if err := sess.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "a session written after the FIFO", func() bool { return s.entriesMatch(path, sess) })

	// The FIFO replaced by a session file: ingested, problem cleared.
	os.Remove(fifo)
	if err := sess.WriteFile(fifo); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the file that replaced the FIFO", func() bool { return s.entriesMatch(fifo, sess) })
	if p, ok := r.w.problem(fifo); ok {
		t.Errorf("problem kept after the FIFO went: %+v", p)
	}
	r.stop(t)
}

// A path that cannot be opened is a problem while it lasts (a symlink loop:
// the tests may run as root, which reads mode 000 files) and is cleared when
// the file becomes readable.
func TestUnreadableFileProblem(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "loop.jsonl")
	if err := os.Symlink("loop.jsonl", path); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 100 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, nil, s, nil)
	p := waitProblem(t, r.w, path, Unreadable)
	if !strings.Contains(p.Reason, "symbolic links") {
		t.Errorf("reason %q", p.Reason)
	}
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 71, Turns: 1})
	os.Remove(path)
	if err := sess.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the file once readable", func() bool { return s.entriesMatch(path, sess) })
	if p, ok := r.w.problem(path); ok {
		t.Errorf("problem kept: %+v", p)
	}
}

// A missing session folder is a problem until it appears.
func TestMissingFolderProblem(t *testing.T) {
	agent := t.TempDir()
	root := filepath.Join(agent, "sessions")
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 100 * time.Millisecond}, nil, s, nil)
	p := waitProblem(t, r.w, root, FolderMissing)
	if !strings.Contains(p.Reason, "does not exist") {
		t.Errorf("reason %q", p.Reason)
	}
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 72, Turns: 1})
	path := writeSession(t, filepath.Join(root, "--p--"), sess)
	s.waitFor(t, "a session in the folder once created", func() bool { return s.entriesMatch(path, sess) })
	if p, ok := r.w.problem(root); ok {
		t.Errorf("problem kept: %+v", p)
	}
}

// An overlong line with no newline: its error is recorded once, as soon as
// it passes the bound; rescans do not read its bytes again, appended bytes
// are read once; once it ends, the lines after it are ingested and no
// second error is recorded.
func TestOverlongLineReadOnce(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 73, Turns: 2})
	path := filepath.Join(dir, "long.jsonl")
	const maxLine = 256 << 10
	long := strings.Repeat("x", 3<<20)
	if err := os.WriteFile(path, append(slices.Clone(sess.Data), long...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 20 * time.Millisecond, MaxLineBytes: maxLine, MaxBatchBytes: 1 << 20}, nil, s, nil)
	p := waitProblem(t, r.w, path, LongLine)
	if !strings.Contains(p.Reason, "no newline yet") {
		t.Errorf("reason %q", p.Reason)
	}
	s.waitFor(t, "the session before the long line", func() bool { return s.entriesMatch(path, sess) })
	waitErrs := func(n int) {
		s.waitFor(t, "the long line's error", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.errs) >= n })
	}
	waitErrs(1)
	s.mu.Lock()
	errs := slices.Clone(s.errs)
	s.mu.Unlock()
	if len(errs) != 1 || errs[0].Offset != int64(len(sess.Data)) || errs[0].Line != len(sess.Lines)+1 || !strings.Contains(errs[0].Reason, "longer than") {
		t.Fatalf("errors %+v", errs)
	}
	size := int64(len(sess.Data) + len(long))
	readAfter := func(what string) int64 {
		// Until every byte was looked at, then through ten more rescans.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if p, ok := r.w.problem(path); ok && strings.Contains(p.Reason, "("+strconv.FormatInt(size-int64(len(sess.Data)), 10)+" bytes so far)") {
				break
			}
			if time.Now().After(deadline) {
				p, _ := r.w.problem(path)
				t.Fatalf("%s: the long line was not scanned to its end: %+v", what, p)
			}
			time.Sleep(5 * time.Millisecond)
		}
		n0 := r.w.rd.read.Load()
		last := r.w.Status().LastRescan
		for range 10 {
			for r.w.Status().LastRescan.Equal(last) {
				time.Sleep(5 * time.Millisecond)
			}
			last = r.w.Status().LastRescan
		}
		if n := r.w.rd.read.Load(); n != n0 {
			t.Errorf("%s: ten rescans read %d more bytes", what, n-n0)
		}
		return n0
	}
	before := readAfter("first scan")
	if before > 2*size {
		t.Errorf("read %d bytes for a %d-byte file", before, size)
	}
	more := strings.Repeat("y", 1<<20)
	if err := pisessiontest.AppendLine(path, []byte(more)); err != nil { // no newline: AppendLine writes the bytes as given
		t.Fatal(err)
	}
	size += int64(len(more))
	after := readAfter("append")
	if d := after - before; d > int64(len(more))+2*readChunk {
		t.Errorf("an append of %d bytes read %d", len(more), d)
	}
	good := pisessiontest.UserLine("after001", sess.Lines[len(sess.Lines)-1].ID, "still here", time.Now())
	if err := pisessiontest.AppendLine(path, append([]byte("\n"), good...)); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the line after the long one", func() bool {
		f, _ := s.file(path)
		return len(f.entries) == len(sess.Lines) && f.entries[len(f.entries)-1].ID == "after001"
	})
	s.mu.Lock()
	n := len(s.errs)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d errors for one long line", n)
	}
	if p, ok := r.w.problem(path); ok {
		t.Errorf("problem kept after the line ended: %+v", p)
	}
}

// A 20 GB sparse file with no newline: its holes are not read, and do not
// grow the read buffer.
func TestSparseFileNotRead(t *testing.T) {
	_, root := sessionsRoot(t)
	dir := filepath.Join(root, "--p--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "sparse.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(20 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	s := newStore()
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, Rescan: 20 * time.Millisecond}, nil, s, nil)
	p := waitProblem(t, r.w, path, LongLine)
	s.waitFor(t, "the sparse file's error", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.errs) == 1 })
	if e := s.errs[0]; e.Offset != 0 || e.Line != 1 {
		t.Errorf("error %+v", e)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.Reason, "(21474836480 bytes so far)") {
		if time.Now().After(deadline) {
			t.Fatalf("not scanned to its end: %+v", p)
		}
		time.Sleep(5 * time.Millisecond)
		p, _ = r.w.problem(path)
	}
	// One read chunk, before the hole is seen to reach past the bound:
	// the buffer never grows for it.
	if n := r.w.rd.read.Load(); n > readChunk {
		t.Errorf("read %d bytes of a sparse file", n)
	}
	if c := cap(r.w.rd.buf); c > readChunk {
		t.Errorf("the read buffer grew to %d bytes for a hole", c)
	}
}

// A batch the sink refuses (a busy or full database) is retried, and is
// not listed as a problem with the file: the file was read.
func TestSinkFailureIsNotAFileProblem(t *testing.T) {
	_, root := sessionsRoot(t)
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 74, Turns: 1})
	path := writeSession(t, filepath.Join(root, "--p--"), sess)
	s := newStore()
	refused := make(chan struct{}, 100)
	fail := true
	s.fail = func(Batch) error {
		if fail {
			select {
			case refused <- struct{}{}:
			default:
			}
			return os.ErrDeadlineExceeded
		}
		return nil
	}
	r := start(t, Config{Roots: []Root{{Dir: root, Recursive: true}}, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond}, nil, s, nil)
	for range 3 {
		<-refused
	}
	if p, ok := r.w.problem(path); ok {
		t.Errorf("a refused batch listed as a problem: %+v", p)
	}
	s.mu.Lock()
	fail = false
	s.mu.Unlock()
	s.waitFor(t, "the batch once the sink takes it", func() bool { return s.entriesMatch(path, sess) })
}
