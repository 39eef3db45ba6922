package watcher

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Root is a directory whose *.jsonl files are pi sessions.
type Root struct {
	Dir string
	// Recursive follows files in subdirectories at any depth, as under
	// <agentDir>/sessions (one --<cwd>-- folder per project, created as
	// projects appear). A flat root (a --session-dir folder) holds its
	// files directly.
	Recursive bool
}

// Config configures a Watcher. Zero values take the defaults.
type Config struct {
	Roots []Root
	// Rescan is how often every root is listed and every file stat'ed, so a
	// missed fsnotify event (queue overflow, watch limit, a filesystem that
	// sends none) delays a change but never loses it. Default 10s.
	Rescan time.Duration
	// MaxBatchBytes bounds the lines in one Batch (default 4 MiB): a large
	// file is ingested as a Found or Rewritten batch followed by Grew
	// batches, each committed with its cursor.
	MaxBatchBytes int
	// MaxLineBytes bounds one line (default 64 MiB); a longer line is skipped
	// with an IngestError recorded as soon as it passes the bound. Until its
	// newline comes the file is read no further (a LongLine problem), and
	// every byte of it is read once (holes in a sparse file not at all).
	MaxLineBytes int
	// RetryMin and RetryMax bound the backoff after a sink error or a read
	// error (defaults 250ms and 30s).
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
	// GroupSink, when set, takes the first batches of several new files
	// in one call during a rescan (group.go): a first scan of an archive
	// of small files commits once per MaxBatchBytes, not once per file.
	GroupSink GroupSink
	// Prepare, when set, is called with each batch of a group on the
	// goroutine that reads the group ahead, while the sink commits the
	// group before it; what it returns is the batch's Prepared. It lets
	// the sink do there the work that needs no database (group.go). It
	// must not call the sink.
	Prepare func(Batch) any
}

const readChunk = 256 << 10

func (c *Config) defaults() {
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 4 << 20
	}
	if c.MaxLineBytes < readChunk {
		if c.MaxLineBytes <= 0 {
			c.MaxLineBytes = 64 << 20
		} else {
			c.MaxLineBytes = readChunk
		}
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(30*time.Second, c.RetryMin)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Sink receives batches. It must return nil only once the batch's rows and
// its Cursor are durable; any error leaves the cursor where it was and the
// same bytes are offered again later.
type Sink func(context.Context, Batch) error

// Watcher follows pi's session files under its roots and any file it was
// asked to Follow. Create it with New, then call Run once.
type Watcher struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	dirty     map[string]struct{} // paths to look at (files or directories)
	extra     map[string]struct{} // files followed outside the roots
	rescanNow bool
	status    Status
	problems  map[string]Problem // by path: see problems.go
	wake      chan struct{}      // capacity 1: a burst of events is one wake-up

	// Owned by Run.
	files    map[string]*fileState
	watches  map[string]struct{}
	fsw      *fsnotify.Watcher
	degraded bool
	rd       *reader
	// coldRd is readCold's: the read-ahead goroutine's, used by one group
	// at a time (visitAll reads a group ahead only once the one before
	// it has been handed over).
	coldRd  *reader
	scanned map[string]struct{} // folders listed by the rescan under way

	lastPublish time.Time
	beat        atomic.Int64 // unix ns: Run's loop last made progress (Beat)
	afterVisit  func(path string)
	addWatch    func(dir string) error // test hook replacing fsw.Add // test hook: a file was brought up to date (or failed)
}

type fileState struct {
	cur   Cursor
	chk   fileCheck
	found bool // the sink has the file (a Found batch, or a saved cursor)
	// seen is the stat of the file when it was last read to EOF: a rescan
	// skips a file whose stat has not changed since.
	seen     statKey
	size     int64 // size at the last look
	failures int
	retryAt  time.Time
	// long is the overlong line the cursor stops at, while its newline has
	// not been found: the next read resumes where its scan stopped.
	long *longLine
}

type statKey struct {
	id    FileID
	size  int64
	mtime int64
}

