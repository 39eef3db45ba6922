package db

import (
	"context"
	"database/sql"
	"fmt"
)

// The shared tier's outbox (migration 015): with it on (EnableOutbox), a
// stamp this machine records gets an outbox row in the same transaction,
// so a stamp is never recorded without being queued, nor queued without
// being recorded; the shipper (daemon) reads them in order, sends them
// to the shared tier, and deletes what it sent. A stamp read from the
// shared tier (SourceShared) is not queued: it came from there.

// SourceShared is the source of a stamp read through from the shared tier.
const SourceShared = "shared"

// OutboxItem is one queued stamp.
type OutboxItem struct {
	ID    int64
	Stamp StampRow
}

func (t *Tx) queueStamp(ctx context.Context, s StampRow) error {
	if _, err := txExec(ctx, t.tx, `INSERT INTO outbox (kind, key, created_ms) VALUES ('stamp', ?, ?)`, s.Key[:], s.CreatedMs); err != nil {
		return fmt.Errorf("queue stamp for the shared tier: %w", err)
	}
	return nil
}

// EnableOutbox turns the outbox on. The first time a store joins a
// shared tier, every stamp it holds then (but read-through ones) is
// queued, in the same transaction that records the joining.
func (d *DB) EnableOutbox(ctx context.Context, nowMs int64) error {
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM outbox_joined`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (kind, key, created_ms) SELECT 'stamp', key, created_ms FROM stamps WHERE source != ? ORDER BY created_ms`, SourceShared); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox_joined (joined_ms) VALUES (?)`, nowMs)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	d.outbox.Store(true)
	return nil
}

// Outbox returns up to limit queued stamps, oldest first.
func (d *DB) Outbox(ctx context.Context, limit int) ([]OutboxItem, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT o.id, s.key, s.seed, s.chain, s.pred, s.model, s.source, s.conversation, s.branch, s.compile, s.entry, s.created_ms, s.account
		FROM outbox o JOIN stamps s ON s.key = o.key ORDER BY o.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxItem
	for rows.Next() {
		var it OutboxItem
		s := &it.Stamp
		var key, seed, chain, pred []byte
		var compile, entry, account sql.NullString
		if err := rows.Scan(&it.ID, &key, &seed, &chain, &pred, &s.Model, &s.Source, &s.Conversation, &s.Branch, &compile, &entry, &s.CreatedMs, &account); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		copy(s.Key[:], key)
		copy(s.Seed[:], seed)
		copy(s.Chain[:], chain)
		copy(s.Pred[:], pred)
		s.Compile, s.Entry, s.Account = compile.String, entry.String, account.String
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return out, nil
}

// OutboxShipped deletes the queued rows up to id (shipped, in order).
func (d *DB) OutboxShipped(ctx context.Context, upto int64) error {
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE id <= ?`, upto)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// OutboxLen is how many rows wait to be shipped.
func (d *DB) OutboxLen(ctx context.Context) (int, error) {
	var n int
	if err := d.readers.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	return n, nil
}
