package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
)

// AccountSaltSize is the length of the account fingerprint salt.
const AccountSaltSize = 32

// AccountSalt returns the store's account fingerprint salt (migration 013,
// table salts), made from crypto/rand the first time it is asked for and
// kept for good: a fingerprint made with it must mean the same credential
// on every later day, or every account-bound block would be stripped after
// a restart. It is not a credential; it keeps a fingerprint from being
// tested against a guessed key anywhere but here.
func (d *DB) AccountSalt(ctx context.Context) ([]byte, error) {
	salt, err := d.readSalt(ctx, d.readers)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return salt, err
	}
	fresh := make([]byte, AccountSaltSize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("account salt: %w", err)
	}
	err = d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// ON CONFLICT: two first callers make one salt, the first's.
		_, err := tx.ExecContext(ctx, `INSERT INTO salts (name, value) VALUES ('account', ?) ON CONFLICT (name) DO NOTHING`, fresh)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("account salt: %w", err)
	}
	return d.readSalt(ctx, d.writer)
}

func (d *DB) readSalt(ctx context.Context, q *sql.DB) ([]byte, error) {
	var salt []byte
	err := q.QueryRowContext(ctx, `SELECT value FROM salts WHERE name = 'account'`).Scan(&salt)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("account salt: %w", err)
	}
	if len(salt) != AccountSaltSize {
		return nil, fmt.Errorf("account salt: %d bytes stored, want %d", len(salt), AccountSaltSize)
	}
	return salt, nil
}
