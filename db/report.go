package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
)

// ReportSession is a session as the report sees it: where it is and how far
// it was ingested. Progress changes whenever a batch of the file is
// ingested (grown, rewritten, removed), so a summary cached under it is
// stale exactly when the file's rows changed.
type ReportSession struct {
	File         int64
	ID           string
	Path         string
	Version      int // the header's version
	Removed      bool
	LastActivity string
	Progress     string // "offset:lines:updated_ms" of the file's cursor
	// The cursor's parts: an aggregate a report builds is stored only
	// while they are unchanged (PutReportAggregates).
	Offset    int64
	Lines     int64
	UpdatedMS int64
}

// ReportSessions lists every session, removed ones included (their rows
// are kept and still count in the archive), most recently active first,
// a tie in last activity going to the file ingested last (the larger
// files.id).
func (d *DB) ReportSessions(ctx context.Context) ([]ReportSession, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT s.file, s.id, f.path, s.version, s.removed, coalesce(s.last_activity, ''),
		f.offset, f.lines, f.updated_ms FROM sessions s JOIN files f ON f.id = s.file
		ORDER BY s.last_activity DESC, s.file DESC`)
	if err != nil {
		return nil, fmt.Errorf("report sessions: %w", err)
	}
	defer rows.Close()
	var out []ReportSession
	for rows.Next() {
		var s ReportSession
		var offset, lines, updated int64
		if err := rows.Scan(&s.File, &s.ID, &s.Path, &s.Version, &s.Removed, &s.LastActivity, &offset, &lines, &updated); err != nil {
			return nil, fmt.Errorf("report sessions: %w", err)
		}
		s.Offset, s.Lines, s.UpdatedMS = offset, lines, updated
		s.Progress = strconv.FormatInt(offset, 10) + ":" + strconv.FormatInt(lines, 10) + ":" + strconv.FormatInt(updated, 10)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("report sessions: %w", err)
	}
	return out, nil
}

// ReportEntries loads one file's entries in file order with their usage
// and thinking blocks: what a report needs of a session. Memory is
// proportional to the one session.
func (d *DB) ReportEntries(ctx context.Context, file int64) ([]Entry, error) {
	return reportEntries(ctx, d.readers, file)
}

// reportEntries is ReportEntries through q: the reader pool, or the ingest
// transaction rebuilding an aggregate.
func reportEntries(ctx context.Context, q querier, file int64) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, id, coalesce(parent_id, ''), type, line, offset, length,
		coalesce(timestamp, ''), coalesce(role, ''), coalesce(model, ''), coalesce(provider, ''), coalesce(stop_reason, ''),
		input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_total,
		tool_calls, user_text, coalesce(first_kept_entry_id, ''), coalesce(custom_type, ''),
		cost_input, cost_output, cost_cache_read, cost_cache_write,
		cache_write_1h_tokens, reasoning_tokens, coalesce(usage_kind, ''), coalesce(target_id, ''), edit_omit
		FROM entries WHERE file = ? ORDER BY seq`, file)
	if err != nil {
		return nil, fmt.Errorf("report entries of file %d: %w", file, err)
	}
	defer rows.Close()
	var out []Entry
	bySeq := map[int64]int{}
	for rows.Next() {
		var e Entry
		var seq int64
		var in, outT, cr, cw, total, cw1h, reasoning sql.NullInt64
		var cost, cin, cout, ccr, ccw sql.NullFloat64
		if err := rows.Scan(&seq, &e.ID, &e.ParentID, &e.Type, &e.Line, &e.Offset, &e.Length,
			&e.Timestamp, &e.Role, &e.Model, &e.Provider, &e.StopReason,
			&in, &outT, &cr, &cw, &total, &cost,
			&e.ToolCalls, &e.UserText, &e.FirstKeptEntryID, &e.CustomType,
			&cin, &cout, &ccr, &ccw,
			&cw1h, &reasoning, &e.UsageKind, &e.TargetID, &e.EditOmit); err != nil {
			return nil, fmt.Errorf("report entries of file %d: %w", file, err)
		}
		e.Usage = Usage{Input: nullInt64(in), Output: nullInt64(outT), CacheRead: nullInt64(cr),
			CacheWrite: nullInt64(cw), TotalTokens: nullInt64(total), CostTotal: nullFloat64(cost),
			CostInput: nullFloat64(cin), CostOutput: nullFloat64(cout), CostCacheRead: nullFloat64(ccr), CostCacheWrite: nullFloat64(ccw),
			CacheWrite1h: nullInt64(cw1h), Reasoning: nullInt64(reasoning)}
		bySeq[seq] = len(out)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("report entries of file %d: %w", file, err)
	}
	rows.Close()
	trows, err := q.QueryContext(ctx, sqlReportThinking, file)
	if err != nil {
		return nil, fmt.Errorf("report thinking of file %d: %w", file, err)
	}
	defer trows.Close()
	for trows.Next() {
		var seq int64
		var t Thinking
		if err := trows.Scan(&seq, &t.Index, &t.Redacted, &t.Signed, &t.Chars); err != nil {
			return nil, fmt.Errorf("report thinking of file %d: %w", file, err)
		}
		if i, ok := bySeq[seq]; ok {
			out[i].Thinking = append(out[i].Thinking, t)
		}
	}
	if err := trows.Err(); err != nil {
		return nil, fmt.Errorf("report thinking of file %d: %w", file, err)
	}
	return out, nil
}

