package db

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// EventRow is one row of the durable event log (table events).
type EventRow struct {
	Seq          int64
	TimeMs       int64
	Type         string
	Conversation string
	Fields       []byte // a JSON object
}

// sqlQuerier is what both *sql.DB and *sql.Tx offer.
type sqlQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// AppendEvents inserts rows inside tx and sets each row's Seq. The caller
// publishes them only after tx commits, in seq order.
func AppendEvents(ctx context.Context, tx *sql.Tx, rows []EventRow) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO events (time_ms, type, conversation, fields) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	defer stmt.Close()
	for i := range rows {
		r := &rows[i]
		fields := r.Fields
		if len(fields) == 0 {
			fields = []byte("{}")
		}
		res, err := stmt.ExecContext(ctx, r.TimeMs, r.Type, r.Conversation, string(fields))
		if err != nil {
			return fmt.Errorf("append event %s: %w", r.Type, err)
		}
		if r.Seq, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("append event %s: %w", r.Type, err)
		}
	}
	return nil
}

// EventBounds returns the oldest seq still stored (0 when the log is
// empty) and the last seq ever assigned (AUTOINCREMENT's high-water mark,
// which survives pruning and restarts).
func EventBounds(ctx context.Context, q sqlQuerier) (oldest, last int64, err error) {
	var o sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT min(seq) FROM events`).Scan(&o); err != nil {
		return 0, 0, fmt.Errorf("event bounds: %w", err)
	}
	err = q.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&last)
	if err == sql.ErrNoRows {
		err = nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("event bounds: %w", err)
	}
	return o.Int64, last, nil
}

// EventsAfter returns up to limit events with seq > after in seq order,
// of one conversation ("" for every conversation).
func EventsAfter(ctx context.Context, q sqlQuerier, after int64, conversation string, limit int) ([]EventRow, error) {
	var rows *sql.Rows
	var err error
	if conversation == "" {
		rows, err = q.QueryContext(ctx, `SELECT seq, time_ms, type, conversation, fields FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	} else {
		rows, err = q.QueryContext(ctx, `SELECT seq, time_ms, type, conversation, fields FROM events WHERE conversation = ? AND seq > ? ORDER BY seq LIMIT ?`, conversation, after, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("events after %d: %w", after, err)
	}
	defer rows.Close()
	var out []EventRow
	for rows.Next() {
		var r EventRow
		var fields string
		if err := rows.Scan(&r.Seq, &r.TimeMs, &r.Type, &r.Conversation, &fields); err != nil {
			return nil, fmt.Errorf("events after %d: %w", after, err)
		}
		r.Fields = []byte(fields)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events after %d: %w", after, err)
	}
	return out, nil
}

// EventRetention bounds the event log: at most MaxCount events, none older
// than MaxAge. A zero field does not bound.
type EventRetention struct {
	MaxCount int64
	MaxAge   time.Duration
}

// PruneEvents deletes what retention no longer keeps and returns how many
// rows went. Seqs are never reused (AUTOINCREMENT).
func PruneEvents(ctx context.Context, q sqlQuerier, keep EventRetention, now time.Time) (int64, error) {
	var n int64
	if keep.MaxCount > 0 {
		res, err := q.ExecContext(ctx, `DELETE FROM events WHERE seq <= (SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`, keep.MaxCount)
		if err != nil {
			return n, fmt.Errorf("prune events by count: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if keep.MaxAge > 0 {
		cutoff := now.Add(-keep.MaxAge).UnixMilli()
		// Rows are appended in time order, so the cutoff is a seq prefix:
		// find its end by the rowid order instead of scanning time_ms.
		res, err := q.ExecContext(ctx, `DELETE FROM events WHERE seq < coalesce((SELECT seq FROM events WHERE time_ms >= ? ORDER BY seq LIMIT 1), (SELECT max(seq)+1 FROM events))`, cutoff)
		if err != nil {
			return n, fmt.Errorf("prune events by age: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}