// Status is a snapshot of what the watcher follows, for health endpoints.
type Status struct {
	Roots      []Root
	Files      int       // files followed
	Watches    int       // directories watched with fsnotify
	Degraded   bool      // fsnotify unavailable or at its limit: rescans only
	LastRescan time.Time // end of the last full rescan
	Pending    int       // files waiting for a retry after an error
	// Bytes is the size of the followed files when last looked at, and
	// Ingested the part of it the sink has committed: Ingested/Bytes is the
	// progress of a first ingest, Bytes-Ingested the lag.
	Bytes, Ingested int64
	// Problems are what the watcher cannot follow now, by path.
	Problems []Problem
}

// New returns a Watcher for cfg that resumes from saved, the cursors the sink
// made durable. A saved cursor whose path is outside every root is followed
// as if Follow had been called (a file named by the API before a restart).
func New(cfg Config, saved []Cursor) *Watcher {
	cfg.defaults()
	w := &Watcher{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "watcher"),
		dirty:    make(map[string]struct{}),
		extra:    make(map[string]struct{}),
		problems: make(map[string]Problem),
		wake:     make(chan struct{}, 1),
		files:    make(map[string]*fileState),
		watches:  make(map[string]struct{}),
		rd:       newReader(readChunk, cfg.MaxLineBytes, cfg.MaxBatchBytes),
		coldRd:   newReader(readChunk, cfg.MaxLineBytes, cfg.MaxBatchBytes),
	}
	w.cfg.Roots = slices.Clone(cfg.Roots)
	for i, r := range w.cfg.Roots {
		if abs, err := filepath.Abs(r.Dir); err == nil {
			w.cfg.Roots[i].Dir = abs
		} else {
			w.cfg.Roots[i].Dir = filepath.Clean(r.Dir)
		}
	}
	w.status.Roots = slices.Clone(w.cfg.Roots)
	for _, c := range saved {
		if abs, err := filepath.Abs(c.Path); err == nil {
			c.Path = abs
		}
		st := &fileState{cur: c, found: true}
		if chk, err := decodeCheck(c.Check, c.Lines); err == nil {
			st.chk = chk
		} else {
			st.chk = fileCheck{}
			st.cur.Check = nil // forces a Rewritten batch (see check.go)
		}
		w.files[c.Path] = st
		if !w.underRoot(c.Path) {
			w.extra[c.Path] = struct{}{}
		}
	}
	return w
}

// Follow asks the watcher to follow one more session file, wherever it is
// (the API's sessionFile). It is safe to call at any time, before or during
// Run; following a file already followed does nothing.
func (w *Watcher) Follow(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("follow %s: %w", path, err)
	}
	w.mu.Lock()
	if !w.underRoot(abs) {
		w.extra[abs] = struct{}{}
	}
	w.dirty[abs] = struct{}{}
	w.mu.Unlock()
	w.signal()
	return nil
}

// Beat is when Run's loop last made progress: it wakes at least every
// Rescan, and beats after every file a rescan looks at and every batch the
// sink takes, so a Beat older than a few Rescans means the loop is stuck
// (the daemon's watchdog stops then). Zero before Run.
func (w *Watcher) Beat() time.Time {
	if n := w.beat.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Status returns a snapshot of the watcher's state.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.status
	s.Roots = slices.Clone(s.Roots)
	s.Problems = w.problemList()
	return s
}

func (w *Watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Watcher) markDirty(path string) {
	w.mu.Lock()
	w.dirty[path] = struct{}{}
	w.mu.Unlock()
	w.signal()
}

