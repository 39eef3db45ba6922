package watcher

import (
	"context"
	"log/slog"
	"time"
)

// A cold start over an archive of many small sessions committed once per
// file: a transaction and an fsync for every few hundred KB. The first
// scan instead hands Config.Group the files it read whole, in one batch
// each, several at a time (up to MaxBatchBytes of lines together, as one
// large file's batch would be): one commit for the group. Each file's
// rows and its cursor still go in together, since the group commits
// whole or not at all, and no cursor moves before it has.

// GroupSink receives several batches, of different files, to commit in
// one transaction: it must return nil only once all of them are durable,
// and on any error none of them may be.
type GroupSink func(context.Context, []Batch) error

// maxGroupFiles bounds the files in one group (their session events and
// per-file statements in one transaction).
const maxGroupFiles = 256

// grouper holds the first scan's batches not yet handed to the group sink.
type grouper struct {
	sink    GroupSink
	batches []Batch
	looks   []groupedLook
	bytes   int64
}

// groupedLook is what reading one file to EOF found, applied to its state
// only once its batch is committed.
type groupedLook struct {
	st      *fileState
	next    Cursor
	nextChk fileCheck
	seen    statKey // the stat to remember, zero if the file changed while read
}

// groupable reports whether a batch of lines bytes can join the group:
// only while the first scan groups, and only a file read whole in one
// batch (a larger one goes batch by batch, as always).
func (w *Watcher) groupable(lines int64) bool {
	return w.group != nil && lines < int64(w.cfg.MaxBatchBytes)
}

// addToGroup queues b, committing the group first if b would overflow it.
func (w *Watcher) addToGroup(ctx context.Context, sink Sink, b Batch, lines int64, look groupedLook) {
	g := w.group
	if len(g.batches) > 0 && (g.bytes+lines > int64(w.cfg.MaxBatchBytes) || len(g.batches) >= maxGroupFiles) {
		w.flushGroup(ctx, sink)
	}
	g.batches = append(g.batches, b)
	g.looks = append(g.looks, look)
	g.bytes += lines
}

// flushGroup commits the queued batches in one call of the group sink and
// then moves their cursors. If the group fails, each batch is offered to
// sink on its own, so one file the store refuses (and retries with
// backoff) holds back no other.
func (w *Watcher) flushGroup(ctx context.Context, sink Sink) {
	g := w.group
	if g == nil || len(g.batches) == 0 {
		return
	}
	batches, looks := g.batches, g.looks
	g.batches, g.looks, g.bytes = nil, nil, 0
	err := g.sink(ctx, batches)
	w.beat.Store(time.Now().UnixNano())
	if err == nil {
		for _, l := range looks {
			l.commit()
		}
		return
	}
	if ctx.Err() != nil {
		return // nothing moved: the files are read again after a restart
	}
	w.log.Debug("group ingest failed; ingesting its files one by one", "files", len(batches), "err", err)
	for i, b := range batches {
		if err := sink(ctx, b); err != nil {
			if ctx.Err() != nil {
				return
			}
			w.failed(ctx, b.Path, &sinkError{err})
			continue
		}
		w.beat.Store(time.Now().UnixNano())
		looks[i].commit()
	}
}

func (l groupedLook) commit() {
	l.st.cur, l.st.chk, l.st.found = l.next, l.nextChk, true
	l.st.seen = l.seen
}

// failed schedules a retry of path after an error, with backoff.
func (w *Watcher) failed(ctx context.Context, path string, err error) {
	st := w.files[path]
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
}
