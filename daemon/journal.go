package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// Journal is the one way a durable change and the events describing it
// reach the disk and the feed: one transaction commits both (fsynced),
// then the events are published, all under one lock, so the feed sees
// events in exactly their seq order and never an event whose change could
// still roll back. Every writer that emits events goes through it (the
// binding calls and session ingest alike).
//
// Concurrent Writes are group-committed: whoever finds the journal idle
// commits everything queued so far in one transaction (each call in its
// own savepoint, so one call's error undoes only its own work) and one
// fsync, so sixteen hosts accepting at once wait for one disk flush, not
// sixteen in a row.
//
// Sixteen accepts that arrive together reach the queue one after another
// (each first reads its request and decides), so a group that formed
// only from calls already queued would commit the first alone and make
// the rest wait a flush for it. So a synced write the caller is about to
// make can be announced (Expect) before the work that precedes it, and a
// synced group stays open while announced writes are still to come: it
// runs each call as it queues, inside the open transaction, so the
// group's database work overlaps the work of the calls still coming
// instead of following all of it, and commits once none is announced
// (after yielding the processor, so calls already running reach the
// queue or announce themselves), or once it has been open as long as a
// synced commit takes (Gather): past that, committing now and the
// latecomers in the next group costs less than the wait. A lone writer
// neither yields more than once nor waits.
type Journal struct {
	DB        *db.DB
	Hub       *api.Hub
	Retention db.EventRetention // applied every journalPruneEvery commits and by Prune
	Logger    *slog.Logger
	// Gather bounds how long a commit waits for announced writes (Expect)
	// to queue. Zero: as long as the last synced commit took, at most
	// maxGather.
	Gather time.Duration

	mu      sync.Mutex // held while a transaction is open, commits and its events publish
	commits int

	smu   sync.Mutex   // not mu: Stats does not wait for an open group
	stats JournalStats // guarded by smu

	qmu      sync.Mutex
	queue    []*journalWrite
	draining bool
	expected int           // announced writes not yet queued nor withdrawn (qmu)
	arrived  chan struct{} // signalled (never blocking) when a write queues or one is withdrawn
	lastSync time.Duration // how long the last synced commit took, its calls already run (qmu)
}

// maxGather caps how long a group stays open for announced writes: a disk whose
// flush takes longer than this is not made to wait longer still.
const maxGather = 5 * time.Millisecond

// maxYields bounds the yields before an open group commits: it yields
// again only while the last yield brought more calls.
const maxYields = 8

// Expected is a write announced to the journal (Expect). Its owner calls
// Write once, or Withdraw if it will not write after all; either ends the
// announcement. It belongs to one goroutine.
type Expected struct {
	j    *Journal
	open bool
}

// Expect announces a synced Write the caller is about to make, after work
// that does not wait for anything (no lock, no I/O): an open synced group
// stays open for it (Gather), so it shares that group's fsync instead of
// waiting for the next one. Call it only that close to the write: the
// wait is bounded, but an announced write that is slow to come holds
// every other write back for the bound.
func (j *Journal) Expect() *Expected {
	j.qmu.Lock()
	j.expected++
	j.qmu.Unlock()
	return &Expected{j: j, open: true}
}

// Write is the announced write: Journal.Write, ending the announcement.
func (e *Expected) Write(ctx context.Context, fn func(ctx context.Context, tx *db.Tx, emit Emit) error) error {
	if !e.open {
		return e.j.Write(ctx, fn)
	}
	e.open = false
	return e.j.enqueue(ctx, db.Synced, fn, true)
}

// Withdraw ends the announcement without writing; a no-op after Write or
// Withdraw.
func (e *Expected) Withdraw() {
	if !e.open {
		return
	}
	e.open = false
	e.j.qmu.Lock()
	e.j.expected--
	ch := e.j.arrivedLocked()
	e.j.qmu.Unlock()
	signal(ch)
}

