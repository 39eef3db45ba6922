package sharedtier

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

func stampRows(prefix string, n int) []db.StampRow {
	out := make([]db.StampRow, n)
	for i := range out {
		out[i] = stampRow(fmt.Sprint(prefix, i))
	}
	return out
}

func keysOf(rows []db.StampRow) []binding.Digest {
	out := make([]binding.Digest, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// TestServerRestartedMidBatch: the server goes away while a batch is
// inside its transaction (held there by a lock, so the restart lands
// mid-batch every run, not by timing). The batch fails and leaves no row;
// the shipper's retry of the same batch, once the server is back, ships
// all of it through the same pool, and a third send adds nothing.
func TestServerRestartedMidBatch(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	rows := stampRows("mid", 50)
	held := stampRow("held")
	batch := append(append([]db.StampRow{}, rows...), held)

	// Another session inserts the last key and does not commit: the
	// batch's insert of it waits on that transaction's outcome, inside the
	// batch's own transaction, after its other rows.
	holder, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	hold, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `INSERT INTO stamps (key, seed, chain, model, source, conversation, branch, machine, created_ms)
		VALUES ($1, $1, $1, 'm', 'accept', 'c', 'b', 'other', 1)`, held.Key[:]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var shipErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, shipErr = s.PutStamps(ctx, batch)
	}()
	watch, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited on the held key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	watch.Close(context.Background())
	pgtest.Cluster(t).Restart(t)
	wg.Wait()
	if shipErr == nil {
		t.Fatal("a batch whose server restarted mid-transaction reported success")
	}

	// The server is back: nothing of the broken batch is there, and the
	// same batch sent again ships whole through the same pool (it drops
	// the dead connections; a send may need a retry, as the shipper's
	// backoff gives it), and a third send adds nothing.
	var got map[binding.Digest]db.StampRow
	for try := 0; ; try++ {
		if got, err = s.Stamps(ctx, keysOf(batch)); err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("read after the restart: %v", err)
		}
	}
	if len(got) != 0 {
		t.Fatalf("after the broken batch the server holds %d of its stamps, want none", len(got))
	}
	var n int
	for try := 0; ; try++ {
		if n, err = s.PutStamps(ctx, batch); err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("the batch again after the restart: %v", err)
		}
	}
	if n != len(batch) {
		t.Fatalf("the batch again added %d, want %d", n, len(batch))
	}
	if n, err := s.PutStamps(ctx, batch); err != nil || n != 0 {
		t.Fatalf("the batch a third time: %d %v", n, err)
	}
	got, err = s.Stamps(ctx, keysOf(batch))
	if err != nil || len(got) != len(batch) || got[held.Key].Model != held.Model {
		t.Fatalf("the server holds %d of %d stamps (%v)", len(got), len(batch), err)
	}
}

// TestMigrateConcurrently: machines starting at once on a new database
// migrate it once (the advisory lock), and each finds it current.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.Database(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dsn, fmt.Sprint("m", i))
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			errs[i] = s.Migrate(t.Context())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("machine %d: %v", i, err)
		}
	}
	s, err := Open(dsn, "check")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, top int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*), max(version) FROM bindery_schema").Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	steps, _ := loadSteps()
	if rows != len(steps) || top != len(steps) {
		t.Fatalf("bindery_schema: %d rows up to version %d, want %d once each", rows, top, len(steps))
	}
}

// TestNewerSchemaRefused: an older bindery does not write into a shared
// database a newer one migrated.
func TestNewerSchemaRefused(t *testing.T) {
	s := open(t)
	steps, _ := loadSteps()
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO bindery_schema (version) VALUES ($1)", len(steps)+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "upgrade bindery") {
		t.Fatalf("err = %v, want the newer-schema refusal", err)
	}
}

// TestBatchAllOrNothing: a batch with one row the server refuses ships
// none of its rows.
func TestBatchAllOrNothing(t *testing.T) {
	s := open(t)
	rows := stampRows("aon", 10)
	rows[7].Conversation = "conv\x00" // PostgreSQL text holds no NUL
	if _, err := s.PutStamps(t.Context(), rows); err == nil {
		t.Fatal("a batch with a NUL in a text column shipped")
	}
	got, err := s.Stamps(t.Context(), keysOf(rows))
	if err != nil || len(got) != 0 {
		t.Fatalf("a refused batch left %d stamps (%v)", len(got), err)
	}
}

// TestConnectTimeout: a DSN without connect_timeout gets ConnectTimeout
// (a dropped-packet server costs an attempt seconds, not the OS's minutes
// of TCP retries); one with it keeps its own.
func TestConnectTimeout(t *testing.T) {
	for dsn, want := range map[string]time.Duration{
		"host=10.0.0.1 user=u dbname=d":                   ConnectTimeout,
		"host=10.0.0.1 user=u dbname=d connect_timeout=2": 2 * time.Second,
		"postgres://u@10.0.0.1/d":                         ConnectTimeout,
		"postgres://u@10.0.0.1/d?connect_timeout=17":      17 * time.Second,
	} {
		s, err := Open(dsn, "m")
		if err != nil {
			t.Fatal(err)
		}
		got := s.pool.Config().ConnConfig.ConnectTimeout
		s.Close()
		if got != want {
			t.Errorf("%s: connect timeout %v, want %v", dsn, got, want)
		}
	}
}

// TestBatchWholeOrNothing: a batch sent in one round trip is one implicit
// transaction: a statement that fails after inserts undoes them, so a
// shipped batch is whole or absent without BEGIN and COMMIT around it.
func TestBatchWholeOrNothing(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	rows := stampRows("whole", 3)
	b := &pgx.Batch{}
	for _, r := range rows {
		b.Queue(`INSERT INTO stamps (key, seed, chain, model, source, conversation, branch, machine, created_ms)
			VALUES ($1, $1, $1, 'm', 'accept', 'c', 'b', 'laptop', 1)`, r.Key[:])
	}
	b.Queue(`SELECT 1/0`)
	if _, err := s.insertBatch(ctx, b); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("a batch ending in an error: %v", err)
	}
	got, err := s.Stamps(ctx, keysOf(rows))
	if err != nil || len(got) != 0 {
		t.Fatalf("after the failed batch the tier holds %d of its stamps (%v), want none", len(got), err)
	}
	if n, err := s.PutStamps(ctx, rows); err != nil || n != len(rows) {
		t.Fatalf("the batch alone: %d %v", n, err)
	}
}
