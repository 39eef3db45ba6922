package sharedtier

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

func releaseRow(conv, branch, sig string) db.ReleaseRow {
	return db.ReleaseRow{Release: binding.Release{Key: digest(sig), Reason: "provider", Compile: "c_1.abc_x", Message: 3, Path: "messages.3.content.0"},
		Conversation: conv, Branch: branch, CreatedMs: 7}
}

// A duplicated batch changes nothing: releases, compiles and accepts sent
// twice (a shipper whose delete was lost) keep their first rows, their
// order and the owner they decided.
func TestFactsDuplicatedBatch(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	rels := []db.ReleaseRow{releaseRow("c", "main", "a"), releaseRow("c", "main", "b"), releaseRow("d", "main", "a")}
	comps := []Compile{{ID: "c_1.x_a", Conversation: "c", Branch: "main", Record: []byte("r1"), CreatedMs: 1},
		{ID: "c_2.x_b", Conversation: "c", Branch: "main", Record: []byte("r2"), CreatedMs: 2}}
	accs := []Accept{{Compile: "c_2.x_b", Conversation: "c", Branch: "main", Stamped: 2, AcceptedMs: 3}, {Compile: "c_1.x_a", Conversation: "c", Branch: "main", AcceptedMs: 4}}
	for round, want := range []int{3, 0} {
		want2 := min(want, 2) // two compiles and two accepts the first time, none again
		if n, err := s.PutReleases(ctx, rels); err != nil || n != want {
			t.Fatalf("round %d releases: %d %v", round, n, err)
		}
		if n, err := s.PutCompiles(ctx, comps); err != nil || n != want2 {
			t.Fatalf("round %d compiles: %d %v", round, n, err)
		}
		if n, err := s.PutAccepts(ctx, accs); err != nil || n != want2 {
			t.Fatalf("round %d accepts: %d %v", round, n, err)
		}
	}
	got, err := s.ReleasesAfter(ctx, "c", 0, 0)
	if err != nil || len(got) != 2 || got[0].Key != digest("a") || got[1].Key != digest("b") || got[0].Ord >= got[1].Ord || got[0].Machine != "laptop" {
		t.Fatalf("releases of c: %+v %v", got, err)
	}
	if more, err := s.ReleasesAfter(ctx, "c", got[1].Ord, 0); err != nil || len(more) != 0 {
		t.Fatalf("past the last: %+v %v", more, err)
	}
	// the owner: c_2 was shipped after c_1, so c_1's later accept does not
	// take the branch from it
	if o, err := s.Owner(ctx, "c", "main"); err != nil || o != "c_2.x_b" {
		t.Fatalf("owner %q %v", o, err)
	}
	if a, ok, err := s.Accepted(ctx, "c_2.x_b"); err != nil || !ok || a.Stamped != 2 || a.Machine != "laptop" {
		t.Fatalf("accepted: %+v %v %v", a, ok, err)
	}
	if c, ok, err := s.Compile(ctx, "c_1.x_a"); err != nil || !ok || string(c.Record) != "r1" {
		t.Fatalf("compile: %+v %v %v", c, ok, err)
	}
	if _, ok, err := s.Compile(ctx, "c_9.x_z"); err != nil || ok {
		t.Fatalf("an unknown compile: %v %v", ok, err)
	}
	// bounds
	big := make([]db.ReleaseRow, MaxBatch+1)
	if _, err := s.PutReleases(ctx, big); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("an oversized batch: %v", err)
	}
}

// A reader of a conversation's releases waits for a release being written
// (the writer holds the conversation's lock until it commits): it never
// reads past an ord that commits later.
func TestReleaseReadWaitsForWriter(t *testing.T) {
	dsn := pgtest.Database(t)
	s, err := Open(dsn, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dsn, "other")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	inTx, commit := make(chan struct{}), make(chan struct{})
	s.SetBeforeReleaseCommit(func() { close(inTx); <-commit })
	done := make(chan error, 1)
	go func() {
		_, err := s.PutReleases(context.Background(), []db.ReleaseRow{releaseRow("w", "main", "a")})
		done <- err
	}()
	<-inTx
	read := make(chan []Release, 1)
	go func() {
		got, err := s2.ReleasesAfter(context.Background(), "w", 0, 0)
		if err != nil {
			t.Error(err)
		}
		read <- got
	}()
	for pgtest.AdvisoryWaiters(t, dsn) == 0 {
		time.Sleep(time.Millisecond) // the reader is not at the lock yet: poll the lock table
	}
	close(commit)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := <-read; len(got) != 1 {
		t.Fatalf("the reader saw %d releases, want the one in flight when it started", len(got))
	}
}

// Forward-only migrations: a tier at version 1 (stamps only, with a stamp
// in it) is brought to version 2 keeping its rows; a tier newer than this
// build is refused, not downgraded.
func TestMigrateFromVersion1(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	steps, err := loadSteps()
	if err != nil || len(steps) < 2 {
		t.Fatalf("steps: %d %v", len(steps), err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE bindery_schema (version int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, steps[0].sql); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO bindery_schema VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dsn, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// a stamp as a version-1 bindery shipped it (its columns, no more)
	old := stampRow("old")
	if _, err := conn.Exec(ctx, `INSERT INTO stamps (key, seed, chain, pred, model, account, source, conversation, branch, compile, machine, created_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'laptop', $11)`, old.Key[:], old.Seed[:], old.Chain[:], old.Pred[:], old.Model, old.Account,
		old.Source, old.Conversation, old.Branch, old.Compile, old.CreatedMs); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT max(version) FROM bindery_schema`).Scan(&v); err != nil || v != len(steps) {
		t.Fatalf("version %d %v, want %d", v, err, len(steps))
	}
	if got, err := s.Stamps(ctx, []binding.Digest{digest("old")}); err != nil || len(got) != 1 {
		t.Fatalf("the stamp of version 1: %v %v", got, err)
	}
	if _, err := s.PutReleases(ctx, []db.ReleaseRow{releaseRow("c", "main", "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO bindery_schema VALUES ($1)`, len(steps)+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer tier: %v", err)
	}
}
