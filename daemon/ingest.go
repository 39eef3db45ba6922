package daemon

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// ingester is the watcher's sink: every batch and its cursor go into the
// database in one transaction before the watcher may move on.
type ingester struct {
	db       *db.DB
	progress func(Progress)
	// published is called with the events a batch committed, in seq order,
	// right after the commit (the event hub hangs here).
	published func([]db.Event)
	// journal, when set, commits batches so their events are published in
	// seq order with the binding calls' (it replaces published); attribute
	// then runs with each committed batch (attribute.go).
	journal   *Journal
	attribute func(context.Context, db.Batch, db.Ingested) error

	mu      sync.Mutex
	offsets map[string]int64 // path -> ingested bytes, for progress

	done       atomic.Int64 // bytes ingested since start
	total      atomic.Int64 // bytes to ingest found at start
	lastIngest atomic.Int64 // unix ms of the last committed batch
	finished   atomic.Bool  // the first full scan is over
}

func newIngester(store *db.DB, saved []db.Cursor, progress func(Progress)) *ingester {
	in := &ingester{db: store, progress: progress, offsets: make(map[string]int64, len(saved))}
	for _, c := range saved {
		in.offsets[c.Path] = c.Offset
	}
	return in
}

// measure sums what the session folders hold beyond the saved offsets:
// the total the first ingest has to read (for the progress bar).
func (in *ingester) measure(roots []Root) {
	var total int64
	for _, r := range roots {
		filepath.WalkDir(r.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if p != r.Dir && !r.Recursive {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".jsonl") {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				total += max(0, fi.Size()-in.offsets[p])
			}
			return nil
		})
	}
	in.total.Store(total)
}

func (in *ingester) sink(ctx context.Context, b watcher.Batch) error {
	batch := dbBatch(b)
	var res db.Ingested
	var err error
	if in.journal != nil {
		res, err = in.journal.Ingest(ctx, batch)
	} else {
		res, err = in.db.Ingest(ctx, batch)
	}
	if err != nil {
		return err
	}
	in.committed(ctx, b, batch, res)
	in.report()
	return nil
}

// sinkGroup is the watcher's GroupSink: the first batches of several new
// files (a first scan) in one transaction and one fsync, each then followed
// up as sink follows up one.
func (in *ingester) sinkGroup(ctx context.Context, bs []watcher.Batch) error {
	batches := make([]db.Batch, len(bs))
	for i := range bs {
		if p, ok := bs[i].Prepared.(*db.Batch); ok {
			batches[i] = *p
		} else {
			batches[i] = dbBatch(bs[i])
		}
	}
	var res []db.Ingested
	var err error
	if in.journal != nil {
		res, err = in.journal.IngestAll(ctx, batches)
	} else {
		res, err = in.db.IngestAll(ctx, batches)
	}
	if err != nil {
		return err
	}
	for i := range bs {
		in.committed(ctx, bs[i], batches[i], res[i])
	}
	in.report()
	return nil
}

// prepare is the watcher's Prepare: a group's batch converted, and what
// its ingest needs no database for done (db.PrepareBatch), on the
// goroutine reading the group ahead rather than on the writer's.
func (in *ingester) prepare(b watcher.Batch) any {
	batch := dbBatch(b)
	in.db.PrepareBatch(&batch)
	return &batch
}

// committed follows up a batch whose commit returned: attribution, the
// progress counters, and (without a journal) the events.
func (in *ingester) committed(ctx context.Context, b watcher.Batch, batch db.Batch, res db.Ingested) {
	if in.attribute != nil {
		// Not fatal to ingest: the batch is committed, and a reply bindery
		// cannot attribute is stripped later (safe). attribute logs it.
		in.attribute(ctx, batch, res)
	}
	in.lastIngest.Store(time.Now().UnixMilli())
	in.mu.Lock()
	prev := in.offsets[b.Path]
	switch b.Kind {
	case watcher.Removed:
		delete(in.offsets, b.Path)
	case watcher.Rewritten, watcher.Found:
		prev = 0
		fallthrough
	default:
		in.offsets[b.Path] = b.Cursor.Offset
	}
	in.mu.Unlock()
	if b.Kind != watcher.Removed {
		in.done.Add(max(0, b.Cursor.Offset-prev))
	}
	if in.journal == nil && in.published != nil && len(res.Events) > 0 {
		in.published(res.Events)
	}
}

