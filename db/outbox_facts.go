package db

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/my-pi/bindery/binding"
)

// The shared tier's outbox of facts (migration 016): compile records,
// accepts and releases this machine made, queued by the daemon in the
// same transaction as the fact when the outbox is on (EnableOutbox), and
// shipped by the daemon's shipper in id order. Facts learned from the
// shared tier are never queued (the daemon does not call Queue* for them):
// they came from there.

// Kinds of queued facts.
const (
	FactCompile = "compile"
	FactAccept  = "accept"
	FactRelease = "release"
)

// Fact is one queued fact, read back whole (Outbox*): Compile for compile
// and accept facts, Release for a release. Gone: the fact was forgotten
// before it shipped (nothing to ship).
type Fact struct {
	ID      int64
	Kind    string
	Compile CompileRow
	Release ReleaseRow
	Gone    bool
}

func (t *Tx) queueFact(ctx context.Context, kind, ref string, nowMs int64) error {
	if !t.outbox {
		return nil
	}
	if _, err := txExec(ctx, t.tx, `INSERT INTO outbox_facts (kind, ref, created_ms) VALUES (?, ?, ?)`, kind, ref, nowMs); err != nil {
		return fmt.Errorf("queue %s %s for the shared tier: %w", kind, ref, err)
	}
	return nil
}

// QueueCompile queues compile id's record (a no-op with the outbox off).
func (t *Tx) QueueCompile(ctx context.Context, id string, nowMs int64) error {
	return t.queueFact(ctx, FactCompile, id, nowMs)
}

// QueueAccept queues compile id's accept.
func (t *Tx) QueueAccept(ctx context.Context, id string, nowMs int64) error {
	return t.queueFact(ctx, FactAccept, id, nowMs)
}

// QueueReleases queues releases InsertReleases recorded (their IDs set).
func (t *Tx) QueueReleases(ctx context.Context, rels []ReleaseRow, nowMs int64) error {
	for _, r := range rels {
		if err := t.queueFact(ctx, FactRelease, strconv.FormatInt(r.ID, 10), nowMs); err != nil {
			return fmt.Errorf("conversation %q: %w", r.Conversation, err)
		}
	}
	return nil
}

// OutboxFacts returns up to limit queued facts, oldest first, each read
// whole.
func (d *DB) OutboxFacts(ctx context.Context, limit int) ([]Fact, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT id, kind, ref FROM outbox_facts ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox of facts: %w", err)
	}
	type queued struct {
		id        int64
		kind, ref string
	}
	var qs []queued
	for rows.Next() {
		var q queued
		if err := rows.Scan(&q.id, &q.kind, &q.ref); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox of facts: %w", err)
		}
		qs = append(qs, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox of facts: %w", err)
	}
	out := make([]Fact, 0, len(qs))
	for _, q := range qs {
		f := Fact{ID: q.id, Kind: q.kind}
		switch q.kind {
		case FactCompile, FactAccept:
			c, found, err := d.Compile(ctx, q.ref)
			if err != nil {
				return nil, fmt.Errorf("outbox: %s of compile %s: %w", q.kind, q.ref, err)
			}
			f.Compile, f.Gone = c, !found || (q.kind == FactCompile && c.Record == nil) || (q.kind == FactAccept && c.AcceptedMs == 0)
		case FactRelease:
			id, err := strconv.ParseInt(q.ref, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("outbox: release %q: %w", q.ref, err)
			}
			r, found, err := d.releaseByID(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("outbox: release %d: %w", id, err)
			}
			f.Release, f.Gone = r, !found
		default:
			f.Gone = true // a kind a later version queued: not ours to ship
		}
		out = append(out, f)
	}
	return out, nil
}

func (d *DB) releaseByID(ctx context.Context, id int64) (ReleaseRow, bool, error) {
	r := ReleaseRow{ID: id}
	var key []byte
	var compile, path sql.NullString
	err := d.readRow(ctx, `SELECT conversation, branch, key, reason, compile, message, path, seq, created_ms FROM releases WHERE id = ?`, id).
		Scan(&r.Conversation, &r.Branch, &key, &r.Reason, &compile, &r.Message, &path, &r.Seq, &r.CreatedMs)
	if err == sql.ErrNoRows {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	copy(r.Key[:], key)
	r.Compile, r.Path = compile.String, path.String
	return r, true, nil
}

// OutboxFactsShipped deletes the queued facts up to id (shipped, in order).
func (d *DB) OutboxFactsShipped(ctx context.Context, upto int64) error {
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM outbox_facts WHERE id <= ?`, upto)
		return err
	})
	if err != nil {
		return fmt.Errorf("outbox of facts: %w", err)
	}
	return nil
}

// OutboxFactsLen is how many facts wait to be shipped.
func (d *DB) OutboxFactsLen(ctx context.Context) (int, error) {
	var n int
	if err := d.readers.QueryRowContext(ctx, `SELECT count(*) FROM outbox_facts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("outbox of facts: %w", err)
	}
	return n, nil
}

// EncodeRecord is a compile record whole, in the store's own format: what
// the shared tier holds of a compile.
func EncodeRecord(r *binding.CompileRecord) []byte { return encodeRecord(r) }

// DecodeRecord reads what EncodeRecord wrote (any unchunked format).
func DecodeRecord(blob []byte) (*binding.CompileRecord, error) { return decodeRecord(blob) }

// IngestHighWater is the largest entries.seq now (Tx.IngestHighWater's,
// read outside a write): the daemon takes it before it reads the shared
// tier's releases, to order what it learns there against its entries.
func (d *DB) IngestHighWater(ctx context.Context) (int64, error) {
	var n int64
	if err := d.readRow(ctx, sqlIngestHighWater).Scan(&n); err != nil {
		return 0, fmt.Errorf("ingest high water: %w", err)
	}
	return n, nil
}
