package daemon

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
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
type Journal struct {
	DB        *db.DB
	Hub       *api.Hub
	Retention db.EventRetention // applied every pruneEvery commits and by Prune
	Logger    *slog.Logger

	mu      sync.Mutex
	commits int
}

// Emit appends one event to the transaction in progress.
type Emit func(typ, conversation string, fields any) error

const journalPruneEvery = 512

// Write runs fn in one write transaction; the events fn emits are
// committed with it and published after the commit.
func (j *Journal) Write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, emit Emit) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var evs []db.Event
	err := j.DB.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		evs = evs[:0]
		emit := func(typ, conversation string, fields any) error {
			e, err := db.AppendEvent(ctx, tx, typ, conversation, fields)
			if err != nil {
				return err
			}
			evs = append(evs, e)
			return nil
		}
		if err := fn(ctx, tx, emit); err != nil {
			return err
		}
		j.commits++
		if j.commits%journalPruneEvery == 0 && (j.Retention.MaxAge > 0 || j.Retention.MaxCount > 0) {
			if _, err := db.PruneEvents(ctx, tx, j.Retention, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.publish(evs)
	return nil
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
	err := j.Write(ctx, func(ctx context.Context, tx *sql.Tx, _ Emit) error {
		var err error
		n, err = db.PruneEvents(ctx, tx, j.Retention, time.Now())
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
