package daemon

import (
	"context"
	"fmt"
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
