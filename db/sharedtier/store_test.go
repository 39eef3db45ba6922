package sharedtier

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func digest(s string) binding.Digest { return binding.SignatureKey(s) }

func stampRow(sig string) db.StampRow {
	return db.StampRow{Stamp: binding.Stamp{Key: digest(sig), Seed: digest("seed"), Chain: digest(sig + "/chain"), Pred: digest("pred"), Model: "claude-opus-5-5", Account: "0123456789abcdef0123456789abcdef"},
		Source: "accept", Conversation: "conv", Branch: "b", Compile: "c_1", CreatedMs: 42}
}

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(pgtest.Database(t), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.SetSaltID("test-salt") // its accounts are read back
	return s
}

// Stamps ship idempotently: a batch sent twice changes nothing, the first
// stamp of a key wins, and what is read back is what was shipped.
func TestStampsShipAndReadBack(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	if err := s.Migrate(ctx); err != nil { // a second start migrates nothing
		t.Fatal(err)
	}
	a, b := stampRow("a"), stampRow("b")
	b.Pred, b.Account, b.Compile = binding.Digest{}, "", ""
	if n, err := s.PutStamps(ctx, []db.StampRow{a, b}); err != nil || n != 2 {
		t.Fatalf("first batch: %d %v", n, err)
	}
	if n, err := s.PutStamps(ctx, []db.StampRow{a, b}); err != nil || n != 0 {
		t.Fatalf("the same batch again: %d %v", n, err)
	}
	other := a
	other.Model = "claude-sonnet-5-5"
	if n, err := s.PutStamps(ctx, []db.StampRow{other}); err != nil || n != 0 {
		t.Fatalf("another stamp of a shipped key: %d %v", n, err)
	}
	got, err := s.Stamps(ctx, []binding.Digest{a.Key, b.Key, digest("absent")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[a.Key], a) || !reflect.DeepEqual(got[b.Key], b) {
		t.Fatalf("read back %+v", got)
	}
	if _, err := s.Stamps(ctx, make([]binding.Digest, MaxKeys+1)); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("over the bound: %v", err)
	}
}

// The DSN's password is never in what the store shows or says.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t-pw-NEVER"
	dsn := "postgres://bindery:" + pw + "@127.0.0.1:1/team?sslmode=disable&connect_timeout=1"
	if r := Redact(dsn); strings.Contains(r, pw) || r != "postgres://bindery@127.0.0.1:1/team" {
		t.Fatalf("redacted %q", r)
	}
	if r := Redact("host=/tmp/x user=u password=" + pw + " dbname=d"); strings.Contains(r, pw) {
		t.Fatalf("redacted %q", r)
	}
	s, err := Open(dsn, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Migrate(ctx)
	if err == nil || strings.Contains(err.Error(), pw) || strings.Contains(s.Name(), pw) {
		t.Fatalf("an unreachable server: %v (%s)", err, s.Name())
	}
	if _, err := Open("postgres://u:"+pw+"@[bad", "m"); err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("a DSN that does not parse: %v", err)
	}
}

// A stamp's account is read only under the salt it was fingerprinted
// with: a machine on the team's salt reads the account another machine on
// it shipped; a machine on a salt of its own (it could not reach the tier
// when it started) reads none, nor do others read its; a machine that
// never set one reads none.
func TestStampAccountsOnlyUnderOneSalt(t *testing.T) {
	dsn := pgtest.Database(t)
	open := func(machine, salt string) *Store {
		s, err := Open(dsn, machine)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if err := s.Ready(t.Context()); err != nil {
			t.Fatal(err)
		}
		if salt != "" {
			s.SetSaltID(salt)
		}
		return s
	}
	a, b := open("laptop", "team"), open("devbox", "team")
	c, d := open("offline", "own"), open("unset", "")
	r, rc := stampRow("x"), stampRow("y")
	if _, err := a.PutStamps(t.Context(), []db.StampRow{r}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutStamps(t.Context(), []db.StampRow{rc}); err != nil {
		t.Fatal(err)
	}
	keys := []binding.Digest{r.Key, rc.Key}
	for _, x := range []struct {
		s       *Store
		want    string
		wantC   string
		machine string
	}{{a, r.Account, "", "laptop"}, {b, r.Account, "", "devbox"}, {c, "", rc.Account, "offline"}, {d, "", "", "unset"}} {
		got, err := x.s.Stamps(t.Context(), keys)
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: %d stamps, %v", x.machine, len(got), err)
		}
		if got[r.Key].Account != x.want || got[rc.Key].Account != x.wantC || got[r.Key].Model != r.Model {
			t.Errorf("%s reads accounts %q and %q; want %q and %q", x.machine, got[r.Key].Account, got[rc.Key].Account, x.want, x.wantC)
		}
	}
}

// The team's salt is the first machine's to ask; every later one gets it.
// Aliases are read under one's own salt only, in order, and the first
// alias of a fingerprint stays.
func TestTeamSaltAndAliases(t *testing.T) {
	dsn := pgtest.Database(t)
	a, err := Open(dsn, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dsn, "devbox")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, second := bytes.Repeat([]byte{1}, db.AccountSaltSize), bytes.Repeat([]byte{2}, db.AccountSaltSize)
	got, err := a.TeamSalt(t.Context(), first)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("the first machine's salt: %x %v", got, err)
	}
	if got, err := b.TeamSalt(t.Context(), second); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("a later machine got %x, %v; want the first's", got, err)
	}
	if _, err := b.TeamSalt(t.Context(), []byte("short")); err == nil {
		t.Error("a salt of the wrong size was taken")
	}
	a.SetSaltID(SaltID(first))
	b.SetSaltID(SaltID(first))
	if err := a.PutAlias(t.Context(), "fp-key1", "fp-org", 1); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAlias(t.Context(), "fp-key1", "fp-other", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAlias(t.Context(), "fp-key2", "fp-org", 3); err != nil {
		t.Fatal(err)
	}
	all, err := b.AliasesAfter(t.Context(), 0)
	if err != nil || len(all) != 2 || all[0].Account != "fp-org" || all[1].Fingerprint != "fp-key2" {
		t.Fatalf("aliases %+v, %v", all, err)
	}
	if more, err := a.AliasesAfter(t.Context(), all[1].ID); err != nil || len(more) != 0 {
		t.Fatalf("aliases past the last: %+v %v", more, err)
	}
	b.SetSaltID(SaltID(second))
	if other, err := b.AliasesAfter(t.Context(), 0); err != nil || len(other) != 0 {
		t.Fatalf("aliases under another salt read: %+v %v", other, err)
	}
}
