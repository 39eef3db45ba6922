package db

import (
	"context"
	"database/sql"
	"sync"
)

// A compile reads the same few rows every turn (its session's file, the
// branch's path, the new blocks' stamps), and preparing each query again
// (sqlite3_prepare) cost about as much as running it. The readers' fixed
// queries are prepared once, on first use, and kept: database/sql prepares
// a kept statement again on each pool connection the first time it runs
// there. Queries whose text varies (an IN list's length) are not kept.
type readStmts struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// readStmtsMax bounds the statements kept; past it a query is prepared per
// call, as it would be without the cache.
const readStmtsMax = 64

func (r *readStmts) get(ctx context.Context, readers *sql.DB, q string) *sql.Stmt {
	r.mu.Lock()
	s, full := r.m[q], len(r.m) >= readStmtsMax
	r.mu.Unlock()
	if s != nil || full {
		return s
	}
	// prepared outside the lock: it may wait for a pool connection
	s, err := readers.PrepareContext(ctx, q)
	if err != nil {
		return nil // the query runs unprepared and reports the error itself
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if had := r.m[q]; had != nil || len(r.m) >= readStmtsMax {
		s.Close()
		return had
	}
	if r.m == nil {
		r.m = map[string]*sql.Stmt{}
	}
	r.m[q] = s
	return s
}

func (r *readStmts) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.m {
		s.Close()
	}
	r.m = nil
}

// readRow is d.readers.QueryRowContext through the kept statement of q.
func (d *DB) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	if s := d.reads.get(ctx, d.readers, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return d.readers.QueryRowContext(ctx, q, args...)
}

// readQuery is d.readers.QueryContext through the kept statement of q.
func (d *DB) readQuery(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := d.reads.get(ctx, d.readers, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return d.readers.QueryContext(ctx, q, args...)
}
