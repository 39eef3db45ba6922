package db

import (
	"context"
	"fmt"
	"time"
)

// EventBounds returns the oldest seq still stored (0 when the log is
// empty) and the last seq ever assigned (AUTOINCREMENT's high-water mark,
// which survives pruning and restarts).
func (d *DB) EventBounds(ctx context.Context) (oldest, last int64, err error) {
	err = d.readers.QueryRowContext(ctx, `SELECT coalesce((SELECT min(seq) FROM events), 0),
		coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)`).Scan(&oldest, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("event bounds: %w", err)
	}
	return oldest, last, nil
}

// EventRetention bounds the event log: at most MaxCount events and none
// older than MaxAge. A zero field does not bound.
type EventRetention struct {
	MaxCount int64
	MaxAge   time.Duration
}

// PruneEvents deletes, inside tx, what retention no longer keeps and
// returns how many events went. Seqs are never reused (AUTOINCREMENT), so
// a feed client asking for a pruned range gets a reset.
func (t *Tx) PruneEvents(ctx context.Context, keep EventRetention, now time.Time) (int64, error) {
	tx := t.tx
	var n int64
	if keep.MaxCount > 0 {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq <= (SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)`, keep.MaxCount)
		if err != nil {
			return n, fmt.Errorf("prune events by count: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if keep.MaxAge > 0 {
		// Events are appended in time order, so the expired ones are a
		// prefix of seq order: find its end walking the primary key.
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE seq < coalesce(
			(SELECT seq FROM events WHERE time_ms >= ? ORDER BY seq LIMIT 1),
			(SELECT max(seq) + 1 FROM events))`, now.Add(-keep.MaxAge).UnixMilli())
		if err != nil {
			return n, fmt.Errorf("prune events by age: %w", err)
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}
