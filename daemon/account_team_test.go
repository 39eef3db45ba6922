package daemon

import (
	"bytes"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/db/sharedtier"
)

// An alias a host tells one replica reaches the other through the tier:
// written before the call answers, pulled by the other's shipper, and
// from then on in the aliases its compiles read. Under another salt (a
// machine that could not adopt the team's) it is not read.
func TestAccountAliasesTeamWide(t *testing.T) {
	dsn := pgtest.Database(t)
	a := newReplica(t, dsn, "replica-a", 5*time.Second)
	b := newReplica(t, dsn, "replica-b", 5*time.Second)
	team := bytes.Repeat([]byte{9}, db.AccountSaltSize)
	for _, r := range []*replica{a, b} {
		r.store.SetSaltID(sharedtier.SaltID(team))
		r.ship.learn = r.b.learnAliases
	}
	fp, org := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	if ans, err := a.b.AccountAlias(t.Context(), api.AccountAlias{Fingerprint: fp, Account: org}); err != nil || !ans.Added {
		t.Fatalf("alias on A: %+v %v", ans, err)
	}
	if err := b.ship.pullAliases(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := b.b.accountAliases(t.Context())
	if err != nil || got[fp] != org {
		t.Fatalf("B's aliases after its pull: %v %v", got, err)
	}
	// pulled again: nothing new, nothing changed
	if err := b.ship.pullAliases(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newReplica(t, dsn, "offline-at-start", 5*time.Second)
	c.store.SetSaltID(sharedtier.SaltID(bytes.Repeat([]byte{1}, db.AccountSaltSize)))
	c.ship.learn = c.b.learnAliases
	if err := c.ship.pullAliases(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.b.accountAliases(t.Context()); len(got) != 0 {
		t.Fatalf("a machine under its own salt learned %v", got)
	}
}
