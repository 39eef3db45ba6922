package watcher

import (
	"context"
	"time"
)

// A first scan of an archive meets thousands of files that are new and
// fit in one batch, and a sink call each is a transaction and an fsync
// each, which for small files costs more than their rows. With
// Config.GroupSink set, a rescan reads runs of such files whole and hands
// them to the sink together (at most MaxBatchBytes of files, and
// maxGroupFiles of them, in one call), and it reads the next run while the
// sink commits the last: the reads touch no watcher state (their own
// reader, their own open files), so on a machine with two cores the
// parsing hides behind the database instead of adding to it. What the
// sink can do without the database (Config.Prepare) is done there too.
//
// Anything unusual leaves the group and takes the ordinary way, one file
// at a time (visitFile), which finds and records what it is: a file that
// will not open, is not regular, grew past one batch while it was read,
// has no complete line or an overlong one, or was refused. A group the
// sink refuses is offered again file by file the same way, so one bad
// file fails alone, with its own error and backoff.

// GroupSink receives the Found batches of several files at once. It must
// return nil only once every batch and its Cursor are durable, and an
// error must mean none of them is (one transaction): the files are then
// read again and offered one at a time to the Sink.
type GroupSink func(context.Context, []Batch) error

// maxGroupFiles bounds the files of one group (a folder of tiny files).
const maxGroupFiles = 256

// coldFile is one file of a group as read ahead, before the sink has it.
type coldFile struct {
	path string
	key  statKey
	b    Batch
	next Cursor
	chk  fileCheck
	seen bool // the stat did not change while it was read
	ok   bool // read whole in one batch, with a complete line: it goes in the group
}

// groupable reports whether the rescan may read p ahead in a group: a file
// never handed to the sink, with no failure or overlong line behind it,
// whose size at the rescan's stat fits one batch.
func (w *Watcher) groupable(p string) bool {
	st := w.files[p]
	if st == nil || st.found || st.failures > 0 || !st.retryAt.IsZero() || st.long != nil ||
		st.size <= 0 || st.size > int64(w.cfg.MaxBatchBytes) {
		return false
	}
	w.mu.Lock()
	_, extra := w.extra[p]
	w.mu.Unlock()
	return !extra
}

// visitAll visits paths in order (a rescan), in groups when a GroupSink is
// set, and beats after each. It reports false when ctx stopped it first.
func (w *Watcher) visitAll(ctx context.Context, paths []string, sink Sink) bool {
	if w.cfg.GroupSink == nil {
		for _, p := range paths {
			if ctx.Err() != nil {
				return false
			}
			w.visitFile(ctx, p, sink)
			w.visited()
		}
		return true
	}
	i := 0
	// nextGroup takes the run of groupable paths at i, nil when paths[i]
	// is not one.
	nextGroup := func() []string {
		start, bytes := i, int64(0)
		for i < len(paths) && i-start < maxGroupFiles && w.groupable(paths[i]) {
			size := w.files[paths[i]].size
			if i > start && bytes+size > int64(w.cfg.MaxBatchBytes) {
				break
			}
			bytes += size
			i++
		}
		if i == start {
			return nil
		}
		return paths[start:i]
	}
	readAhead := func(ps []string) chan []coldFile {
		ch := make(chan []coldFile, 1)
		go func() { ch <- w.readCold(ps) }()
		return ch
	}
	var ahead chan []coldFile
	defer func() {
		if ahead != nil {
			<-ahead // its files are closed; nothing else to undo
		}
	}()
	for i < len(paths) || ahead != nil {
		if ctx.Err() != nil {
			return false
		}
		if ahead == nil {
			if ps := nextGroup(); ps != nil {
				ahead = readAhead(ps)
				continue
			}
			w.visitFile(ctx, paths[i], sink)
			i++
			w.visited()
			continue
		}
		files := <-ahead
		ahead = nil
		if ps := nextGroup(); ps != nil {
			ahead = readAhead(ps) // read while this group commits
		}
		if !w.sinkCold(ctx, files, sink) {
			return false
		}
	}
	return true
}

// visited beats and, now and then, publishes the status: after each file
// of a rescan.
func (w *Watcher) visited() {
	w.beat.Store(time.Now().UnixNano())
	if time.Since(w.lastPublish) > 100*time.Millisecond {
		w.publishStatus()
	}
}

// readCold opens and reads each of paths as a new file's first batch,
// with the cold reader (w.coldRd). It touches no other watcher state: it
// may run while Run's goroutine calls the sink, but never while another
// readCold runs.
//
// With Config.Prepare set, a batch's entries are Prepare's to take: it is
// handed to the sink with Prepared and without Entries, and the next file
// is parsed into the same entry slice.
func (w *Watcher) readCold(paths []string) []coldFile {
	rd := w.coldRd
	read0 := rd.read.Load()
	out := make([]coldFile, len(paths))
	for i, p := range paths {
		out[i].path = p
		f, fi, err := openRegular(p)
		if err != nil {
			continue // visitFile records why
		}
		cf := &out[i]
		cf.key = statKey{id: fileID(fi), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		cur := Cursor{Path: p, ID: cf.key.id}
		b, next, chk, eof, long, err := rd.readBatch(f, cur, fileCheck{}, nil, nil)
		if err == nil && eof && long == nil && next.Offset > cur.Offset {
			b.Kind, b.Path = Found, p
			if w.cfg.Prepare != nil {
				b.Prepared = w.cfg.Prepare(b)
				rd.entries, b.Entries = b.Entries[:0], nil
			}
			cf.b, cf.next, cf.chk, cf.ok = b, next, chk, true
			if fi2, err := f.Stat(); err == nil && fi2.Size() == cf.key.size && fi2.ModTime().UnixNano() == cf.key.mtime {
				cf.seen = true
			}
		}
		f.Close()
	}
	w.rd.read.Add(rd.read.Load() - read0) // tests count what the watcher read
	return out
}

// sinkCold hands a group read ahead to the GroupSink and, once it is
// durable, moves each file's state as read does after a sink; every file
// that could not go in the group, or of a group refused, is visited the
// ordinary way. It reports false when ctx stopped it first.
func (w *Watcher) sinkCold(ctx context.Context, files []coldFile, sink Sink) bool {
	var group []Batch
	for i := range files {
		if cf := &files[i]; cf.ok {
			// As follow: cleared before the lines reach the sink.
			w.clearProblem(cf.path, NotRegular, Unreadable)
			group = append(group, cf.b)
		}
	}
	var err error
	if len(group) > 0 {
		err = w.cfg.GroupSink(ctx, group)
		if err != nil && ctx.Err() == nil {
			w.log.Debug("group ingest failed; ingesting its files one at a time", "files", len(group), "err", err)
		}
	}
	for i := range files {
		if ctx.Err() != nil {
			return false
		}
		cf := &files[i]
		st := w.files[cf.path]
		if !cf.ok || err != nil || st == nil {
			w.visitFile(ctx, cf.path, sink)
		} else {
			st.size = cf.key.size
			st.cur, st.chk, st.found = cf.next, cf.chk, true
			st.long, st.failures, st.retryAt = nil, 0, time.Time{}
			st.seen = statKey{}
			if cf.seen {
				st.seen = cf.key
			}
			w.clearProblem(cf.path, LongLine)
			if w.afterVisit != nil {
				w.afterVisit(cf.path)
			}
		}
		w.visited()
	}
	return true
}
