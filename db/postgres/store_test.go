package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T) (*Store, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, dsn
}

func digest(s string) binding.Digest { return binding.Digest(sha256.Sum256([]byte(s))) }

func stamp(i int, withPred bool) db.StampRow {
	r := db.StampRow{
		Stamp:        binding.Stamp{Key: digest(fmt.Sprint("key", i)), Seed: digest("seed"), Chain: digest(fmt.Sprint("chain", i)), Model: "claude-opus-4-5"},
		Source:       "accept",
		Conversation: "conv",
		Branch:       "main",
		Compile:      fmt.Sprint("c", i),
		CreatedMs:    int64(1000 + i),
	}
	if withPred {
		r.Pred = digest(fmt.Sprint("key", i-1))
	} else {
		r.Entry = "e1"
	}
	return r
}

// TestShipReadBack: what a batch ships is read back whole, NULLs as zero
// values, as the local store gives it.
func TestShipReadBack(t *testing.T) {
	s, _ := open(t)
	b := Batch{Machine: "m1",
		Stamps:   []db.StampRow{stamp(1, false), stamp(2, true)},
		Compiles: []Compile{{ID: "c1", Conversation: "conv", Branch: "main", CreatedMs: 5}},
		Accepts:  []Accept{{Compile: "c1", AcceptedMs: 6, Stamped: 2, Released: 1}},
	}
	a, err := s.Ship(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if a != (Added{Stamps: 2, Compiles: 1, Accepts: 1}) {
		t.Fatalf("added %+v", a)
	}
	got, err := s.Stamps(t.Context(), []binding.Digest{digest("key1"), digest("key2"), digest("absent")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d stamps, want 2", len(got))
	}
	for _, want := range b.Stamps {
		if got[want.Key] != want {
			t.Errorf("stamp read back\n got %+v\nwant %+v", got[want.Key], want)
		}
	}
}

// TestBatchTwiceChangesNothing: a batch shipped again (a shipper that
// lost the server's answer) adds no row and changes none; a stamp another
// machine shipped first keeps its first row.
func TestBatchTwiceChangesNothing(t *testing.T) {
	s, dsn := open(t)
	b := Batch{Machine: "m1", Stamps: []db.StampRow{stamp(1, false)},
		Compiles: []Compile{{ID: "c1", Conversation: "conv", Branch: "main", CreatedMs: 5}},
		Accepts:  []Accept{{Compile: "c1", AcceptedMs: 6, Stamped: 1}}}
	if _, err := s.Ship(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	again := b
	again.Machine = "m2"
	again.Stamps = []db.StampRow{stamp(1, false)}
	again.Stamps[0].Conversation = "other"
	a, err := s.Ship(t.Context(), again)
	if err != nil {
		t.Fatal(err)
	}
	if a != (Added{}) {
		t.Fatalf("a batch shipped twice added %+v", a)
	}
	got, _ := s.Stamps(t.Context(), []binding.Digest{digest("key1")})
	if got[digest("key1")].Conversation != "conv" {
		t.Fatalf("the second ship changed the stamp: %+v", got[digest("key1")])
	}
	s2, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var machine string
	if err := s2.pool.QueryRow(t.Context(), "SELECT machine FROM stamps").Scan(&machine); err != nil || machine != "m1" {
		t.Fatalf("machine = %q, %v; want the first shipper m1", machine, err)
	}
}

// TestShipAllOrNothing: a batch with one bad row adds nothing.
func TestShipAllOrNothing(t *testing.T) {
	s, _ := open(t)
	bad := Batch{Machine: "m1", Stamps: []db.StampRow{stamp(1, false)},
		Compiles: []Compile{{ID: "c1", Conversation: "conv\x00", Branch: "main"}}} // PostgreSQL text holds no NUL
	if _, err := s.Ship(t.Context(), bad); err == nil {
		t.Fatal("a batch with a NUL in a text column shipped")
	}
	got, err := s.Stamps(t.Context(), []binding.Digest{digest("key1")})
	if err != nil || len(got) != 0 {
		t.Fatalf("a failed batch left %d stamps (err %v)", len(got), err)
	}
}

// TestMigrateConcurrentAndIdempotent: machines opening a new database at
// once migrate it once; opening again changes nothing.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(t.Context(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n, v int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*), max(version) FROM bindery_schema").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != LatestSchemaVersion() || v != LatestSchemaVersion() {
		t.Fatalf("bindery_schema has %d rows up to %d, want %d", n, v, LatestSchemaVersion())
	}
}

// TestNewerSchemaRefused: an older bindery does not write to a database a
// newer one migrated.
func TestNewerSchemaRefused(t *testing.T) {
	s, dsn := open(t)
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO bindery_schema (version, name) VALUES ($1, 'future.sql')", LatestSchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), dsn)
	if err == nil || !strings.Contains(err.Error(), "upgrade bindery") {
		t.Fatalf("err = %v, want the newer-schema refusal", err)
	}
}

// TestPasswordNeverShown: neither a bad DSN nor a failed connection
// repeats the DSN's password.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, dsn := range []string{
		"host=/nonexistent user=bindery password=" + pw + " dbname=team connect_timeout=1",
		"postgres://bindery:" + pw + "@127.0.0.1:1/team?connect_timeout=1",
		"host=/x password='" + pw + "' port=notaport",
		"postgres://bindery:" + pw + "@[::1/team",
		"password=" + pw + " ===",
	} {
		_, err := Open(ctx, dsn)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		t.Log(err)
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error shows the password: %v", err)
		}
		if r := Redact(dsn); strings.Contains(r, pw) {
			t.Errorf("Redact shows the password: %s", r)
		}
	}
}

// TestStampKeysBounded: a read-through asks for at most MaxStampKeys keys.
func TestStampKeysBounded(t *testing.T) {
	s, _ := open(t)
	_, err := s.Stamps(t.Context(), make([]binding.Digest, MaxStampKeys+1))
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("err = %v, want the bound", err)
	}
}
