package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// AccountSalt implements api.Binder: the store's account salt, read once
// (it never changes once made: db.AccountSalt). Hosts fingerprint their
// credentials with it (api.AccountFingerprint); the daemon itself never
// sees a credential.
func (b *Binder) AccountSalt(ctx context.Context) ([]byte, error) {
	if p := b.salt.Load(); p != nil {
		return *p, nil
	}
	salt, err := b.db.AccountSalt(ctx)
	if err != nil {
		return nil, fmt.Errorf("account salt: %w", err)
	}
	b.salt.Store(&salt)
	return salt, nil
}

// AccountAlias implements api.Binder: the fingerprint belongs to the
// account from now on (the first alias of a fingerprint stays), for the
// stamps it minted before too.
func (b *Binder) AccountAlias(ctx context.Context, a api.AccountAlias) (*api.AccountAliasAnswer, error) {
	now := time.Now().UnixMilli()
	added, cur, err := b.putAlias(ctx, a.Fingerprint, a.Account, now)
	if errors.Is(err, db.ErrTooManyAliases) {
		return nil, api.Errorf(api.CodeConflict, "account alias: %v", db.ErrTooManyAliases)
	}
	if err != nil {
		return nil, err
	}
	if added {
		b.pushAlias(ctx, a.Fingerprint, cur, now) // account_team.go
	}
	return &api.AccountAliasAnswer{Added: added, Account: cur}, nil
}

// recordAlias records an alias another machine learned.
func (b *Binder) recordAlias(ctx context.Context, fingerprint, account string, nowMs int64) error {
	_, _, err := b.putAlias(ctx, fingerprint, account, nowMs)
	return err
}

// putAlias stores an alias and keeps the cached aliases current.
func (b *Binder) putAlias(ctx context.Context, fingerprint, account string, nowMs int64) (bool, string, error) {
	added, cur, err := b.db.PutAccountAlias(ctx, fingerprint, account, nowMs)
	if err != nil {
		return false, "", err
	}
	b.aliasMu.Lock()
	defer b.aliasMu.Unlock()
	if m := b.aliases.Load(); m != nil {
		next := maps.Clone(*m)
		next[fingerprint] = cur
		b.aliases.Store(&next)
	}
	return added, cur, nil
}

// accountAliases is every alias, read once from the store and then kept
// current by AccountAlias; a compile reads it without a lock (a map is
// replaced, never changed).
func (b *Binder) accountAliases(ctx context.Context) (map[string]string, error) {
	if m := b.aliases.Load(); m != nil {
		return *m, nil
	}
	b.aliasMu.Lock()
	defer b.aliasMu.Unlock()
	if m := b.aliases.Load(); m != nil {
		return *m, nil
	}
	m, err := b.db.AccountAliases(ctx)
	if err != nil {
		return nil, err
	}
	b.aliases.Store(&m)
	return m, nil
}