// sqlReportThinking is a file's thinking blocks, through the first column
// of thinking_file_sig (a few hundred blocks a session, sorted).
const sqlReportThinking = `SELECT entry, block, redacted, signed, chars FROM thinking WHERE file = ? ORDER BY entry, block`

func nullFloat64(n sql.NullFloat64) *float64 {
	if !n.Valid {
		return nil
	}
	v := n.Float64
	return &v
}

func nullInt64(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	v := n.Int64
	return &v
}

// ReportSummary is one cached summary: opaque JSON the report package
// wrote, valid while Stamp matches.
type ReportSummary struct {
	File    int64
	Stamp   string
	Summary []byte
}

// ReportSummaries returns every cached summary by file.
func (d *DB) ReportSummaries(ctx context.Context) (map[int64]ReportSummary, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT file, stamp, summary FROM report_summaries`)
	if err != nil {
		return nil, fmt.Errorf("report summaries: %w", err)
	}
	defer rows.Close()
	out := map[int64]ReportSummary{}
	for rows.Next() {
		var s ReportSummary
		var text string
		if err := rows.Scan(&s.File, &s.Stamp, &text); err != nil {
			return nil, fmt.Errorf("report summaries: %w", err)
		}
		s.Summary = []byte(text)
		out[s.File] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("report summaries: %w", err)
	}
	return out, nil
}

// PutReportSummaries stores summaries in one transaction, replacing the
// files' previous rows. A file deleted meanwhile is skipped.
func (d *DB) PutReportSummaries(ctx context.Context, sums []ReportSummary) error {
	if len(sums) == 0 {
		return nil
	}
	now := nowMS()
	return d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO report_summaries (file, stamp, summary, updated_ms)
			SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM files WHERE id = ?1)
			ON CONFLICT (file) DO UPDATE SET stamp = excluded.stamp, summary = excluded.summary, updated_ms = excluded.updated_ms`)
		if err != nil {
			return fmt.Errorf("save report summaries: %w", err)
		}
		defer stmt.Close()
		for _, s := range sums {
			if _, err := stmt.ExecContext(ctx, s.File, s.Stamp, string(s.Summary), now); err != nil {
				return fmt.Errorf("save report summary of file %d: %w", s.File, err)
			}
		}
		return nil
	})
}

// ReportEventSeqs returns, for every conversation in the event log, the
// seq of its latest event: a report summary is stale when it moved.
func (d *DB) ReportEventSeqs(ctx context.Context) (map[string]int64, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT conversation, max(seq) FROM events WHERE conversation != '' GROUP BY conversation`)
	if err != nil {
		return nil, fmt.Errorf("report event seqs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var c string
		var seq int64
		if err := rows.Scan(&c, &seq); err != nil {
			return nil, fmt.Errorf("report event seqs: %w", err)
		}
		out[c] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("report event seqs: %w", err)
	}
	return out, nil
}

// ReportCompileEvents returns a conversation's compile events still in the
// (bounded) event log, oldest first: seq and fields.
func (d *DB) ReportCompileEvents(ctx context.Context, conversation string) ([]Event, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT seq, type, fields FROM events
		WHERE conversation = ? AND type = 'compile' ORDER BY seq`, conversation)
	if err != nil {
		return nil, fmt.Errorf("compile events of %s: %w", conversation, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{Conversation: conversation}
		var fields string
		if err := rows.Scan(&e.Seq, &e.Type, &fields); err != nil {
			return nil, fmt.Errorf("compile events of %s: %w", conversation, err)
		}
		e.Fields = json.RawMessage(fields)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compile events of %s: %w", conversation, err)
	}
	return out, nil
}
