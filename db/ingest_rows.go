package db

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// A first scan writes about one entry row per session line and a thinking
// row per block, and what a row cost was mostly not SQLite's insert but the
// call around it: database/sql's per-call locking and argument checks, the
// driver's statement step and reset, and pointers converted by reflection.
// So a batch's rows go rowsPerInsert to an INSERT, with every argument
// already a driver value, and each entry's seq is assigned here (the
// rowid SQLite would have chosen: max(seq)+1 on, seq is not AUTOINCREMENT)
// so its thinking rows need no LastInsertId.

// rowsPerInsert is how many rows one multi-row INSERT writes (32 entries
// are 1,024 parameters, far below SQLite's limit of 32,766).
const rowsPerInsert = 32

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

// entryArgs appends e's row (seq, file and its columns, in entryColumns'
// order) as driver values: NULL for what pi did not write.
func entryArgs(args []any, seq, file int64, e *Entry) []any {
	u := &e.Usage
	return append(args, seq, file, e.ID, sqlText(e.ParentID), e.Type, int64(e.Line), e.Offset, int64(e.Length),
		sqlText(e.Timestamp), sqlText(e.Role), sqlText(e.Model), sqlText(e.Provider), sqlText(e.StopReason),
		sqlInt(u.Input), sqlInt(u.Output), sqlInt(u.CacheRead), sqlInt(u.CacheWrite), sqlInt(u.TotalTokens),
		sqlReal(u.CostTotal), int64(e.ToolCalls), sqlBool(e.UserText), sqlText(e.FirstKeptEntryID), sqlText(e.CustomType),
		sqlReal(u.CostInput), sqlReal(u.CostOutput), sqlReal(u.CostCacheRead), sqlReal(u.CostCacheWrite),
		sqlInt(u.CacheWrite1h), sqlInt(u.Reasoning), sqlText(e.UsageKind), sqlText(e.TargetID), sqlBool(e.EditOmit))
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

func sqlBool(b bool) any {
	if b {
		return int64(1)
	}
	return int64(0)
}

// thinkingRow is one thinking block's row, with the entry it belongs to.
type thinkingRow struct {
	seq   int64
	entry *Entry
	block *Thinking
}

// insertEntryRows writes es as entries first, first+1, ... of file, then
// their thinking blocks.
func (d *DB) insertEntryRows(ctx context.Context, tx *sql.Tx, file, first int64, es []Entry) error {
	many, one := tx.StmtContext(ctx, d.stmts.insertEntries), tx.StmtContext(ctx, d.stmts.insertEntry)
	args := make([]any, 0, rowsPerInsert*entryParams)
	blocks := 0
	for i := 0; i < len(es); {
		n, st := rowsPerInsert, many
		if len(es)-i < rowsPerInsert {
			n, st = 1, one
		}
		args = args[:0]
		for k := i; k < i+n; k++ {
			args = entryArgs(args, first+int64(k), file, &es[k])
			blocks += len(es[k].Thinking)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("lines %d-%d: save entries: %w", es[i].Line, es[i+n-1].Line, err)
		}
		i += n
	}
	if blocks == 0 {
		return nil
	}
	rows := make([]thinkingRow, 0, blocks)
	for i := range es {
		for j := range es[i].Thinking {
			rows = append(rows, thinkingRow{first + int64(i), &es[i], &es[i].Thinking[j]})
		}
	}
	// In digest order: thinking_sig's inserts then walk its pages once,
	// left to right, instead of landing on a random page each (the primary
	// key's, all at its end, stay a few pages whatever the order).
	slices.SortFunc(rows, func(a, b thinkingRow) int { return bytes.Compare(a.block.SigDigest, b.block.SigDigest) })
	many, one = tx.StmtContext(ctx, d.stmts.insertThinkings), tx.StmtContext(ctx, d.stmts.insertThinking)
	for i := 0; i < len(rows); {
		n, st := rowsPerInsert, many
		if len(rows)-i < rowsPerInsert {
			n, st = 1, one
		}
		args = args[:0]
		for _, r := range rows[i : i+n] {
			var dig any
			if len(r.block.SigDigest) > 0 {
				dig = r.block.SigDigest
			}
			args = append(args, r.seq, int64(r.block.Index), file, sqlBool(r.block.Redacted), sqlBool(r.block.Signed), dig, int64(r.block.Chars))
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("line %d: save thinking blocks: %w", rows[i].entry.Line, err)
		}
		i += n
	}
	return nil
}
