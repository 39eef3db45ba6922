package db

import (
	"context"
	"fmt"
)

// RecordedError is one row of ingest_errors with its file's path.
type RecordedError struct {
	Path    string
	Session string // "" when the file has no header
	Line    int
	Offset  int64
	Reason  string
	TimeMS  int64
	Removed bool // the file is gone
}

// IngestErrors lists the newest limit errors recorded for live files, newest
// first (all files when session is "", else only the files of that session).
// The count in Stats covers every file, removed ones too.
func (d *DB) IngestErrors(ctx context.Context, session string, limit int) ([]RecordedError, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT f.path, coalesce(s.id, ''), e.line, e.offset, e.reason, e.time_ms, f.removed
		FROM ingest_errors e JOIN files f ON f.id = e.file LEFT JOIN sessions s ON s.file = f.id
		WHERE f.removed = 0 AND (?1 = '' OR s.id = ?1) ORDER BY e.id DESC LIMIT ?2`, session, limit)
	if err != nil {
		return nil, fmt.Errorf("ingest errors: %w", err)
	}
	defer rows.Close()
	var out []RecordedError
	for rows.Next() {
		var e RecordedError
		if err := rows.Scan(&e.Path, &e.Session, &e.Line, &e.Offset, &e.Reason, &e.TimeMS, &e.Removed); err != nil {
			return nil, fmt.Errorf("ingest errors: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ingest errors: %w", err)
	}
	return out, nil
}

// FileIngestErrors lists the errors of the live file at path, in file order
// (at most limit).
func (d *DB) FileIngestErrors(ctx context.Context, path string, limit int) ([]RecordedError, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT f.path, coalesce(s.id, ''), e.line, e.offset, e.reason, e.time_ms, f.removed
		FROM ingest_errors e JOIN files f ON f.id = e.file LEFT JOIN sessions s ON s.file = f.id
		WHERE f.path = ? AND f.removed = 0 ORDER BY e.offset, e.id LIMIT ?`, path, limit)
	if err != nil {
		return nil, fmt.Errorf("ingest errors of %s: %w", path, err)
	}
	defer rows.Close()
	var out []RecordedError
	for rows.Next() {
		var e RecordedError
		if err := rows.Scan(&e.Path, &e.Session, &e.Line, &e.Offset, &e.Reason, &e.TimeMS, &e.Removed); err != nil {
			return nil, fmt.Errorf("ingest errors of %s: %w", path, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ingest errors of %s: %w", path, err)
	}
	return out, nil
}
