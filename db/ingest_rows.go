package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
)

// A batch's rows: its entries, their thinking blocks and frontiers, and the
// stamps its replies link. A first scan writes one entry row per session
// line, and what a row cost was mostly not SQLite's insert but the call
// around it: database/sql's locking and argument conversion, the driver's
// step and reset, one VDBE program run per row. So a batch's entry rows go
// up to rowsPerInsert to an INSERT, with each entry's seq chosen here (the
// rowid SQLite would choose, max(seq)+1 on: seq is not AUTOINCREMENT) so
// its thinking rows need no LastInsertId; its thinking rows go the same
// way. Those INSERTs are the driver's statements, run without database/sql
// (rawstmts.go).
//
// The row-by-row writer (saveRowsOneByOne) stays the reference: when the
// batched writer fails, the transaction is rolled back and written again
// row by row (ingestWrite), so a bad row fails the batch with the error,
// the line and the rows stored that row by row gives.

// rowsPerInsert is the most rows one INSERT writes: 32 entries are 1,024
// parameters, far below SQLite's limit of 32,766.
const rowsPerInsert = 32

// insertSizes are the row counts an entries INSERT is prepared for, powers
// of two up to rowsPerInsert (a batch's tail of n rows takes at most
// log2(32)+1 statements, each prepared once when the database opens).
const insertSizes = 6 // 1, 2, 4, 8, 16, 32

const entryColumns = `seq, file, id, parent_id, type, line, offset, length, timestamp, role, model, provider,
	stop_reason, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_total,
	tool_calls, user_text, first_kept_entry_id, custom_type, cost_input, cost_output, cost_cache_read, cost_cache_write,
	cache_write_1h_tokens, reasoning_tokens, usage_kind, target_id, edit_omit`

const entryParams = 32

const thinkingColumns = `entry, block, file, redacted, signed, sig_digest, chars`

const thinkingParams = 7

// insertRowsSQL is an INSERT of rows rows of params parameters each.
func insertRowsSQL(table, columns string, params, rows int) string {
	row := "(?" + strings.Repeat(", ?", params-1) + ")"
	return "INSERT INTO " + table + " (" + columns + ") VALUES " + row + strings.Repeat(", "+row, rows-1)
}

// insertSize is the size index (into insertSizes) of the largest prepared
// INSERT that fits n rows and limit.
func insertSize(n, limit int) int {
	k := 0
	for k+1 < insertSizes && 1<<(k+1) <= min(n, limit) {
		k++
	}
	return k
}

// savedRows is what writing a batch's rows produced.
type savedRows struct {
	seqs     []int64        // each entry's seq, in batch order
	thinking int            // thinking blocks of messages
	linked   map[string]int // entry id -> stamps linked to it
}

// saveRows writes es as rows of file, up to limit rows to an INSERT. A
// failure of the batched writer is a *batchedError: the transaction is to
// be run again row by row (ingestWrite).
func (d *DB) saveRows(ctx context.Context, tx *sql.Tx, file int64, es []Entry, limit int) (savedRows, error) {
	if len(es) < 2 || limit <= 1 {
		return d.saveRowsOneByOne(ctx, tx, file, es)
	}
	r, err := d.saveRowsMany(ctx, tx, file, es, limit)
	if err != nil {
		return r, &batchedError{err}
	}
	return r, nil
}

// batchedError is a failure of the batched row writer.
type batchedError struct{ err error }

func (e *batchedError) Error() string { return e.err.Error() }
func (e *batchedError) Unwrap() error { return e.err }

// ingestWrite runs fn in one write transaction with its rows batched
// (rowsPerInsert to an INSERT). When the batched writer failed, the
// transaction, rolled back whole, runs again row by row: a bad row fails
// the batch with row by row's error and line, and when the batched writer
// alone failed, the rows stored are row by row's. No savepoint is needed
// for that (one would make SQLite copy every page the batch touches to a
// sub-journal first), and a good batch pays nothing for it.
func (d *DB) ingestWrite(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, limit int) error) error {
	limit := d.rowsPerInsert
	if limit <= 0 {
		limit = rowsPerInsert
	}
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, tx, limit) })
	if _, batched := errors.AsType[*batchedError](err); batched {
		err = d.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, tx, 1) })
	}
	return err
}