// Run follows the files until ctx is done, calling sink (or the GroupSink)
// for every batch, one call at a time, from this goroutine. It returns nil when ctx is cancelled and an
// error only if the watcher cannot work at all.
func (w *Watcher) Run(ctx context.Context, sink Sink) error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.Warn("fsnotify unavailable; following by rescans only", "every", w.cfg.Rescan, "err", err)
		w.degraded = true
	} else {
		w.fsw = fsw
		var pump sync.WaitGroup
		defer pump.Wait() // after Close (defers run last-in first-out)
		defer fsw.Close()
		pump.Go(func() { w.pumpEvents(ctx, fsw) })
	}

	ticker := time.NewTicker(w.cfg.Rescan)
	defer ticker.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()

	w.rescan(ctx, sink)
	for {
		w.beat.Store(time.Now().UnixNano())
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		rescanNow := w.rescanNow
		w.rescanNow = false
		dirty := w.dirty
		w.dirty = make(map[string]struct{})
		w.mu.Unlock()
		if rescanNow {
			w.rescan(ctx, sink)
		}
		paths := make([]string, 0, len(dirty))
		for p := range dirty {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for _, p := range paths {
			if ctx.Err() != nil {
				return nil
			}
			w.visit(ctx, p, sink)
		}

		// Sleep until an event, the rescan tick, or the earliest retry.
		if next, ok := w.nextRetry(); ok {
			retry.Reset(max(time.Until(next), time.Millisecond))
		}
		w.publishStatus()
		select {
		case <-ctx.Done():
			return nil
		case <-w.wake:
		case <-ticker.C:
			w.rescan(ctx, sink)
		case <-retry.C:
			now := time.Now()
			w.mu.Lock()
			for p, st := range w.files {
				if !st.retryAt.IsZero() && !st.retryAt.After(now) {
					st.retryAt = time.Time{}
					w.dirty[p] = struct{}{}
				}
			}
			w.mu.Unlock()
		}
		retry.Stop()
	}
}

func (w *Watcher) nextRetry() (time.Time, bool) {
	var next time.Time
	for _, st := range w.files {
		if !st.retryAt.IsZero() && (next.IsZero() || st.retryAt.Before(next)) {
			next = st.retryAt
		}
	}
	return next, !next.IsZero()
}

func (w *Watcher) publishStatus() {
	pending := 0
	var size, ingested int64
	for _, st := range w.files {
		if !st.retryAt.IsZero() {
			pending++
		}
		size += max(st.size, st.cur.Offset)
		ingested += st.cur.Offset
	}
	w.lastPublish = time.Now()
	w.mu.Lock()
	w.status.Bytes, w.status.Ingested = size, ingested
	w.status.Files = len(w.files)
	w.status.Watches = len(w.watches)
	w.status.Degraded = w.degraded
	w.status.Pending = pending
	w.mu.Unlock()
}

// pumpEvents turns fsnotify events into dirty paths. It does no I/O, so the
// kernel queue drains quickly; the events are only hints, Run learns the
// truth with stat.
func (w *Watcher) pumpEvents(ctx context.Context, fsw *fsnotify.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-fsw.Events:
			if !ok {
				return
			}
			w.markDirty(filepath.Clean(ev.Name))
		case err, ok := <-fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("fsnotify error; rescanning", "err", err)
			w.mu.Lock()
			w.rescanNow = true
			w.mu.Unlock()
			w.signal()
		}
	}
}

// wanted reports whether path is a session file the watcher follows.
func (w *Watcher) wanted(path string) bool {
	if _, ok := w.files[path]; ok {
		return true
	}
	w.mu.Lock()
	_, extra := w.extra[path]
	w.mu.Unlock()
	if extra {
		return true
	}
	return strings.HasSuffix(path, ".jsonl") && w.underRoot(path)
}

// underRoot reports whether path is a file in a root (or, for a recursive
// root, anywhere below it).
func (w *Watcher) underRoot(path string) bool { return w.dirWanted(filepath.Dir(path)) }

