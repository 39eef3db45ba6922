package db

import (
	"context"
	"database/sql"
	"fmt"
)

// OutboxOldest is when the oldest row in the outbox was queued, in Unix
// ms (0: the outbox is empty): the shipper's lag is now minus this. A row
// is queued with its stamp, but the stamps queued when the store joined a
// shared tier were queued then, not when they were minted.
func (d *DB) OutboxOldest(ctx context.Context) (int64, error) {
	var oldest, joined sql.NullInt64
	err := d.readers.QueryRowContext(ctx, `SELECT (SELECT min(created_ms) FROM outbox), (SELECT max(joined_ms) FROM outbox_joined)`).Scan(&oldest, &joined)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	if !oldest.Valid {
		return 0, nil
	}
	return max(oldest.Int64, joined.Int64), nil
}
