package db

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// The account salt is made once and kept: the same bytes after a reopen,
// or every account-bound block would be stripped after a restart.
func TestAccountSaltKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bindery.db")
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.AccountSalt(t.Context())
	if err != nil || len(a) != AccountSaltSize {
		t.Fatalf("salt %x, %v", a, err)
	}
	if b, err := d.AccountSalt(t.Context()); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("second ask: %x, %v", b, err)
	}
	d.Close()
	d, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := d.AccountSalt(t.Context()); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("after reopen: %x, %v", b, err)
	}
	if c, err := mustOpen(t).AccountSalt(t.Context()); err != nil || bytes.Equal(a, c) {
		t.Fatalf("two stores share a salt: %x, %v", c, err)
	}
	// A salt of the wrong size (a store edited by hand) is an error, never
	// a fingerprint made with it.
	if _, err := d.writer.Exec(`UPDATE salts SET value = x'01' WHERE name = 'account'`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AccountSalt(t.Context()); err == nil {
		t.Fatal("a 1-byte salt was used")
	}
}

// A stamp carries its account through the store; a stamp written by a
// release before version 13 reads with no account.
func TestStampAccountStoredAndUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	if err := migrate(t.Context(), raw, steps[0].SQL, steps[:1]); err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), raw, "", steps[:12]); err != nil {
		t.Fatal(err)
	}
	if got := pragma(t, raw, "user_version"); got != "12" {
		t.Fatalf("user_version %s", got)
	}
	old := bdigest("old")
	if _, err := raw.Exec(`INSERT INTO stamps (key, seed, chain, model, source, conversation, branch, created_ms) VALUES (?, ?, ?, 'claude-sonnet-5-5', 'accept', 'c', 'b', 1)`,
		old[:], old[:], old[:]); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	neu := bdigest("new")
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.InsertStamps(ctx, []StampRow{{Stamp: binding.Stamp{Key: neu, Seed: neu, Chain: neu, Model: "claude-sonnet-5-5", Account: "9c0ffee"}, Source: "accept", Conversation: "c", Branch: "b", CreatedMs: 2}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Stamps(t.Context(), []binding.Digest{old, neu})
	if err != nil {
		t.Fatal(err)
	}
	if got[old].Account != "" || got[old].Model != "claude-sonnet-5-5" || got[neu].Account != "9c0ffee" {
		t.Fatalf("stamps %+v", got)
	}
}

func TestAccountAliases(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	if m, err := d.AccountAliases(ctx); err != nil || len(m) != 0 {
		t.Fatalf("%v %v", m, err)
	}
	if added, cur, err := d.PutAccountAlias(ctx, "k1", "org", 1); err != nil || !added || cur != "org" {
		t.Fatalf("%v %q %v", added, cur, err)
	}
	// The first alias stays.
	if added, cur, err := d.PutAccountAlias(ctx, "k1", "other", 2); err != nil || added || cur != "org" {
		t.Fatalf("%v %q %v", added, cur, err)
	}
	if m, err := d.AccountAliases(ctx); err != nil || len(m) != 1 || m["k1"] != "org" {
		t.Fatalf("%v %v", m, err)
	}
}

// The aliases are bounded: past MaxAccountAliases a new one is refused
// with ErrTooManyAliases, and nothing already there is lost.
func TestAccountAliasesBound(t *testing.T) {
	d := mustOpen(t)
	if _, err := d.writer.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
		INSERT INTO account_aliases (fingerprint, account, created_ms) SELECT 'k' || i, 'org', 1 FROM n`, MaxAccountAliases); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.PutAccountAlias(t.Context(), "one-more", "org", 2); !errors.Is(err, ErrTooManyAliases) {
		t.Fatalf("err %v", err)
	}
	if _, cur, err := d.PutAccountAlias(t.Context(), "k7", "org", 2); err != nil || cur != "org" {
		t.Fatalf("an existing alias: %q %v", cur, err)
	}
	if m, err := d.AccountAliases(t.Context()); err != nil || len(m) != MaxAccountAliases {
		t.Fatalf("%d aliases, %v", len(m), err)
	}
}

// Adopting a team's salt replaces the store's, forgets every stamp's
// account and every alias (fingerprints under the old salt mean nothing
// under the new), keeps the stamps themselves, and is a no-op the second
// time.
func TestAdoptAccountSalt(t *testing.T) {
	d := mustOpen(t)
	own, err := d.AccountSalt(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st := binding.Stamp{Key: binding.SignatureKey("s"), Model: "claude-sonnet-5-5", Account: "0123456789abcdef0123456789abcdef"}
	if err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.InsertStamps(ctx, []StampRow{{Stamp: st, Source: "accept", Conversation: "c", Branch: "b", CreatedMs: 1}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.PutAccountAlias(t.Context(), "fp-key", "fp-org", 1); err != nil {
		t.Fatal(err)
	}
	if changed, err := d.AdoptAccountSalt(t.Context(), own); err != nil || changed {
		t.Fatalf("adopting its own salt: changed %v, %v", changed, err)
	}
	team := bytes.Repeat([]byte{7}, AccountSaltSize)
	if changed, err := d.AdoptAccountSalt(t.Context(), team); err != nil || !changed {
		t.Fatalf("adopting the team's: changed %v, %v", changed, err)
	}
	if got, err := d.AccountSalt(t.Context()); err != nil || !bytes.Equal(got, team) {
		t.Fatalf("salt after adopting: %x %v", got, err)
	}
	rows, err := d.Stamps(t.Context(), []binding.Digest{st.Key})
	if err != nil || len(rows) != 1 || rows[st.Key].Account != "" || rows[st.Key].Model != st.Model {
		t.Fatalf("the stamp after adopting: %+v %v", rows, err)
	}
	if al, err := d.AccountAliases(t.Context()); err != nil || len(al) != 0 {
		t.Fatalf("aliases after adopting: %v %v", al, err)
	}
	if changed, err := d.AdoptAccountSalt(t.Context(), team); err != nil || changed {
		t.Fatalf("adopting it again: changed %v, %v", changed, err)
	}
	if _, err := d.AdoptAccountSalt(t.Context(), []byte{1}); err == nil {
		t.Fatal("a 1-byte salt adopted")
	}
}