func (in *ingester) report() {
	if in.progress == nil {
		return
	}
	done, total := in.done.Load(), in.total.Load()
	in.progress(Progress{Done: min(done, total), Total: total, Finished: in.finished.Load()})
}

// dbBatch converts the watcher's batch into the store's. The two packages
// do not import each other; this is the only place they meet.
func dbBatch(b watcher.Batch) db.Batch {
	out := db.Batch{
		Kind: db.BatchKind(b.Kind),
		Path: b.Path,
		Cursor: db.Cursor{Path: b.Cursor.Path, Dev: b.Cursor.ID.Dev, Ino: b.Cursor.ID.Ino,
			Offset: b.Cursor.Offset, Lines: b.Cursor.Lines, Check: b.Cursor.Check},
	}
	if out.Path == "" {
		out.Path = b.Cursor.Path
	}
	if h := b.Header; h != nil {
		out.Header = &db.Header{ID: h.ID, Version: h.Version, Cwd: h.Cwd, Timestamp: h.Timestamp, ParentSession: h.ParentSession}
	}
	if len(b.Entries) > 0 {
		out.Entries = make([]db.Entry, len(b.Entries))
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		de := db.Entry{
			Line: e.Line, Offset: e.Offset, Length: e.Length, Type: e.Type, ID: e.ID, ParentID: e.ParentID,
			Timestamp: e.Timestamp, Role: e.Role, Model: e.Model, Provider: e.Provider, StopReason: e.StopReason,
			ToolCalls: e.ToolCalls, UserText: e.UserText, FirstKeptEntryID: e.FirstKeptEntryID, CustomType: e.CustomType,
			UsageKind: e.UsageKind, EditOmit: e.EditOmit,
		}
		if e.Type == "context_edit" {
			de.TargetID = e.TargetID
		}
		if e.CustomType == db.FrontierType {
			de.Data = e.Data
		}
		if u := e.Usage; u != nil {
			de.Usage = db.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, TotalTokens: u.TotalTokens,
				CacheWrite1h: u.CacheWrite1h, Reasoning: u.Reasoning}
			if c := u.Cost; c != nil {
				de.Usage.CostTotal, de.Usage.CostInput, de.Usage.CostOutput = c.Total, c.Input, c.Output
				de.Usage.CostCacheRead, de.Usage.CostCacheWrite = c.CacheRead, c.CacheWrite
			}
		}
		de.Thinking = dbThinking(e.Thinking)
		out.Entries[i] = de
	}
	for _, ie := range b.Errors {
		out.Errors = append(out.Errors, db.IngestError{Line: ie.Line, Offset: ie.Offset, Reason: ie.Reason})
	}
	return out
}

func watcherCursors(cs []db.Cursor) []watcher.Cursor {
	out := make([]watcher.Cursor, len(cs))
	for i, c := range cs {
		out[i] = watcher.Cursor{Path: c.Path, ID: watcher.FileID{Dev: c.Dev, Ino: c.Ino}, Offset: c.Offset, Lines: c.Lines, Check: c.Check}
	}
	return out
}

// lagBytes is what the live files hold beyond their saved offsets now.
func lagBytes(cs []db.Cursor) int64 {
	var lag int64
	for _, c := range cs {
		if fi, err := os.Stat(c.Path); err == nil {
			lag += max(0, fi.Size()-c.Offset)
		}
	}
	return lag
}

// dbThinking is an entry's thinking blocks as the store takes them (nil
// for none): the batch's, and a reply read again from its file (readReply).
func dbThinking(ts []watcher.ThinkingBlock) []db.Thinking {
	if len(ts) == 0 {
		return nil
	}
	out := make([]db.Thinking, len(ts))
	for j, t := range ts {
		out[j] = db.Thinking{Index: t.Index, Redacted: t.Redacted, Signed: t.Signed, SigDigest: t.SigDigest, Chars: t.Chars}
	}
	return out
}
