package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// migrationFiles are the schema's versions as forward-only steps:
// 001_initial.sql is version 1 frozen; NNN_*.sql takes a database from
// version NNN-1 to NNN. schema.sql is always the result of all of them.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// step is one migration: run SQL, then user_version = Version.
type step struct {
	Version int
	Name    string
	SQL     string
}

var steps = mustLoadSteps(migrationFiles)

// LatestSchemaVersion is the schema version this build of bindery writes.
func LatestSchemaVersion() int { return len(steps) }

func mustLoadSteps(fsys fs.FS) []step {
	s, err := loadSteps(fsys)
	if err != nil {
		panic(err) // the embedded files are part of the build
	}
	return s
}

// loadSteps reads migrations/NNN_name.sql, numbered 1, 2, 3... without gaps.
func loadSteps(fsys fs.FS) ([]step, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []step
	for i, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want name %03d_*.sql", name, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, step{Version: v, Name: base, SQL: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations embedded")
	}
	return out, nil
}

// migrate brings the database behind w to len(steps): a new database gets
// schema whole; an older one gets each missing step in its own
// transaction, so a failed step leaves the database at the previous version.
func migrate(ctx context.Context, w *sql.DB, schema string, steps []step) error {
	conn, err := w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var appID, version int
	if err := conn.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return fmt.Errorf("read application_id: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read user_version: %w", err)
	}
	if appID != 0 && appID != ApplicationID {
		return fmt.Errorf("not a bindery database (application_id %#x); refusing to touch it", appID)
	}
	latest := len(steps)
	if version > latest {
		return fmt.Errorf("database schema version %d is newer than this bindery understands (%d): use a newer bindery", version, latest)
	}
	if version == 0 {
		var tables int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
			return fmt.Errorf("inspect schema: %w", err)
		}
		if tables > 0 {
			return fmt.Errorf("not a bindery database (it has %d schema objects and no bindery version); refusing to touch it", tables)
		}
		return inTx(ctx, conn, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, schema); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
			return setVersion(ctx, tx, latest)
		})
	}
	if appID != ApplicationID {
		return fmt.Errorf("not a bindery database (application_id 0, user_version %d); refusing to touch it", version)
	}
	for _, s := range steps[version:] {
		err := inTx(ctx, conn, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, s.SQL); err != nil {
				return err
			}
			return setVersion(ctx, tx, s.Version)
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d (%s): %w", s.Version, s.Name, err)
		}
	}
	return nil
}

func setVersion(ctx context.Context, tx *sql.Tx, v int) error {
	// PRAGMA takes no bound parameters; both values are integers we chose.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID)); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
	return err
}

func inTx(ctx context.Context, conn *sql.Conn, fn func(*sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