// dirWanted reports whether dir is a root or, under a recursive root, a
// directory whose files are followed.
func (w *Watcher) dirWanted(dir string) bool {
	for _, r := range w.cfg.Roots {
		if dir == r.Dir {
			return true
		}
		if r.Recursive && strings.HasPrefix(dir, r.Dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// watch adds an fsnotify watch on dir once. Hitting the kernel's watch
// limit is logged once and the watcher carries on with rescans.
func (w *Watcher) watch(dir string) {
	if w.fsw == nil {
		return
	}
	if _, ok := w.watches[dir]; ok {
		return
	}
	add := w.fsw.Add
	if w.addWatch != nil {
		add = w.addWatch
	}
	if err := add(dir); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) {
			if !w.degraded {
				w.log.Warn("inotify watch limit reached (fs.inotify.max_user_watches); new directories are followed by rescans only",
					"every", w.cfg.Rescan, "dir", dir, "err", err)
			}
			w.degraded = true
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			w.log.Warn("watch directory", "dir", dir, "err", err)
		}
		return
	}
	w.watches[dir] = struct{}{}
}

// rescan lists every root, watches every directory, and visits every file
// found or known. Files whose stat is unchanged since their last read are
// skipped in visit.
func (w *Watcher) rescan(ctx context.Context, sink Sink) {
	found := make(map[string]struct{})
	w.scanned = make(map[string]struct{})
	for _, r := range w.cfg.Roots {
		w.scanDir(r.Dir, r.Recursive, found)
		if _, err := os.Stat(r.Dir); errors.Is(err, fs.ErrNotExist) {
			// Watch the parent so the root's creation is noticed at once.
			w.watch(filepath.Dir(r.Dir))
		}
	}
	// A problem path is looked at again, so one that went away is
	// cleared: a file through visitFile, a folder by this scan.
	for _, p := range w.problemPaths() {
		if _, ok := w.scanned[p]; ok || w.isRoot(p) {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			continue // a folder listed by an earlier scan, not by this one: it left the roots' reach
		}
		found[p] = struct{}{}
	}
	w.scanned = nil
	w.mu.Lock()
	for p := range w.extra {
		found[p] = struct{}{}
	}
	w.mu.Unlock()
	for p := range w.files {
		found[p] = struct{}{}
	}
	for p := range w.watches {
		if _, err := os.Stat(p); err != nil {
			delete(w.watches, p) // inotify dropped it with the directory
		}
	}
	paths := make([]string, 0, len(found))
	for p := range found {
		paths = append(paths, p)
		if st := w.files[p]; st == nil {
			// Size the backlog before reading, so progress is known early.
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				w.files[p] = &fileState{cur: Cursor{Path: p, ID: fileID(fi)}, size: fi.Size()}
			}
		}
	}
	slices.Sort(paths)
	if !w.visitAll(ctx, paths, sink) { // group.go
		return
	}
	w.mu.Lock()
	w.status.LastRescan = time.Now()
	w.mu.Unlock()
}

// scanDir watches dir (and, if recursive, every directory below it) and adds
// its *.jsonl files to found. The watch is added before listing, so a file
// created in between is seen by one or the other.
func (w *Watcher) scanDir(dir string, recursive bool, found map[string]struct{}) {
	w.watch(dir)
	if w.scanned != nil {
		w.scanned[dir] = struct{}{}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist) && w.isRoot(dir):
			w.setProblem(dir, FolderMissing, "session folder "+dir+" does not exist; bindery watches for it to appear")
		case errors.Is(err, fs.ErrNotExist):
			w.clearProblem(dir)
		default:
			w.setProblem(dir, FolderUnreadable, "cannot list session folder: "+err.Error())
		}
		return
	}
	w.clearProblem(dir, FolderMissing, FolderUnreadable)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if recursive {
				w.scanDir(p, true, found)
			}
		case strings.HasSuffix(e.Name(), ".jsonl"):
			found[p] = struct{}{}
		}
	}
}

// visit handles one dirty path from an event: a directory that appeared, a
// file that changed, or a path that vanished.
func (w *Watcher) visit(ctx context.Context, path string, sink Sink) {
	fi, err := os.Lstat(path)
	if err == nil && fi.IsDir() {
		// The event may be a directory deleted and created again: inotify
		// dropped the old watch, so add it afresh.
		delete(w.watches, path)
		if w.dirWanted(path) {
			found := make(map[string]struct{})
			w.scanDir(path, w.recursiveAt(path), found)
			for p := range found {
				w.visitFile(ctx, p, sink)
			}
		}
		return
	}
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		if _, ok := w.watches[path]; ok {
			delete(w.watches, path)
		}
		// A removed directory: every file known below it is gone too.
		prefix := path + string(filepath.Separator)
		for p := range w.files {
			if strings.HasPrefix(p, prefix) {
				w.visitFile(ctx, p, sink)
			}
		}
		// A root created after start whose parent we watched.
	}
	if w.isRoot(path) {
		found := make(map[string]struct{})
		w.scanDir(path, w.recursiveAt(path), found)
		for p := range found {
			w.visitFile(ctx, p, sink)
		}
		return
	}
	if w.wanted(path) {
		w.visitFile(ctx, path, sink)
	}
}

