package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// A first scan's entry and thinking rows go to the driver's statements
// directly, not through database/sql: for a 32-row INSERT of 32 columns,
// database/sql's per-call work (a []driver.NamedValue of 1,024 made and
// each argument checked and converted, the statement's locks) measured
// about an eighth of the INSERT's time, for values that are already
// driver values. The statements are prepared once on the writer's driver
// connection and run inside the write transaction holding it (sql.Conn.Raw),
// as the transaction's own statements would.

// writerConnKey carries the write transaction's *sql.Conn in the context
// its fn receives (DB.writeAs).
type writerConnKey struct{}

// rawStmts are the batched INSERTs prepared on one driver connection.
// Only the holder of the writer connection touches them.
type rawStmts struct {
	conn     driver.Conn // the driver connection they were prepared on
	entries  [insertSizes]driver.StmtExecContext
	thinking [insertSizes]driver.StmtExecContext
	closers  []driver.Stmt
}

// rawExec runs fn with the batched INSERTs of the transaction's driver
// connection, preparing them the first time that connection is seen.
func (d *DB) rawExec(ctx context.Context, fn func(s *rawStmts) error) error {
	conn, _ := ctx.Value(writerConnKey{}).(*sql.Conn)
	if conn == nil {
		return errors.New("batched rows outside a write transaction")
	}
	return conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("driver connection %T", dc)
		}
		if d.raw.conn != c {
			// The pool replaced the writer connection (after a bad
			// connection): the old statements went with it, and are
			// not finalized on a closed connection.
			d.raw = rawStmts{}
			if err := d.raw.prepare(ctx, c); err != nil {
				d.raw.close()
				d.raw = rawStmts{}
				return err
			}
		}
		return fn(&d.raw)
	})
}

func (s *rawStmts) prepare(ctx context.Context, c driver.Conn) error {
	p, ok := c.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("driver connection %T cannot prepare with a context", c)
	}
	for k := range insertSizes {
		for _, q := range []struct {
			to      *driver.StmtExecContext
			table   string
			columns string
			params  int
		}{
			{&s.entries[k], "entries", entryColumns, entryParams},
			{&s.thinking[k], "thinking", thinkingColumns, thinkingParams},
		} {
			st, err := p.PrepareContext(ctx, insertRowsSQL(q.table, q.columns, q.params, 1<<k))
			if err != nil {
				return fmt.Errorf("prepare %d-row insert into %s: %w", 1<<k, q.table, err)
			}
			s.closers = append(s.closers, st)
			x, ok := st.(driver.StmtExecContext)
			if !ok {
				return fmt.Errorf("driver statement %T cannot execute with a context", st)
			}
			*q.to = x
		}
	}
	s.conn = c
	return nil
}

func (s *rawStmts) close() {
	for _, st := range s.closers {
		st.Close()
	}
	s.closers = nil
}

// closeRaw closes the batched INSERTs while their connection is the
// writer's (DB.Close, after every writer stopped).
func (d *DB) closeRaw(ctx context.Context) error {
	if d.raw.conn == nil {
		return nil
	}
	conn, err := d.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if c, _ := dc.(driver.Conn); c == d.raw.conn {
			d.raw.close()
		}
		d.raw = rawStmts{}
		return nil
	})
}
