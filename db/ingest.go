package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// BatchKind says what happened to a session file (the watcher's kinds).
type BatchKind string

const (
	Found     BatchKind = "found"     // first read of a file
	Grew      BatchKind = "grew"      // complete lines appended
	Rewritten BatchKind = "rewritten" // the file changed before the cursor: Entries is the whole file
	Removed   BatchKind = "removed"   // the file is gone
)

// FrontierType is the customType of pi-condense's frontier snapshots.
const FrontierType = "context-prune-frontier"

// Cursor is where reading a file stopped, saved with the rows it produced.
type Cursor struct {
	Path   string
	Dev    uint64
	Ino    uint64
	Offset int64  // end of the last complete line ingested
	Lines  int    // complete lines ingested (the header is line 1)
	Check  []byte // the watcher's digest of the bytes before Offset
}

// Header is a session file's first line.
type Header struct {
	ID            string
	Version       int
	Cwd           string
	Timestamp     string
	ParentSession string
}

// Entry is what bindery keeps of one session line: where it is and the
// fields it decides on. The line's text stays in the file.
type Entry struct {
	Line             int
	Offset           int64
	Length           int
	Type             string
	ID               string
	ParentID         string
	Timestamp        string
	Role             string
	Model            string
	Provider         string
	StopReason       string
	Usage            Usage
	Thinking         []Thinking
	ToolCalls        int
	UserText         bool
	FirstKeptEntryID string
	CustomType       string
	// UsageKind is a usage entry's kind (pi 1.6: "cache_warm"), "" otherwise.
	UsageKind string
	// TargetID: a context_edit's (or label's) target entry; EditOmit: the
	// edit's replacement is null (the target leaves what the model sees).
	TargetID string
	EditOmit bool
	// Data is kept only for a context-prune-frontier entry (verbatim).
	Data json.RawMessage
}

// Usage is an assistant message's token counts and pi's usage.cost (USD);
// nil means pi did not write it. The cost split (CostInput..CostCacheWrite)
// is stored from schema version 4 on: rows ingested before have only
// CostTotal.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, TotalTokens    *int64
	CostTotal                                            *float64
	CostInput, CostOutput, CostCacheRead, CostCacheWrite *float64
	// CacheWrite1h is the part of CacheWrite written with the 1-hour TTL,
	// Reasoning the part of Output that was thinking (pi 1.6; nil before).
	CacheWrite1h, Reasoning *int64
}

// Thinking is one thinking block of an assistant message.
type Thinking struct {
	Index     int
	Redacted  bool
	Signed    bool
	SigDigest []byte // SHA-256 of the signature; nil when unsigned
	Chars     int
}

// IngestError is a line that could not be used.
type IngestError struct {
	Line   int
	Offset int64
	Reason string
}

// Batch is one unit of ingest, applied in one transaction together with
// its cursor. Path names the file (for Removed it is all that is needed).
type Batch struct {
	Kind    BatchKind
	Path    string
	Cursor  Cursor
	Header  *Header
	Entries []Entry
	Errors  []IngestError
	// ahead is what PrepareBatch did ahead of the transaction, or nil.
	ahead *aheadAggregate
}

// Ingested says what one batch changed.
type Ingested struct {
	File      int64  // files.id
	SessionID string // "" when the file has no header yet
	Entries   int    // entry rows written
	Linked    int    // stamps linked to the entries written (by signature)
	Events    []Event
}

// Ingest applies b and its cursor in one transaction: all of it or none
// of it is committed, and it is on disk when Ingest returns. The rows could
// be read again from the session file, but the events the commit carries
// are published at once, and a seq a client has seen must never be given to
// another event after a power loss (api.md: the log is durable).
func (d *DB) Ingest(ctx context.Context, b Batch) (Ingested, error) {
	var out Ingested
	err := d.ingestWrite(ctx, func(ctx context.Context, tx *sql.Tx, limit int) error {
		var err error
		out, err = d.ingestTx(ctx, tx, b, limit)
		return err
	})
	if err != nil {
		return Ingested{}, fmt.Errorf("ingest %s (%s): %w", b.Path, b.Kind, err)
	}
	return out, nil
}