func (w *Watcher) isRoot(dir string) bool {
	for _, r := range w.cfg.Roots {
		if r.Dir == dir {
			return true
		}
	}
	return false
}

func (w *Watcher) recursiveAt(dir string) bool {
	for _, r := range w.cfg.Roots {
		if r.Recursive && (dir == r.Dir || strings.HasPrefix(dir, r.Dir+string(filepath.Separator))) {
			return true
		}
	}
	return false
}

// visitFile brings one file's cursor up to date, calling sink for each
// batch. Errors are logged and retried with backoff; nothing is lost.
func (w *Watcher) visitFile(ctx context.Context, path string, sink Sink) {
	w.mu.Lock()
	_, extra := w.extra[path]
	w.mu.Unlock()
	if extra {
		w.watch(filepath.Dir(path))
	}
	st := w.files[path]
	if st != nil && !st.retryAt.IsZero() && time.Now().Before(st.retryAt) {
		return // backing off; the retry timer brings it back
	}
	if w.afterVisit != nil {
		defer w.afterVisit(path)
	}
	if err := w.follow(ctx, path, sink); err != nil {
		if ctx.Err() != nil {
			return
		}
		st = w.files[path]
		if st == nil {
			return
		}
		st.failures++
		delay := min(w.cfg.RetryMin<<min(st.failures-1, 16), w.cfg.RetryMax)
		st.retryAt = time.Now().Add(delay)
		level := slog.LevelWarn
		if st.failures > 3 {
			level = slog.LevelDebug // keep a stuck sink from flooding the log
		}
		w.log.Log(ctx, level, "ingest failed; will retry", "path", path, "retryIn", delay, "failures", st.failures, "err", err)
		return
	}
	if st = w.files[path]; st != nil {
		st.failures, st.retryAt = 0, time.Time{}
	}
}

func (w *Watcher) follow(ctx context.Context, path string, sink Sink) error {
	st := w.files[path]
	f, fi, err := openRegular(path)
	if err != nil {
		nr, special := errors.AsType[*notRegularError](err)
		switch {
		case special:
			w.setProblem(path, NotRegular, nr.reason())
		case errors.Is(err, fs.ErrNotExist):
			w.clearProblem(path)
		default:
			w.setProblem(path, Unreadable, err.Error())
			return fmt.Errorf("open %s: %w", path, err)
		}
		// Gone, or replaced by something bindery does not read: the file
		// that was here is gone.
		if st == nil {
			return nil
		}
		if st.found {
			if err := sink(ctx, Batch{Kind: Removed, Path: path, Cursor: Cursor{Path: path, ID: st.cur.ID}}); err != nil {
				return fmt.Errorf("removed %s: %w", path, err)
			}
		}
		delete(w.files, path)
		return nil
	}
	defer f.Close()
	// It opened: a regular file bindery can read. Cleared before the read
	// hands its lines to the sink, so whoever sees them ingested never
	// sees the file still listed as unreadable.
	w.clearProblem(path, NotRegular, Unreadable)
	if err := w.read(ctx, path, f, fi, sink); err != nil {
		if _, stored := errors.AsType[*sinkError](err); !stored {
			w.setProblem(path, Unreadable, err.Error())
		}
		return err
	}
	if st := w.files[path]; st != nil && st.long != nil {
		l := st.long
		w.setProblem(path, LongLine, fmt.Sprintf("line %d at offset %d is longer than %d bytes and has no newline yet (%d bytes so far): skipped, and the file is read no further until it ends",
			l.line, l.start, w.cfg.MaxLineBytes, l.scanned-l.start))
	} else {
		w.clearProblem(path, LongLine)
	}
	return nil
}