// arrivedLocked is the channel an open group waits on (qmu held).
func (j *Journal) arrivedLocked() chan struct{} {
	if j.arrived == nil {
		j.arrived = make(chan struct{}, 1)
	}
	return j.arrived
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// JournalStats counts what the journal committed: calls (Writes), the
// transactions they shared (Commits) and how many of those were synced
// (Synced, one fsync each), so a benchmark or a test sees whether
// concurrent writes really share commits.
type JournalStats struct {
	Writes, Commits, Synced int64
}

// Sub is s minus an earlier reading.
func (s JournalStats) Sub(earlier JournalStats) JournalStats {
	return JournalStats{Writes: s.Writes - earlier.Writes, Commits: s.Commits - earlier.Commits, Synced: s.Synced - earlier.Synced}
}

// Stats reads the counts so far.
func (j *Journal) Stats() JournalStats {
	j.smu.Lock()
	defer j.smu.Unlock()
	return j.stats
}

// Emit appends one event to the transaction in progress.
type Emit func(typ, conversation string, fields any) error

type journalWrite struct {
	ctx  context.Context
	dur  db.Durability
	fn   func(ctx context.Context, tx *db.Tx, emit Emit) error
	err  error
	done chan struct{}
}

const journalPruneEvery = 512

// maxGroup bounds how many calls share one transaction.
const maxGroup = 64

// Write runs fn in a write transaction; the events fn emits are committed
// with it and published after the commit. fn may run in a transaction
// shared with other calls; it must only use tx and its own variables, and
// may run again never (it runs exactly once). Its commit is on disk
// before Write returns.
func (j *Journal) Write(ctx context.Context, fn func(ctx context.Context, tx *db.Tx, emit Emit) error) error {
	return j.write(ctx, db.Synced, fn)
}

// WriteDeferred is Write without the fsync (db.Deferred): the commit reaches
// the disk with the next Write's, which is how a turn's compile record and
// its accept cost one fsync between them. A crash of the daemon loses
// nothing of it; a power loss before the next Write can (README, "What a
// power loss can cost").
func (j *Journal) WriteDeferred(ctx context.Context, fn func(ctx context.Context, tx *db.Tx, emit Emit) error) error {
	return j.write(ctx, db.Deferred, fn)
}

func (j *Journal) write(ctx context.Context, dur db.Durability, fn func(ctx context.Context, tx *db.Tx, emit Emit) error) error {
	return j.enqueue(ctx, dur, fn, false)
}

// enqueue queues one write (announced: it ends an Expect) and waits for
// its commit, committing it (and whatever queued with it) itself when the
// journal is idle.
func (j *Journal) enqueue(ctx context.Context, dur db.Durability, fn func(ctx context.Context, tx *db.Tx, emit Emit) error, announced bool) error {
	w := &journalWrite{ctx: ctx, dur: dur, fn: fn, done: make(chan struct{})}
	j.qmu.Lock()
	j.queue = append(j.queue, w)
	if announced {
		j.expected--
	}
	lead := !j.draining
	j.draining = true
	ch := j.arrivedLocked()
	j.qmu.Unlock()
	if !lead {
		signal(ch) // a commit may be gathering
	}
	if lead {
		j.drain()
	}
	<-w.done
	return w.err
}

// drain commits queued writes in groups until the queue is empty. The
// caller that started it returns as soon as its own group is committed:
// a further group is handed to a new goroutine.
func (j *Journal) drain() {
	j.qmu.Lock()
	n := min(len(j.queue), maxGroup)
	first := append([]*journalWrite(nil), j.queue[:n]...)
	j.queue = j.queue[n:]
	j.qmu.Unlock()

	j.commitGroup(first)

	j.qmu.Lock()
	more := len(j.queue) > 0
	if !more {
		j.draining = false
	}
	j.qmu.Unlock()
	if more {
		go j.drain()
	}
}

// gatherBound is how long a synced group stays open for announced writes
// (Gather; zero: the last synced commit's time, at most maxGather).
func (j *Journal) gatherBound() time.Duration {
	if j.Gather > 0 {
		return j.Gather
	}
	j.qmu.Lock()
	bound := min(j.lastSync, maxGather)
	j.qmu.Unlock()
	if bound <= 0 {
		bound = time.Millisecond // no synced commit measured yet
	}
	return bound
}

// next is what joins the open group (of durability dur, room more calls
// at most): the writes queued meanwhile, else, for a synced group, the
// announced writes as they queue, until deadline. Nothing: the group
// commits. It yields the processor first (at most maxYields times, while
// that brings calls), so calls already running reach the queue or
// announce themselves; a lone writer yields once and waits for nothing.
//
// A deferred group takes deferred writes only: its commit is not synced,
// so a synced write waits for the next group.
func (j *Journal) next(dur db.Durability, room int, deadline time.Time) []*journalWrite {
	j.qmu.Lock()
	defer j.qmu.Unlock()
	if room <= 0 {
		return nil
	}
	take := func() []*journalWrite {
		n := 0
		for n < len(j.queue) && n < room && (dur == db.Synced || j.queue[n].dur == db.Deferred) {
			n++
		}
		out := append([]*journalWrite(nil), j.queue[:n]...)
		j.queue = j.queue[n:]
		return out
	}
	for range maxYields {
		if len(j.queue) > 0 {
			return take()
		}
		n := j.expected
		j.qmu.Unlock()
		runtime.Gosched()
		j.qmu.Lock()
		if len(j.queue) == 0 && j.expected == n {
			break
		}
	}
	if len(j.queue) > 0 || dur != db.Synced {
		return take()
	}
	wait := time.Until(deadline)
	if j.expected <= 0 || wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	ch := j.arrivedLocked()
	for len(j.queue) == 0 && j.expected > 0 {
		j.qmu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			j.qmu.Lock()
			return take()
		}
		j.qmu.Lock()
	}
	return take()
}

