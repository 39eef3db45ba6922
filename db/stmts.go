package db

import (
	"context"
	"database/sql"
	"fmt"
)

// The binding calls' writes (compile, accept, release) and the events they
// append run the same few statements thousands of times. Parsing their SQL
// again on every call (sqlite3_prepare) was about 18% of an accept's CPU,
// so they are prepared once on the writer when the database opens, and a
// write transaction uses them through tx.StmtContext, which reuses the
// statement already prepared on the single writer connection.
//
// They cannot be prepared lazily: inside a write the transaction holds the
// writer's only connection, so preparing on the pool would wait for it
// forever. Any statement not listed here runs as before (prepared per call).
const (
	sqlAppendEvent     = `INSERT INTO events (time_ms, type, conversation, fields) VALUES (?, ?, ?, ?)`
	sqlIngestHighWater = `SELECT coalesce(max(seq), 0) FROM entries`
	sqlLastReleaseID   = `SELECT coalesce(max(id), 0) FROM releases`
	sqlUpsertConv      = `INSERT INTO conversations (id, engaged_compile, engaged_ms, parent_conversation, parent_branch, parent_release, session_file, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			engaged_compile = coalesce(conversations.engaged_compile, excluded.engaged_compile),
			engaged_ms = coalesce(conversations.engaged_ms, excluded.engaged_ms),
			session_file = coalesce(excluded.session_file, conversations.session_file)`
	sqlUpsertBranch = `INSERT INTO branches (conversation, branch, owner, parent_conversation, parent_branch, parent_release, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (conversation, branch) DO UPDATE SET owner = coalesce(excluded.owner, branches.owner)`
	sqlSetBranchOwner = `UPDATE branches SET owner = ? WHERE conversation = ? AND branch = ?`
	sqlInsertCompile  = `INSERT INTO compiles (seq, id, conversation, branch, created_ms, record) VALUES (?, ?, ?, ?, ?, ?)`
	sqlMarkAccepted   = `UPDATE compiles SET accepted_ms = ?, stamped = ?, released = ?, last_read = ? WHERE id = ? AND accepted_ms IS NULL`
	sqlNullRecord     = `UPDATE compiles SET record = NULL WHERE id = ? AND accepted_ms IS NOT NULL`
	sqlForgetCompile  = `DELETE FROM compiles WHERE id = ?`
	sqlInsertChunk    = `INSERT INTO record_chunks (conversation, hash, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`
	sqlDeleteChunk    = `DELETE FROM record_chunks WHERE conversation = ? AND hash = ?`
	sqlUpdateRecord   = `UPDATE compiles SET record = ? WHERE id = ? AND record IS NOT NULL`
	sqlInsertStamp    = `INSERT INTO stamps (key, seed, chain, pred, model, source, conversation, branch, compile, entry, created_ms, account)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`
	// sqlBlockEntry is the newest message of a session holding a block
	// (by digest): the session's files (sessions_id), then each file's
	// block (thinking_file_sig).
	sqlBlockEntry = `SELECT e.id FROM thinking t JOIN entries e ON e.seq = t.entry
			JOIN sessions s ON s.file = t.file WHERE t.sig_digest = ? AND s.id = ? AND e.type = 'message' ORDER BY e.seq DESC LIMIT 1`
	sqlLinkStampEntry     = `UPDATE stamps SET entry = ? WHERE key = ? AND entry IS NULL`
	sqlLinkStampInSession = `UPDATE stamps SET entry = (SELECT e.id FROM thinking t JOIN entries e ON e.seq = t.entry
				JOIN sessions s ON s.file = t.file WHERE t.sig_digest = ?1 AND s.id = ?2 AND e.type = 'message' ORDER BY e.seq DESC LIMIT 1)
			WHERE key = ?1 AND entry IS NULL AND EXISTS (SELECT 1 FROM thinking t JOIN entries e ON e.seq = t.entry
				JOIN sessions s ON s.file = t.file WHERE t.sig_digest = ?1 AND s.id = ?2 AND e.type = 'message')`
	sqlInsertRelease = `INSERT INTO releases (conversation, branch, key, reason, compile, message, path, seq, created_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation, branch, key) DO NOTHING`
	// A session's report aggregate, kept at ingest (aggregate.go).
	sqlPutAggregate = `INSERT INTO report_aggregates (file, sums, walk, fresh, updated_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (file) DO UPDATE SET sums = excluded.sums, walk = excluded.walk, fresh = excluded.fresh, updated_ms = excluded.updated_ms`
	sqlDeleteBreaks = `DELETE FROM report_breaks WHERE file = ?`
	sqlInsertBreak  = `INSERT INTO report_breaks (file, data) VALUES (?, ?)`
	// Tx.Savepoint's: the journal wraps every call of a shared commit in one.
	sqlSavepoint        = `SAVEPOINT tx_savepoint`
	sqlReleaseSavepoint = `RELEASE tx_savepoint`
	sqlRollbackTo       = `ROLLBACK TO tx_savepoint`
)

var hotWriteSQL = []string{
	sqlAppendEvent, sqlIngestHighWater, sqlLastReleaseID, sqlUpsertConv, sqlUpsertBranch, sqlSetBranchOwner, sqlInsertCompile,
	sqlMarkAccepted, sqlNullRecord, sqlForgetCompile, sqlInsertChunk, sqlDeleteChunk, sqlUpdateRecord, sqlInsertStamp, sqlLinkStampEntry,
	sqlLinkStampInSession, sqlInsertRelease, sqlPutAggregate, sqlDeleteBreaks, sqlInsertBreak, sqlSavepoint, sqlReleaseSavepoint, sqlRollbackTo,
}

// hotStmts are hotWriteSQL prepared on the writer, by query text. Read-only
// once Open returns.
type hotStmts map[string]*sql.Stmt

// hotStmtsKey carries the writer's hotStmts in the context a write
// transaction's fn receives (DB.write): the binding store's functions take
// only ctx and tx, and find them there.
type hotStmtsKey struct{}

func (d *DB) prepareHot(ctx context.Context) error {
	d.hot = make(hotStmts, len(hotWriteSQL))
	for _, q := range hotWriteSQL {
		s, err := d.writer.PrepareContext(ctx, q)
		if err != nil {
			d.hot.close()
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		d.hot[q] = s
	}
	return nil
}

func (h hotStmts) close() {
	for _, s := range h {
		s.Close()
	}
}

// txStmt returns query as a statement of tx, reusing the writer's prepared
// one when ctx is a write transaction's and query is one of hotWriteSQL;
// nil otherwise.
func txStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	h, _ := ctx.Value(hotStmtsKey{}).(hotStmts)
	if s := h[query]; s != nil {
		return tx.StmtContext(ctx, s)
	}
	return nil
}

// txExec runs a statement in tx, prepared once if it is a hot one.
func txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if s := txStmt(ctx, tx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// txQueryRow runs a one-row query in tx, prepared once if it is a hot one.
func txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if s := txStmt(ctx, tx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txPrepare returns a statement of tx for a loop of executions: the hot
// one, or one prepared for this transaction (closed with it).
func txPrepare(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	if s := txStmt(ctx, tx, query); s != nil {
		return s, nil
	}
	return tx.PrepareContext(ctx, query)
}
