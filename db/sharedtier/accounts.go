package sharedtier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/db"
)

// SaltID names an account salt without showing it: the first 8 bytes of
// its SHA-256, in hex. Stamps and aliases carry it, so a fingerprint is
// compared only with one made under the same salt.
func SaltID(salt []byte) string {
	h := sha256.Sum256(salt)
	return hex.EncodeToString(h[:8])
}

// TeamSalt returns the team's account salt: candidate when no machine set
// one before (the first machine to join keeps its own salt, and with it
// every fingerprint it already recorded), else the one set.
func (s *Store) TeamSalt(ctx context.Context, candidate []byte) ([]byte, error) {
	if len(candidate) != db.AccountSaltSize {
		return nil, fmt.Errorf("team salt: %d bytes, want %d", len(candidate), db.AccountSaltSize)
	}
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	var salt []byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO team_salt (salt) VALUES ($1) ON CONFLICT (one) DO NOTHING`, candidate); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT salt FROM team_salt`).Scan(&salt)
	})
	if err != nil {
		return nil, err
	}
	if len(salt) != db.AccountSaltSize {
		return nil, fmt.Errorf("the shared tier's team salt is %d bytes, want %d", len(salt), db.AccountSaltSize)
	}
	return salt, nil
}

// SetSaltID says which salt this machine's fingerprints are made with:
// shipped with its stamps and aliases, and the only one whose stamps'
// accounts it reads. Unset, no account is read or shipped comparable.
func (s *Store) SetSaltID(id string) { s.saltID.Store(&id) }

func (s *Store) salt() string {
	if p := s.saltID.Load(); p != nil {
		return *p
	}
	return ""
}

// Alias is one account alias as the tier holds it.
type Alias struct {
	ID          int64
	Fingerprint string
	Account     string
}

// MaxAliasesRead bounds one read of aliases (db.MaxAccountAliases is the
// most a machine keeps).
const MaxAliasesRead = 1000

// PutAlias records that fingerprint is account, under this machine's salt;
// the first alias of a fingerprint stays.
func (s *Store) PutAlias(ctx context.Context, fingerprint, account string, nowMs int64) error {
	id := s.salt()
	if id == "" {
		return nil // not comparable across machines: kept here only
	}
	if err := s.Ready(ctx); err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO account_aliases (fingerprint, account, salt_id, machine, created_ms)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (fingerprint) DO NOTHING`, fingerprint, account, id, s.machine, nowMs)
		return err
	})
}

// AliasesAfter returns up to MaxAliasesRead aliases made under this
// machine's salt with an id past after, in id order.
func (s *Store) AliasesAfter(ctx context.Context, after int64) ([]Alias, error) {
	id := s.salt()
	if id == "" {
		return nil, nil
	}
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	var out []Alias
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, `SELECT id, fingerprint, account FROM account_aliases WHERE id > $1 AND salt_id = $2 ORDER BY id LIMIT $3`, after, id, MaxAliasesRead)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a Alias
			if err := rows.Scan(&a.ID, &a.Fingerprint, &a.Account); err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}