// commitGroup runs first and whatever joins it (next) in one transaction
// and commits it: the group is open while announced writes are still to
// queue, and each call runs as it arrives, so the transaction's work
// overlaps the work that precedes the calls still coming rather than
// following all of it.
func (j *Journal) commitGroup(first []*journalWrite) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var evs []db.Event
	// A call whose context ended before its turn is not run; the group's
	// transaction itself runs to its end (db.Write).
	ctx := context.Background()
	for _, w := range first {
		if w.ctx.Err() == nil {
			ctx = context.WithoutCancel(w.ctx)
			break
		}
	}
	// A group is synced when any of its first writes asks for it; later
	// ones join only a group that syncs them as they asked (next).
	dur := db.Deferred
	for _, w := range first {
		if w.dur == db.Synced {
			dur = db.Synced
		}
	}
	deadline := time.Now().Add(j.gatherBound())
	group := first
	var ran time.Time // when the group's calls had all run: its commit starts
	err := j.DB.WriteAs(ctx, dur, func(ctx context.Context, tx *db.Tx) error {
		evs = evs[:0]
		for i, batch := 0, first; len(batch) > 0; batch = j.next(dur, maxGroup-len(group), deadline) {
			if i > 0 {
				group = append(group, batch...)
			}
			for _, w := range batch {
				i++
				w.err = nil
				if err := w.ctx.Err(); err != nil {
					w.err = err
					continue
				}
				if i == 1 && len(first) == 1 {
					// The first call alone needs no savepoint: when it fails,
					// the transaction rolls back with nothing else in it.
					if w.err = w.run(ctx, tx, j.emitter(ctx, tx, &evs)); w.err != nil {
						return w.err
					}
					continue
				}
				start := len(evs)
				var err error
				w.err, err = tx.Savepoint(ctx, func() error { return w.run(ctx, tx, j.emitter(ctx, tx, &evs)) })
				if w.err != nil {
					evs = evs[:start]
				}
				if err != nil {
					return err
				}
			}
		}
		j.commits++
		if j.commits%journalPruneEvery == 0 && (j.Retention.MaxAge > 0 || j.Retention.MaxCount > 0) {
			if _, err := tx.PruneEvents(ctx, j.Retention, time.Now()); err != nil {
				return err
			}
		}
		ran = time.Now()
		return nil
	})
	if err != nil {
		for _, w := range group {
			if w.err == nil {
				w.err = err
			}
		}
		evs = nil
	} else {
		j.smu.Lock()
		j.stats.Commits++
		j.stats.Writes += int64(len(group))
		if dur == db.Synced {
			j.stats.Synced++
		}
		j.smu.Unlock()
		if dur == db.Synced {
			took := time.Since(ran)
			j.qmu.Lock()
			j.lastSync = took
			j.qmu.Unlock()
		}
	}
	j.publish(evs)
	for _, w := range group {
		close(w.done)
	}
}

