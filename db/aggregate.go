package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Aggregate is one session file's report aggregate as stored: opaque JSON
// the report package writes (daemon/report's Aggregate). Sums is what a
// report reads, Walk what extending it needs. Fresh: built from rows as
// this release ingests them, so the file's rows alone rebuild it.
type Aggregate struct {
	Sums, Walk []byte
	// Breaks are rows of their own (report_breaks), in order: a built
	// aggregate's replace the file's, an extended one's are added (its
	// earlier breaks are neither read nor rewritten by an append).
	Breaks [][]byte
	Fresh  bool
}

// ReportAggregator keeps a session's report aggregate current inside the
// ingest transaction (daemon/report/reporter implements it; db does not
// know what an aggregate holds). Its errors never fail an ingest: the
// aggregate is dropped and the next report rebuilds it from the entries.
type ReportAggregator interface {
	// BuildAggregate is the aggregate of a file whose rows are entries
	// (all of them, in file order). It may be called on any goroutine
	// (PrepareBatch), and must not change entries.
	BuildAggregate(entries []Entry) (Aggregate, error)
	// ExtendAggregate extends prev by entries appended to its file; ok is
	// false when they do not simply extend its branch (then it is rebuilt).
	ExtendAggregate(prev Aggregate, entries []Entry) (next Aggregate, ok bool, err error)
}

// SetReportAggregator makes every later ingest keep report aggregates
// current. Set it before ingest starts: while none is set, a batch that
// grows a file drops its aggregate instead (the report rebuilds it).
func (d *DB) SetReportAggregator(a ReportAggregator) {
	if a == nil {
		d.aggregator.Store(nil)
		return
	}
	d.aggregator.Store(&a)
}

// aggregateTx keeps file's aggregate current with the batch just written:
// whole says entries are all of the file's rows (a first scan, a rewrite),
// else they were appended to rows ingested before.
//
// ahead is the batch's aggregate PrepareBatch built, or nil.
func (d *DB) aggregateTx(ctx context.Context, tx *sql.Tx, file int64, whole bool, entries []Entry, ahead *aheadAggregate) error {
	p := d.aggregator.Load()
	if p == nil {
		if !whole && len(entries) > 0 {
			return dropAggregate(ctx, tx, file) // it no longer holds every row
		}
		return nil
	}
	agg := *p
	if whole {
		var a Aggregate
		var err error
		if ahead != nil && ahead.agg == p {
			a, err = ahead.a, ahead.err
		} else {
			a, err = agg.BuildAggregate(entries)
		}
		if err != nil {
			return dropAggregate(ctx, tx, file)
		}
		a.Fresh = true
		return putAggregate(ctx, tx, file, a, true)
	}
	if len(entries) == 0 {
		return nil
	}
	var prev Aggregate
	var sums, walk string
	err := tx.QueryRowContext(ctx, `SELECT sums, walk, fresh FROM report_aggregates WHERE file = ?`, file).Scan(&sums, &walk, &prev.Fresh)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // none yet: the next report builds it (a session ingested before version 7)
	}
	if err != nil {
		return fmt.Errorf("read report aggregate: %w", err)
	}
	prev.Sums, prev.Walk = []byte(sums), []byte(walk)
	next, ok, err := agg.ExtendAggregate(prev, entries)
	if err == nil && ok {
		next.Fresh = prev.Fresh
		return putAggregate(ctx, tx, file, next, false)
	}
	if err != nil || !prev.Fresh {
		// Rows ingested before version 7 may need the session file read
		// back (daemon/report/reporter): the report rebuilds it.
		return dropAggregate(ctx, tx, file)
	}
	// The branch moved (a reply to an older entry: pi's /tree): rebuild
	// from the file's rows, this batch's included. Rare, and linear in the
	// one session.
	rows, err := reportEntries(ctx, tx, file)
	if err != nil {
		return fmt.Errorf("rebuild report aggregate: %w", err)
	}
	a, err := agg.BuildAggregate(rows)
	if err != nil {
		return dropAggregate(ctx, tx, file)
	}
	a.Fresh = true
	return putAggregate(ctx, tx, file, a, true)
}

// aheadAggregate is a batch's aggregate PrepareBatch built, and the
// aggregator it was built with.
type aheadAggregate struct {
	agg *ReportAggregator
	a   Aggregate
	err error
}

