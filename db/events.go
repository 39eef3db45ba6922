package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Event types this package writes (api.md, GET /v1/events).
const (
	EventSession     = "session"      // change (found|grew|rewritten|removed), file, entries, offset
	EventIngestError = "ingest-error" // file, line, offset, reason
	EventStamp       = "stamp"        // entry, source "link", linked: stamps linked to the entry that holds them
)

// Event is one row of the event log.
type Event struct {
	Seq          int64
	Time         time.Time
	Type         string
	Conversation string
	Fields       json.RawMessage // a JSON object
}

// AppendEvent writes an event inside the caller's write transaction, so
// the event is durable exactly when the change it describes is. fields is
// marshalled to a JSON object (a json.RawMessage is taken as is).
func (t *Tx) AppendEvent(ctx context.Context, typ, conversation string, fields any) (Event, error) {
	return appendEvent(ctx, t.tx, typ, conversation, fields)
}

func appendEvent(ctx context.Context, tx *sql.Tx, typ, conversation string, fields any) (Event, error) {
	var raw []byte
	switch f := fields.(type) {
	case nil:
		raw = []byte("{}")
	case json.RawMessage:
		raw = f
	default:
		var err error
		if raw, err = json.Marshal(f); err != nil {
			return Event{}, fmt.Errorf("event %s: %w", typ, err)
		}
	}
	now := time.Now()
	ev := Event{Time: now, Type: typ, Conversation: conversation, Fields: raw}
	// Exec and LastInsertId (seq is the rowid), not RETURNING: a query's
	// row machinery costs more than the insert on every evented write.
	res, err := txExec(ctx, tx, sqlAppendEvent, now.UnixMilli(), typ, conversation, string(raw))
	if err == nil {
		ev.Seq, err = res.LastInsertId()
	}
	if err != nil {
		return Event{}, fmt.Errorf("append %s event: %w", typ, err)
	}
	// The log is bounded by PruneEvents, under the configured retention
	// (count and age), which the daemon's journal applies.
	return ev, nil
}

// EventsSince returns up to limit events with seq > since, oldest first,
// optionally only those of one conversation, and the oldest seq the log
// still holds (0 when it is empty), so a caller can tell what was pruned.
func (d *DB) EventsSince(ctx context.Context, since int64, conversation string, limit int) (events []Event, oldest int64, err error) {
	if err := d.readers.QueryRowContext(ctx, `SELECT coalesce(min(seq), 0) FROM events`).Scan(&oldest); err != nil {
		return nil, 0, fmt.Errorf("events: %w", err)
	}
	q := `SELECT seq, time_ms, type, conversation, fields FROM events WHERE seq > ? ORDER BY seq LIMIT ?`
	args := []any{since, limit}
	if conversation != "" {
		q = `SELECT seq, time_ms, type, conversation, fields FROM events WHERE conversation = ? AND seq > ? ORDER BY seq LIMIT ?`
		args = []any{conversation, since, limit}
	}
	rows, err := d.readers.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Event
		var ms int64
		var fields string
		if err := rows.Scan(&e.Seq, &ms, &e.Type, &e.Conversation, &fields); err != nil {
			return nil, 0, fmt.Errorf("events: %w", err)
		}
		e.Time = time.UnixMilli(ms)
		e.Fields = json.RawMessage(fields)
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("events: %w", err)
	}
	return events, oldest, nil
}