// IngestAll applies several batches in one transaction (a group commit for
// a cold start over many small files). All or none are committed.
func (d *DB) IngestAll(ctx context.Context, bs []Batch) ([]Ingested, error) {
	out := make([]Ingested, 0, len(bs))
	err := d.ingestWrite(ctx, func(ctx context.Context, tx *sql.Tx, limit int) error {
		out = out[:0]
		for _, b := range bs {
			r, err := d.ingestTx(ctx, tx, b, limit)
			if err != nil {
				return fmt.Errorf("ingest %s (%s): %w", b.Path, b.Kind, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type liveFile struct {
	id       int64
	dev, ino uint64
	session  string
}

// ingestTx applies b in tx, up to limit rows to an INSERT.
func (d *DB) ingestTx(ctx context.Context, tx *sql.Tx, b Batch, limit int) (Ingested, error) {
	if b.Path == "" {
		return Ingested{}, errors.New("batch without a path")
	}
	var f liveFile
	var session sql.NullString
	var dev, ino int64 // SQLite integers are signed; the bits are kept
	var prevOffset int64
	err := tx.StmtContext(ctx, d.stmts.liveFile).QueryRowContext(ctx, b.Path).Scan(&f.id, &dev, &ino, &prevOffset, &session)
	known := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Ingested{}, fmt.Errorf("look up file: %w", err)
	}
	f.dev, f.ino, f.session = uint64(dev), uint64(ino), session.String
	now := nowMS()
	out := Ingested{File: f.id, SessionID: f.session}

	if b.Kind == Removed {
		if !known {
			return out, nil
		}
		if err := markRemoved(ctx, tx, f.id, now); err != nil {
			return out, err
		}
		ev, err := d.sessionEvent(ctx, tx, now, b, f.session, 0)
		if err != nil {
			return out, err
		}
		out.Events = append(out.Events, ev)
		return out, nil
	}
	switch b.Kind {
	case Found, Grew, Rewritten:
	default:
		return out, fmt.Errorf("unknown batch kind %q", b.Kind)
	}
	c := b.Cursor
	if known && (f.dev != c.Dev || f.ino != c.Ino) {
		// Another file now has this path (deleted and recreated, or renamed
		// into place): the old one is removed, keeping what it taught us.
		if err := markRemoved(ctx, tx, f.id, now); err != nil {
			return out, err
		}
		known = false
	}
	// whole: Entries are all of the file's rows once this batch is in.
	whole := !known || b.Kind != Grew
	if known && b.Kind != Grew {
		// Found again or rewritten: Entries is the whole file again.
		if err := clearFile(ctx, tx, f.id); err != nil {
			return out, err
		}
	}
	if known {
		_, err = tx.StmtContext(ctx, d.stmts.updateCursor).ExecContext(ctx,
			c.Offset, c.Lines, c.Check, now, f.id)
		if err != nil {
			return out, fmt.Errorf("save cursor: %w", err)
		}
	} else {
		err = tx.StmtContext(ctx, d.stmts.insertFile).QueryRowContext(ctx,
			b.Path, int64(c.Dev), int64(c.Ino), c.Offset, c.Lines, c.Check, now).Scan(&f.id)
		if err != nil {
			return out, fmt.Errorf("save cursor: %w", err)
		}
		f.session = ""
	}
	out.File = f.id

	if h := b.Header; h != nil {
		last := h.Timestamp
		_, err = tx.StmtContext(ctx, d.stmts.upsertSession).ExecContext(ctx,
			f.id, h.ID, h.Cwd, h.Version, nullString(h.ParentSession), nullString(h.Timestamp), nullString(last))
		if err != nil {
			return out, fmt.Errorf("save header: %w", err)
		}
		f.session = h.ID
	}
	out.SessionID = f.session

	rows, err := d.saveRows(ctx, tx, f.id, b.Entries, limit)
	if err != nil {
		return out, err
	}
	thinking, linked, seqs := rows.thinking, rows.linked, rows.seqs
	out.Entries = len(b.Entries)
	// The session's report aggregate moves with its rows, in this
	// transaction: a report never sees rows its aggregate lacks.
	if err := d.aggregateTx(ctx, tx, f.id, whole, b.Entries, b.ahead); err != nil {
		return out, err
	}
	for i := range b.Entries {
		id := b.Entries[i].ID
		if n := linked[id]; n > 0 {
			ev, err := appendEvent(ctx, tx, EventStamp, f.session, map[string]any{"entry": id, "source": "link", "linked": n})
			if err != nil {
				return out, err
			}
			out.Events = append(out.Events, ev)
			out.Linked += n
			delete(linked, id)
		}
	}
	if n := len(b.Entries); n > 0 {
		last := b.Entries[n-1]
		_, err := tx.StmtContext(ctx, d.stmts.advanceSession).ExecContext(ctx,
			n, thinking, last.ID, nullString(last.Timestamp), f.id)
		if err != nil {
			return out, fmt.Errorf("update session: %w", err)
		}
	}
	errs := b.Errors
	for _, c := range batchCycles(f.id, b.Entries, seqs) {
		// Recorded like a bad line, at the entry taken as a root.
		errs = append(errs, IngestError{Line: c.nodes[0].line, Offset: c.nodes[0].offset, Reason: c.reason()})
		d.cycles.mu.Lock()
		if d.cycles.done == nil {
			d.cycles.done = map[[2]int64]bool{}
		}
		d.cycles.done[[2]int64{f.id, c.nodes[0].seq}] = true
		d.cycles.mu.Unlock()
	}
	i := 0
	for _, ie := range errs {
		ins := d.stmts.insertError
		if ie.Offset == c.Offset || (known && b.Kind == Grew && ie.Offset == prevOffset) {
			// The line the cursor stops at, or stopped at before: an
			// overlong line the watcher records when it passes the bound,
			// and again after a restart if it had not ended. Recorded once
			// (at most two such errors a batch, so the check's scan of the
			// file's errors is not paid per line).
			ins = d.stmts.insertErrorOnce
		}
		res, err := tx.StmtContext(ctx, ins).ExecContext(ctx, f.id, ie.Line, ie.Offset, ie.Reason, now)
		if err != nil {
			return out, fmt.Errorf("save ingest error: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // recorded before
		}
		i++
		// One event per bad line, but a file of garbage must not flood
		// the log: past maxErrorEvents the rest are only counted.
		if i <= maxErrorEvents {
			fields := map[string]any{"file": b.Path, "line": ie.Line, "offset": ie.Offset, "reason": ie.Reason}
			if i == maxErrorEvents && len(errs) > maxErrorEvents {
				fields["more"] = len(errs) - maxErrorEvents
			}
			ev, err := appendEvent(ctx, tx, EventIngestError, f.session, fields)
			if err != nil {
				return out, err
			}
			out.Events = append(out.Events, ev)
		}
	}
	ev, err := d.sessionEvent(ctx, tx, now, b, f.session, len(b.Entries))
	if err != nil {
		return out, err
	}
	out.Events = append(out.Events, ev)
	return out, nil
}

// maxErrorEvents bounds the ingest-error events one batch writes.
const maxErrorEvents = 20

func (d *DB) sessionEvent(ctx context.Context, tx *sql.Tx, now int64, b Batch, session string, entries int) (Event, error) {
	fields := map[string]any{"change": string(b.Kind), "file": b.Path}
	if b.Kind != Removed {
		fields["entries"] = entries
		fields["offset"] = b.Cursor.Offset
	}
	return appendEvent(ctx, tx, EventSession, session, fields)
}

// markRemoved marks a file and its session removed. Entries, thinking
// blocks and frontier rows stay: a fork of the session may replay them.
func markRemoved(ctx context.Context, tx *sql.Tx, file, now int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE files SET removed = 1, updated_ms = ? WHERE id = ?`, now, file); err != nil {
		return fmt.Errorf("mark file removed: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET removed = 1 WHERE file = ?`, file); err != nil {
		return fmt.Errorf("mark session removed: %w", err)
	}
	return nil
}

// clearFile deletes what was ingested from a file (its rows are about to be
// read again from line 1). The session row stays, with zeroed counters.
func clearFile(ctx context.Context, tx *sql.Tx, file int64) error {
	for _, q := range []string{
		sqlClearThinking,
		`DELETE FROM frontier WHERE file = ?`,
		`DELETE FROM entries WHERE file = ?`,
		`DELETE FROM ingest_errors WHERE file = ?`,
		`DELETE FROM report_aggregates WHERE file = ?`,
		`DELETE FROM report_breaks WHERE file = ?`,
		`UPDATE sessions SET entries = 0, thinking = 0, leaf = NULL, last_activity = header_time WHERE file = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, file); err != nil {
			return fmt.Errorf("clear file rows: %w", err)
		}
	}
	return nil
}

// sqlClearThinking deletes a file's thinking blocks (thinking_file_sig's
// first column finds them).
const sqlClearThinking = `DELETE FROM thinking WHERE file = ?`

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// writerStmts are the hot statements, prepared once on the writer.
type writerStmts struct {
	liveFile, insertFile, updateCursor, upsertSession, advanceSession *sql.Stmt
	insertEntry, insertThinking, insertFrontier, insertError          *sql.Stmt
	insertErrorOnce, linkStamp, anyStamp                              *sql.Stmt
	// The batched INSERTs, their seqs given, are the driver's own
	// (rawstmts.go); insertEntry lets SQLite choose the seq.
}

func (d *DB) prepare(ctx context.Context) error {
	type prep struct {
		s   **sql.Stmt
		sql string
	}
	stmts := []prep{
		{&d.stmts.liveFile, `SELECT f.id, f.dev, f.ino, f.offset, s.id FROM files f LEFT JOIN sessions s ON s.file = f.id WHERE f.path = ? AND f.removed = 0`},
		{&d.stmts.insertFile, `INSERT INTO files (path, dev, ino, offset, lines, check_digest, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`},
		{&d.stmts.updateCursor, `UPDATE files SET offset = ?, lines = ?, check_digest = ?, updated_ms = ? WHERE id = ?`},
		{&d.stmts.upsertSession, `INSERT INTO sessions (file, id, cwd, version, parent_session, header_time, last_activity) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (file) DO UPDATE SET id = excluded.id, cwd = excluded.cwd, version = excluded.version,
			parent_session = excluded.parent_session, header_time = excluded.header_time,
			last_activity = coalesce(sessions.last_activity, excluded.last_activity), removed = 0`},
		{&d.stmts.advanceSession, `UPDATE sessions SET entries = entries + ?, thinking = thinking + ?, leaf = ?,
			last_activity = coalesce(?, last_activity) WHERE file = ?`},
		{&d.stmts.insertEntry, `INSERT INTO entries (file, id, parent_id, type, line, offset, length, timestamp, role, model, provider,
			stop_reason, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_total,
			tool_calls, user_text, first_kept_entry_id, custom_type, cost_input, cost_output, cost_cache_read, cost_cache_write,
			cache_write_1h_tokens, reasoning_tokens, usage_kind, target_id, edit_omit)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&d.stmts.insertThinking, insertRowsSQL("thinking", thinkingColumns, thinkingParams, 1)},
		{&d.stmts.insertFrontier, `INSERT INTO frontier (entry, file, data) VALUES (?, ?, ?)`},
		{&d.stmts.insertError, `INSERT INTO ingest_errors (file, line, offset, reason, time_ms) VALUES (?, ?, ?, ?, ?)`},
		{&d.stmts.insertErrorOnce, `INSERT INTO ingest_errors (file, line, offset, reason, time_ms) SELECT ?1, ?2, ?3, ?4, ?5
			WHERE NOT EXISTS (SELECT 1 FROM ingest_errors WHERE file = ?1 AND offset = ?3 AND line = ?2 AND reason = ?4)`},
		{&d.stmts.linkStamp, sqlLinkStampEntry},
		{&d.stmts.anyStamp, `SELECT EXISTS (SELECT 1 FROM stamps)`},
	}
	for _, p := range stmts {
		s, err := d.writer.PrepareContext(ctx, p.sql)
		if err != nil {
			d.stmts.close()
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.s = s
	}
	return nil
}

func (s *writerStmts) close() {
	for _, st := range []*sql.Stmt{s.liveFile, s.insertFile, s.updateCursor, s.upsertSession, s.advanceSession,
		s.insertEntry, s.insertThinking, s.insertFrontier, s.insertError, s.insertErrorOnce, s.linkStamp, s.anyStamp} {
		if st != nil {
			st.Close()
		}
	}
}