// saveRowsMany writes es's entry rows, limit to an INSERT at most, then
// their thinking rows, then each entry's frontier and stamp links.
func (d *DB) saveRowsMany(ctx context.Context, tx *sql.Tx, file int64, es []Entry, limit int) (savedRows, error) {
	var high int64
	if err := txQueryRow(ctx, tx, sqlIngestHighWater).Scan(&high); err != nil {
		return savedRows{}, fmt.Errorf("save entries: %w", err)
	}
	if high > math.MaxInt64-int64(len(es)) {
		// SQLite picks random unused rowids past the largest one.
		return d.saveRowsOneByOne(ctx, tx, file, es)
	}
	r := savedRows{seqs: make([]int64, len(es)), linked: map[string]int{}}
	blocks := 0
	for i := range es {
		r.seqs[i] = high + 1 + int64(i)
		blocks += len(es[i].Thinking)
	}
	err := d.rawExec(ctx, func(st *rawStmts) error {
		args := make([]any, 0, min(len(es), limit)*entryParams)
		nv := make([]driver.NamedValue, 0, cap(args))
		for i := 0; i < len(es); {
			k := insertSize(len(es)-i, limit)
			n := 1 << k
			args = args[:0]
			for j := i; j < i+n; j++ {
				args = entryArgs(args, r.seqs[j], file, &es[j])
			}
			if _, err := st.entries[k].ExecContext(ctx, namedValues(nv[:0], args)); err != nil {
				return fmt.Errorf("lines %d-%d: save entries: %w", es[i].Line, es[i+n-1].Line, err)
			}
			i += n
		}
		if blocks == 0 {
			return nil
		}
		// The thinking rows many to an INSERT too, in key order (entry,
		// block). A multi-row INSERT runs with a statement journal (its
		// foreign keys may abort it half-way), a copy of every page it
		// changes that existed before it: when the digest index was keyed
		// by the digest alone, each block landed on a different page and
		// one block to an INSERT measured faster. Since migration 010 the
		// index leads with the file, a new file's blocks are appended, and
		// 32 to an INSERT took a third less time than one (cold ingest
		// profile, 100 MB archive).
		type block struct {
			e int // index in es
			t *Thinking
		}
		bs := make([]block, 0, blocks)
		for i := range es {
			for j := range es[i].Thinking {
				bs = append(bs, block{i, &es[i].Thinking[j]})
			}
		}
		for i := 0; i < len(bs); {
			k := insertSize(len(bs)-i, limit)
			n := 1 << k
			args = args[:0]
			for _, b := range bs[i : i+n] {
				args = thinkingArgs(args, r.seqs[b.e], file, b.t)
			}
			if _, err := st.thinking[k].ExecContext(ctx, namedValues(nv[:0], args)); err != nil {
				if n == 1 {
					return fmt.Errorf("line %d: save thinking block %d: %w", es[bs[i].e].Line, bs[i].t.Index, err)
				}
				return fmt.Errorf("lines %d-%d: save thinking blocks: %w", es[bs[i].e].Line, es[bs[i+n-1].e].Line, err)
			}
			i += n
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	links := rowLinks{d: d, tx: tx}
	for i := range es {
		e := &es[i]
		if e.Type == "message" {
			r.thinking += len(e.Thinking)
			for _, t := range e.Thinking {
				if err := links.link(ctx, e, t, r.linked); err != nil {
					return r, err
				}
			}
		}
		if err := d.saveFrontier(ctx, tx, r.seqs[i], file, e); err != nil {
			return r, err
		}
	}
	return r, nil
}

// entryArgs appends e's row in entryColumns' order, each value as
// saveRowsOneByOne binds it (NULL for what pi did not write) but already
// a driver value: database/sql converts a pointer or a Valuer by
// reflection, once per parameter.
func entryArgs(args []any, seq, file int64, e *Entry) []any {
	u := &e.Usage
	return append(args, seq, file, e.ID, sqlText(e.ParentID), e.Type, int64(e.Line), e.Offset, int64(e.Length),
		sqlText(e.Timestamp), sqlText(e.Role), sqlText(e.Model), sqlText(e.Provider), sqlText(e.StopReason),
		sqlInt(u.Input), sqlInt(u.Output), sqlInt(u.CacheRead), sqlInt(u.CacheWrite), sqlInt(u.TotalTokens),
		sqlReal(u.CostTotal), int64(e.ToolCalls), e.UserText, sqlText(e.FirstKeptEntryID), sqlText(e.CustomType),
		sqlReal(u.CostInput), sqlReal(u.CostOutput), sqlReal(u.CostCacheRead), sqlReal(u.CostCacheWrite),
		sqlInt(u.CacheWrite1h), sqlInt(u.Reasoning), sqlText(e.UsageKind), sqlText(e.TargetID), e.EditOmit)
}

// namedValues appends args to nv as the driver takes them, numbered from 1.
func namedValues(nv []driver.NamedValue, args []any) []driver.NamedValue {
	for i, v := range args {
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	return nv
}

// thinkingArgs appends t's row in thinkingColumns' order.
func thinkingArgs(args []any, seq, file int64, t *Thinking) []any {
	var dig any
	if len(t.SigDigest) > 0 {
		dig = t.SigDigest
	}
	return append(args, seq, int64(t.Index), file, t.Redacted, t.Signed, dig, int64(t.Chars))
}

func sqlText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func sqlInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func sqlReal(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// saveRowsOneByOne writes es one row per statement, in file order: an
// entry, its thinking blocks (each linking its stamp), its frontier.
func (d *DB) saveRowsOneByOne(ctx context.Context, tx *sql.Tx, file int64, es []Entry) (savedRows, error) {
	r := savedRows{seqs: make([]int64, len(es)), linked: map[string]int{}}
	insEntry := tx.StmtContext(ctx, d.stmts.insertEntry)
	insThinking := tx.StmtContext(ctx, d.stmts.insertThinking)
	links := rowLinks{d: d, tx: tx}
	for i := range es {
		e := &es[i]
		u := e.Usage
		// Exec and LastInsertId, not RETURNING: a query's row machinery
		// costs more than the insert itself on this hot path.
		res, err := insEntry.ExecContext(ctx,
			file, e.ID, nullString(e.ParentID), e.Type, e.Line, e.Offset, e.Length,
			nullString(e.Timestamp), nullString(e.Role), nullString(e.Model), nullString(e.Provider),
			nullString(e.StopReason), u.Input, u.Output, u.CacheRead, u.CacheWrite, u.TotalTokens,
			u.CostTotal, e.ToolCalls, e.UserText, nullString(e.FirstKeptEntryID), nullString(e.CustomType),
			u.CostInput, u.CostOutput, u.CostCacheRead, u.CostCacheWrite,
			u.CacheWrite1h, u.Reasoning, nullString(e.UsageKind), nullString(e.TargetID), e.EditOmit,
		)
		if err != nil {
			return r, fmt.Errorf("line %d: save entry: %w", e.Line, err)
		}
		seq, err := res.LastInsertId()
		if err != nil {
			return r, fmt.Errorf("line %d: save entry: %w", e.Line, err)
		}
		r.seqs[i] = seq
		for _, t := range e.Thinking {
			var dig any
			if len(t.SigDigest) > 0 {
				dig = t.SigDigest
			}
			if _, err := insThinking.ExecContext(ctx, seq, t.Index, file, t.Redacted, t.Signed, dig, t.Chars); err != nil {
				return r, fmt.Errorf("line %d: save thinking block %d: %w", e.Line, t.Index, err)
			}
			if e.Type != "message" {
				// A context_edit's replacement carries copies of blocks
				// a message minted: what the model sees, not new thinking
				// and not where a stamp's reply landed.
				continue
			}
			r.thinking++
			if err := links.link(ctx, e, t, r.linked); err != nil {
				return r, err
			}
		}
		if err := d.saveFrontier(ctx, tx, seq, file, e); err != nil {
			return r, err
		}
	}
	return r, nil
}

// rowLinks links stamps to the thinking blocks of a batch's messages.
type rowLinks struct {
	d    *DB
	tx   *sql.Tx
	stmt *sql.Stmt
	// looked: the stamps table was looked at for this batch; none: it held
	// no stamp, so no block of the batch has one to link.
	looked, none bool
}

// link links the stamp of e's block t, if one is waiting for it. A stamp
// an accept or compile made before this line was read is linked to its
// entry in the same transaction: a link made after the commit was lost to
// a crash or shutdown in between, and nothing ever read the line again.
//
// A first scan into a new database has no stamp at all, and its thousands
// of probes would each find nothing: the batch looks once whether any
// stamp exists (nothing in a batch's transaction makes one) and skips the
// probes when none does.
func (l *rowLinks) link(ctx context.Context, e *Entry, t Thinking, linked map[string]int) error {
	if !t.Signed || len(t.SigDigest) != 32 {
		return nil
	}
	if !l.looked && !l.d.probeEveryBlock {
		var some bool
		if err := l.tx.StmtContext(ctx, l.d.stmts.anyStamp).QueryRowContext(ctx).Scan(&some); err != nil {
			return fmt.Errorf("line %d: look up stamps: %w", e.Line, err)
		}
		l.looked, l.none = true, !some
	}
	if l.none {
		return nil
	}
	if l.stmt == nil {
		l.stmt = l.tx.StmtContext(ctx, l.d.stmts.linkStamp)
	}
	res, err := l.stmt.ExecContext(ctx, e.ID, t.SigDigest)
	if err != nil {
		return fmt.Errorf("line %d: link stamp of thinking block %d: %w", e.Line, t.Index, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		linked[e.ID] += int(n)
	}
	return nil
}

// saveFrontier stores e's data when it is a pi-condense frontier.
func (d *DB) saveFrontier(ctx context.Context, tx *sql.Tx, seq, file int64, e *Entry) error {
	if e.CustomType != FrontierType || len(e.Data) == 0 {
		return nil
	}
	if _, err := tx.StmtContext(ctx, d.stmts.insertFrontier).ExecContext(ctx, seq, file, string(e.Data)); err != nil {
		return fmt.Errorf("line %d: save frontier: %w", e.Line, err)
	}
	return nil
}
