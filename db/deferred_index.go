package db

import (
	"context"
	"database/sql"
	"fmt"
)

// thinking_sig is keyed by a digest, so each of a first scan's thinking
// rows lands on a random page of it: once the index outgrows SQLite's page
// cache every insert reads and dirties a page of its own, and on a large
// archive that was over a third of what the rows cost. Built once the
// scan is over (a sort, one pass), it costs a fraction of that.
//
// Only an empty database defers it (a cold start): dropping the index of
// a database that holds rows would mean sorting them all again. While it
// is absent the queries that use it (BlockEntries, the link of a stamp in
// a session) scan the thinking rows instead: slower, never different.
// Open creates it again if a crash or a stop ended the scan first.

// sqlThinkingSigIndex is schema.sql's thinking_sig (SQLite stores the
// statement without its IF NOT EXISTS, so the schema reads the same).
const sqlThinkingSigIndex = `CREATE INDEX IF NOT EXISTS thinking_sig ON thinking(sig_digest) WHERE sig_digest IS NOT NULL`

// DeferIndexes drops the indexes a first scan builds once it is over
// (BuildIndexes), when the database holds no thinking row yet. It reports
// whether it did.
func (d *DB) DeferIndexes(ctx context.Context) (bool, error) {
	var deferred bool
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var empty bool
		if err := tx.QueryRowContext(ctx, `SELECT NOT EXISTS (SELECT 1 FROM thinking)`).Scan(&empty); err != nil {
			return err
		}
		if !empty {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `DROP INDEX IF EXISTS thinking_sig`); err != nil {
			return err
		}
		deferred = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("defer indexes of %s: %w", d.path, err)
	}
	return deferred, nil
}

// BuildIndexes creates the indexes DeferIndexes dropped; it does nothing
// when they are there.
func (d *DB) BuildIndexes(ctx context.Context) error {
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, sqlThinkingSigIndex)
		return err
	})
	if err != nil {
		return fmt.Errorf("build indexes of %s: %w", d.path, err)
	}
	return nil
}