// PrepareBatch does ahead what ingesting b will need no database for, so
// a caller can do it on a goroutine other than the writer's (the
// watcher's read-ahead, while the group before commits): it builds the
// report aggregate of a Found or Rewritten batch, which ingest builds from
// the batch's entries alone. Ingest then stores exactly what it would
// have built (it builds again if the aggregator changed meanwhile). b's
// entries must not change after it, and b must not be ingested meanwhile.
//
// A batch's aggregate was a tenth to a seventh of a first scan's transaction
// time, on the single writer; the read-ahead goroutine has time to spare.
func (d *DB) PrepareBatch(b *Batch) {
	p := d.aggregator.Load()
	if p == nil || (b.Kind != Found && b.Kind != Rewritten) {
		return
	}
	a, err := (*p).BuildAggregate(b.Entries)
	b.ahead = &aheadAggregate{agg: p, a: a, err: err}
}

// putAggregate stores a; built: its breaks replace the file's, else they
// are added.
func putAggregate(ctx context.Context, tx *sql.Tx, file int64, a Aggregate, built bool) error {
	_, err := txExec(ctx, tx, sqlPutAggregate, file, string(a.Sums), string(a.Walk), a.Fresh, nowMS())
	if err != nil {
		return fmt.Errorf("save report aggregate: %w", err)
	}
	if built {
		if _, err := txExec(ctx, tx, sqlDeleteBreaks, file); err != nil {
			return fmt.Errorf("save report aggregate: %w", err)
		}
	}
	for _, b := range a.Breaks {
		if _, err := txExec(ctx, tx, sqlInsertBreak, file, string(b)); err != nil {
			return fmt.Errorf("save report aggregate's break: %w", err)
		}
	}
	return nil
}

func dropAggregate(ctx context.Context, tx *sql.Tx, file int64) error {
	for _, q := range []string{`DELETE FROM report_aggregates WHERE file = ?`, `DELETE FROM report_breaks WHERE file = ?`} {
		if _, err := tx.ExecContext(ctx, q, file); err != nil {
			return fmt.Errorf("drop report aggregate: %w", err)
		}
	}
	return nil
}

// ReportAggregates returns the stored sums and breaks (no walk) of the
// given files' aggregates; a file without one is absent.
func (d *DB) ReportAggregates(ctx context.Context, files []int64) (map[int64]Aggregate, error) {
	out := make(map[int64]Aggregate, len(files))
	if len(files) == 0 {
		return out, nil
	}
	where := ""
	var args []any
	if len(files) <= 64 {
		// A few changed sessions: by key. Many (a cold report): one scan.
		where = ` WHERE file IN (?` + strings.Repeat(", ?", len(files)-1) + `)`
		for _, f := range files {
			args = append(args, f)
		}
	}
	// One read transaction: the breaks are those of the sums read.
	tx, err := d.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("report aggregates: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT file, sums, fresh FROM report_aggregates`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("report aggregates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var file int64
		var sums string
		var a Aggregate
		if err := rows.Scan(&file, &sums, &a.Fresh); err != nil {
			return nil, fmt.Errorf("report aggregates: %w", err)
		}
		a.Sums = []byte(sums)
		out[file] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("report aggregates: %w", err)
	}
	rows.Close()
	brows, err := tx.QueryContext(ctx, `SELECT file, data FROM report_breaks`+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("report aggregates' breaks: %w", err)
	}
	defer brows.Close()
	for brows.Next() {
		var file int64
		var data string
		if err := brows.Scan(&file, &data); err != nil {
			return nil, fmt.Errorf("report aggregates' breaks: %w", err)
		}
		if a, ok := out[file]; ok {
			a.Breaks = append(a.Breaks, []byte(data))
			out[file] = a
		}
	}
	if err := brows.Err(); err != nil {
		return nil, fmt.Errorf("report aggregates' breaks: %w", err)
	}
	return out, nil
}

// AggregateAt is an aggregate a report built from the file's rows as they
// stood at a cursor (ReportSession's Offset, Lines, UpdatedMS).
type AggregateAt struct {
	File              int64
	Offset, Lines, MS int64
	Aggregate
}

// PutReportAggregates stores aggregates a report built, each only while
// its file's cursor is still the one it was built at: a batch ingested
// meanwhile (which the aggregate does not hold) leaves the row to ingest.
// One transaction.
func (d *DB) PutReportAggregates(ctx context.Context, as []AggregateAt) error {
	if len(as) == 0 {
		return nil
	}
	return d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, a := range as {
			var same bool
			err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM files WHERE id = ? AND offset = ? AND lines = ? AND updated_ms = ?)`,
				a.File, a.Offset, a.Lines, a.MS).Scan(&same)
			if err != nil {
				return fmt.Errorf("save report aggregate of file %d: %w", a.File, err)
			}
			if !same {
				continue
			}
			if err := putAggregate(ctx, tx, a.File, a.Aggregate, true); err != nil {
				return fmt.Errorf("file %d: %w", a.File, err)
			}
		}
		return nil
	})
}