// sinkError is a batch the sink refused: the file was read, the store
// failed (and says so itself); not a problem with the file.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// read brings the cursor of path, open as f, up to date.
func (w *Watcher) read(ctx context.Context, path string, f *os.File, fi os.FileInfo, sink Sink) error {
	st := w.files[path]
	var err error
	key := statKey{id: fileID(fi), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st != nil {
		st.size = key.size
	}

	if st != nil && st.found && st.cur.ID != key.id && st.cur.ID != (FileID{}) {
		// Another file now lives at this path (deleted and recreated, or
		// renamed into place): the old one is gone.
		if err := sink(ctx, Batch{Kind: Removed, Path: path, Cursor: Cursor{Path: path, ID: st.cur.ID}}); err != nil {
			return &sinkError{fmt.Errorf("replaced %s: %w", path, err)}
		}
		st = nil
		delete(w.files, path)
	}
	if st != nil && st.long != nil && (key.size < st.long.scanned || st.long.start != st.cur.Offset) {
		st.long = nil // truncated, or the cursor moved: scan the line afresh
	}
	if st == nil {
		st = &fileState{cur: Cursor{Path: path, ID: key.id}, size: key.size}
		w.files[path] = st
	}
	if st.found && st.seen == key {
		return nil // unchanged since it was last read to EOF
	}

	kind := Grew
	var prevTail []byte
	if !st.found {
		kind = Found
		st.cur = Cursor{Path: path, ID: key.id}
		st.chk = fileCheck{}
	} else if st.cur.Offset > 0 {
		ok := st.cur.Check != nil
		if ok {
			ok, prevTail, err = st.chk.verify(f, st.cur.Offset, key.size, w.rd.scratch)
			if err != nil {
				return fmt.Errorf("verify %s: %w", path, err)
			}
		}
		if !ok {
			kind = Rewritten
			prevTail = nil
			st.long = nil
		}
	}
	if st.cur.ID == (FileID{}) {
		st.cur.ID = key.id
	}

	cur, chk := st.cur, st.chk
	if kind == Rewritten {
		cur = Cursor{Path: path, ID: key.id}
		chk = fileCheck{}
	}
	var eof bool
	for {
		var b Batch
		var next Cursor
		var nextChk fileCheck
		var long *longLine
		b, next, nextChk, eof, long, err = w.rd.readBatch(f, cur, chk, prevTail, st.long)
		if err != nil {
			return err
		}
		progressed := next.Offset != cur.Offset
		// A file with no complete line yet is not announced, unless an
		// overlong line's error is to be recorded; a rewrite is always
		// announced, even to an empty file, so the sink forgets the old
		// content.
		if progressed || kind == Rewritten || len(b.Errors) > 0 {
			b.Kind = kind
			b.Path = path
			if !progressed {
				b.Cursor = cur
				next = cur
			}
			if err := sink(ctx, b); err != nil {
				return &sinkError{fmt.Errorf("ingest %s: %w", path, err)}
			}
			w.beat.Store(time.Now().UnixNano())
			st.cur, st.chk, st.found = next, nextChk, true
			cur, chk, kind = next, nextChk, Grew
			prevTail = w.rd.tail.buf // reset copies it onto itself: no clone needed
		}
		// Only now: a refused batch is read again with its long line's error.
		st.long = long
		if eof || !progressed {
			break
		}
	}
	if !eof {
		// Stopped at the batch bound inside an overlong line: come back
		// after the other dirty files (and a look at ctx), not now.
		w.markDirty(path)
		st.seen = statKey{}
		return nil
	}
	// Remember the stat only if nothing arrived while reading.
	if fi2, err := f.Stat(); err == nil && fi2.Size() == key.size && fi2.ModTime().UnixNano() == key.mtime {
		st.seen = key
	} else {
		st.seen = statKey{}
	}
	return nil
}
