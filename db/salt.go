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

// MaxAccountAliases bounds account_aliases: a team's keys number in the
// tens; a host that invents fingerprints is stopped here.
const MaxAccountAliases = 65536

// ErrTooManyAliases: the store holds MaxAccountAliases aliases.
var ErrTooManyAliases = fmt.Errorf("the store holds %d account aliases, its bound", MaxAccountAliases)

// AccountAliases returns every alias, fingerprint to account.
func (d *DB) AccountAliases(ctx context.Context) (map[string]string, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT fingerprint, account FROM account_aliases`)
	if err != nil {
		return nil, fmt.Errorf("account aliases: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var fp, acct string
		if err := rows.Scan(&fp, &acct); err != nil {
			return nil, fmt.Errorf("account aliases: %w", err)
		}
		out[fp] = acct
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("account aliases: %w", err)
	}
	return out, nil
}

// PutAccountAlias records that fingerprint belongs to account. The first
// alias of a fingerprint stays (a key does not change organization); added
// is false when one was there, current is the account it aliases now.
func (d *DB) PutAccountAlias(ctx context.Context, fingerprint, account string, nowMs int64) (added bool, current string, err error) {
	err = d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		added, current = false, ""
		err := tx.QueryRowContext(ctx, `SELECT account FROM account_aliases WHERE fingerprint = ?`, fingerprint).Scan(&current)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM account_aliases`).Scan(&n); err != nil {
			return err
		}
		if n >= MaxAccountAliases {
			return ErrTooManyAliases
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO account_aliases (fingerprint, account, created_ms) VALUES (?, ?, ?)`, fingerprint, account, nowMs); err != nil {
			return err
		}
		added, current = true, account
		return nil
	})
	if err != nil {
		return false, "", fmt.Errorf("account alias: %w", err)
	}
	return added, current, nil
}
