package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the shared schema's versions as forward-only steps,
// numbered like SQLite's (db/migrations): NNN_name.sql takes a database
// from version NNN-1 to NNN. A new database runs them all in order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type step struct {
	Version int
	Name    string
	SQL     string
}

var steps = func() []step {
	s, err := loadSteps(migrationFiles)
	if err != nil {
		panic(err) // the embedded files are part of the build
	}
	return s
}()

// LatestSchemaVersion is the shared schema version this build writes.
func LatestSchemaVersion() int { return len(steps) }

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

// migrationLock is the advisory lock key under which machines migrate:
// two machines starting at once on a new server must not both run 001.
const migrationLock = 0x62696e64657279 // "bindery"

// migrate brings the shared database to len(steps), each missing step in
// its own transaction under the advisory lock, so a failed step leaves the
// database at the previous version and a concurrent machine waits, then
// finds the step done. A database newer than this build is refused: an
// older bindery must not write rows a newer schema reads differently.
func migrate(ctx context.Context, pool *pgxpool.Pool, steps []step) error {
	for _, s := range steps {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS bindery_schema (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var have int
			if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM bindery_schema").Scan(&have); err != nil {
				return err
			}
			if have > len(steps) {
				return fmt.Errorf("the shared database is at schema version %d, newer than this bindery's %d: upgrade bindery", have, len(steps))
			}
			if have >= s.Version {
				return nil
			}
			if have != s.Version-1 {
				return fmt.Errorf("the shared database is at schema version %d, cannot apply %s", have, s.Name)
			}
			if _, err := tx.Exec(ctx, s.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO bindery_schema (version, name) VALUES ($1, $2)", s.Version, s.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate the shared database to %s: %w", s.Name, err)
		}
	}
	return nil
}
