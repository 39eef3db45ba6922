package sharedtier

import (
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

// Another machine's stamp comes without its account (its salt is its own).
func TestStampsOfAnotherMachineHaveNoAccount(t *testing.T) {
	dsn := pgtest.Database(t)
	a, err := Open(dsn, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := Open(dsn, "devbox")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := stampRow("x")
	if _, err := a.PutStamps(t.Context(), []db.StampRow{r}); err != nil {
		t.Fatal(err)
	}
	mine, _ := a.Stamps(t.Context(), []binding.Digest{r.Key})
	theirs, _ := b.Stamps(t.Context(), []binding.Digest{r.Key})
	if mine[r.Key].Account != r.Account || theirs[r.Key].Account != "" || theirs[r.Key].Model != r.Model {
		t.Fatalf("mine %+v theirs %+v", mine[r.Key], theirs[r.Key])
	}
}