// run calls fn, turning a panic into its error: a panic unwinding
// through the open transaction would leave it open on the only writer
// connection, the journal's lock held and its queue never drained, so
// every later write in the daemon would hang.
func (w *journalWrite) run(ctx context.Context, tx *db.Tx, emit Emit) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("journal write panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return w.fn(ctx, tx, emit)
}

func (j *Journal) emitter(ctx context.Context, tx *db.Tx, evs *[]db.Event) Emit {
	return func(typ, conversation string, fields any) error {
		e, err := tx.AppendEvent(ctx, typ, conversation, fields)
		if err != nil {
			return err
		}
		*evs = append(*evs, e)
		return nil
	}
}

// Ingest applies a watcher batch (db.Ingest) and publishes its session
// events, in order with every other journal write.
func (j *Journal) Ingest(ctx context.Context, b db.Batch) (db.Ingested, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ing, err := j.DB.Ingest(ctx, b)
	if err != nil {
		return ing, err
	}
	j.publish(ing.Events)
	return ing, nil
}

// IngestAll applies several batches in one transaction (db.IngestAll) and
// publishes their events.
func (j *Journal) IngestAll(ctx context.Context, bs []db.Batch) ([]db.Ingested, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ings, err := j.DB.IngestAll(ctx, bs)
	if err != nil {
		return ings, err
	}
	for _, ing := range ings {
		j.publish(ing.Events)
	}
	return ings, nil
}

// Prune applies the retention now (the daemon calls it periodically, so
// an idle log still ages out).
func (j *Journal) Prune(ctx context.Context) (int64, error) {
	if j.Retention.MaxAge <= 0 && j.Retention.MaxCount <= 0 {
		return 0, nil
	}
	var n int64
	err := j.Write(ctx, func(ctx context.Context, tx *db.Tx, _ Emit) error {
		var err error
		n, err = tx.PruneEvents(ctx, j.Retention, time.Now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return n, nil
}

// RunPruner prunes every interval until ctx ends.
func (j *Journal) RunPruner(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := j.Prune(ctx); err != nil && ctx.Err() == nil && j.Logger != nil {
				j.Logger.Error("event log", "err", err)
			}
		}
	}
}

func (j *Journal) publish(evs []db.Event) {
	if j.Hub == nil || len(evs) == 0 {
		return
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = apiEvent(e)
	}
	j.Hub.Publish(out...)
}

func apiEvent(e db.Event) api.Event {
	return api.Event{Seq: e.Seq, Time: e.Time, Type: e.Type, Conversation: e.Conversation, Fields: e.Fields}
}

// EventLog serves the feed's backlog from the database.
type EventLog struct{ DB *db.DB }

// EventBounds implements api.EventLog.
func (l EventLog) EventBounds(ctx context.Context) (int64, int64, error) {
	return l.DB.EventBounds(ctx)
}

// EventsAfter implements api.EventLog.
func (l EventLog) EventsAfter(ctx context.Context, after int64, conversation string, limit int) ([]api.Event, error) {
	evs, _, err := l.DB.EventsSince(ctx, after, conversation, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		out[i] = apiEvent(e)
	}
	return out, nil
}
