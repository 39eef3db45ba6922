package daemon

import (
	"context"
	"time"

	"github.com/my-pi/bindery/db/sharedtier"
)

// Accounts team-wide (issue 29). A fingerprint is comparable only with
// one made under the same salt, so a machine joined to a shared tier
// takes the team's salt when it starts (the first machine to join keeps
// its own: sharedtier.TeamSalt). Adopting a new salt forgets the accounts
// recorded under the old one (db.AdoptAccountSalt): those blocks are then
// not compared, never compared wrongly. A machine that cannot reach the
// tier at its start keeps its own salt for that run: its stamps ship
// under its own salt's id, and no other machine reads their accounts.
//
// Adoption happens at the start only, before any host asks for the salt:
// a host (bindery proxy) keeps the salt it was given for as long as it
// runs, so the salt must not change under it.

// teamSaltWait bounds reading the team's salt at the start.
const teamSaltWait = 5 * time.Second

// joinAccounts adopts the team's account salt and says which salt this
// machine's fingerprints are under.
func (d *daemon) joinAccounts(ctx context.Context) error {
	own, err := d.store.AccountSalt(ctx)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, teamSaltWait)
	team, err := d.shared.TeamSalt(tctx, own)
	cancel()
	if err != nil {
		d.log.Warn("the shared tier's account salt was not read: this machine fingerprints credentials with its own until it starts joined again, and account-bound blocks are not compared across machines meanwhile", "shared", d.shared.Name(), "err", err)
		d.shared.SetSaltID(sharedtier.SaltID(own))
		return nil
	}
	changed, err := d.store.AdoptAccountSalt(ctx, team)
	if err != nil {
		return err
	}
	if changed {
		d.log.Info("adopted the team's account salt: accounts recorded under this machine's own are forgotten (not compared)", "shared", d.shared.Name())
	}
	d.shared.SetSaltID(sharedtier.SaltID(team))
	return nil
}

// pushAlias writes an alias a host just told this machine to the tier,
// within the wait; a failure is logged, and the alias stays this
// machine's until a host tells it again.
func (b *Binder) pushAlias(ctx context.Context, fingerprint, account string, nowMs int64) {
	s := b.shared
	if s == nil {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait)
	defer cancel()
	if err := s.store.PutAlias(pctx, fingerprint, account, nowMs); err != nil {
		s.log.Warn("account alias not written to the shared tier; other machines learn it when their hosts see that organization", "err", err)
	}
}

// learnAliases records aliases other machines learned (the shipper pulls
// them from the tier), as a host's own would be.
func (b *Binder) learnAliases(ctx context.Context, aliases []sharedtier.Alias) error {
	now := time.Now().UnixMilli()
	for _, a := range aliases {
		if err := b.recordAlias(ctx, a.Fingerprint, a.Account, now); err != nil {
			return err
		}
	}
	return nil
}

// pullAliases records the aliases the tier gained since the last pull
// (other machines', and this one's own again: the first alias stays, so
// that changes nothing).
func (s *shipper) pullAliases(ctx context.Context) error {
	if s.learn == nil {
		return nil
	}
	for {
		got, err := s.shared.AliasesAfter(ctx, s.aliasAfter)
		if err != nil || len(got) == 0 {
			return err
		}
		if err := s.learn(ctx, got); err != nil {
			return err
		}
		s.aliasAfter = got[len(got)-1].ID
		if len(got) < sharedtier.MaxAliasesRead {
			return nil
		}
	}
}
