package db

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
)

// AdoptAccountSalt makes salt the store's account salt (a machine joining
// a team takes the team's: sharedtier.TeamSalt), and reports whether it
// changed. A fingerprint made with the old salt means nothing under the
// new one, so in the same transaction every stamp forgets its account
// (unknown: never compared, as before migration 013) and every alias
// goes (the hosts tell them again, fingerprinted anew). Only the account
// is forgotten: a stamp's binding facts stay as they were.
func (d *DB) AdoptAccountSalt(ctx context.Context, salt []byte) (bool, error) {
	if len(salt) != AccountSaltSize {
		return false, fmt.Errorf("account salt: %d bytes, want %d", len(salt), AccountSaltSize)
	}
	changed := false
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		changed = false
		var cur []byte
		err := tx.QueryRowContext(ctx, `SELECT value FROM salts WHERE name = 'account'`).Scan(&cur)
		if err == nil && bytes.Equal(cur, salt) {
			return nil
		}
		if err != nil && err != sql.ErrNoRows {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO salts (name, value) VALUES ('account', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, salt); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE stamps SET account = NULL WHERE account IS NOT NULL`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM account_aliases`); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("account salt: %w", err)
	}
	return changed, nil
}
