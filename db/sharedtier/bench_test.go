package sharedtier

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

// BenchmarkShipStamps: the outbox's shipping (PutStamps, batches of 500
// in one transaction each, ON CONFLICT DO NOTHING) against the simplest
// baseline in the same run: a raw COPY of the same rows into a table of
// the same shape with no key. Rows per second of each, and the ratio; and
// the same batches as one INSERT ... SELECT FROM unnest per batch (the
// shape PutStamps could take), with its ratio to COPY.
func BenchmarkShipStamps(b *testing.B) {
	s, ctx := benchStore(b)
	if _, err := s.pool.Exec(ctx, `CREATE TABLE raw (LIKE stamps INCLUDING DEFAULTS)`); err != nil {
		b.Fatal(err)
	}
	// the same rows by one INSERT ... SELECT FROM unnest (one array per
	// column) into a table with the same key: what PutStamps would cost as
	// one statement per batch instead of one per row
	if _, err := s.pool.Exec(ctx, `CREATE TABLE stamps_unnest (LIKE stamps INCLUDING ALL)`); err != nil {
		b.Fatal(err)
	}
	const batch = 500
	n := 0
	rows := func() []db.StampRow {
		out := make([]db.StampRow, batch)
		for i := range out {
			n++
			out[i] = stampRow(fmt.Sprint("sig", n))
		}
		return out
	}
	var ship, copyT, unnestT time.Duration
	shipped := 0
	for b.Loop() {
		batchRows := rows()
		t0 := time.Now()
		if _, err := s.PutStamps(ctx, batchRows); err != nil {
			b.Fatal(err)
		}
		ship += time.Since(t0)
		src := make([][]any, len(batchRows))
		for i, r := range batchRows {
			src[i] = []any{r.Key[:], r.Seed[:], r.Chain[:], r.Pred[:], r.Model, r.Account, r.Source, r.Conversation, r.Branch, r.Compile, "bench", r.CreatedMs}
		}
		t0 = time.Now()
		if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"raw"}, []string{"key", "seed", "chain", "pred", "model", "account", "source", "conversation", "branch", "compile", "machine", "created_ms"}, pgx.CopyFromRows(src)); err != nil {
			b.Fatal(err)
		}
		copyT += time.Since(t0)
		t0 = time.Now()
		if err := putStampsUnnest(ctx, s.pool, "bench", batchRows); err != nil {
			b.Fatal(err)
		}
		unnestT += time.Since(t0)
		shipped += len(batchRows)
	}
	b.ReportMetric(float64(shipped)/ship.Seconds(), "ship-rows/s")
	b.ReportMetric(float64(shipped)/copyT.Seconds(), "copy-rows/s")
	b.ReportMetric(copyT.Seconds()/ship.Seconds(), "ship/copy")
	b.ReportMetric(float64(shipped)/unnestT.Seconds(), "unnest-rows/s")
	b.ReportMetric(copyT.Seconds()/unnestT.Seconds(), "unnest/copy")
}

// putStampsUnnest inserts rows into stamps_unnest in one statement.
func putStampsUnnest(ctx context.Context, pool *pgxpool.Pool, machine string, rows []db.StampRow) error {
	n := len(rows)
	key, seed, chain, pred := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	model, account, source, conv, branch, compile := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ms := make([]int64, n)
	for i, r := range rows {
		key[i], seed[i], chain[i], pred[i] = r.Key[:], r.Seed[:], r.Chain[:], []byte{}
		if !r.Pred.IsZero() {
			pred[i] = r.Pred[:]
		}
		model[i], account[i], source[i], conv[i], branch[i], compile[i], ms[i] = r.Model, r.Account, r.Source, r.Conversation, r.Branch, r.Compile, r.CreatedMs
	}
	_, err := pool.Exec(ctx, `INSERT INTO stamps_unnest (key, seed, chain, pred, model, account, source, conversation, branch, compile, machine, created_ms)
SELECT k, s, c, NULLIF(p, ''::bytea), m, NULLIF(a, ''), src, cv, br, NULLIF(cp, ''), $12, ms
FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[])
  AS t(k, s, c, p, m, a, src, cv, br, cp, ms)
ON CONFLICT (key) DO NOTHING`, key, seed, chain, pred, model, account, source, conv, branch, compile, ms, machine)
	return err
}

// benchStore is a migrated tier on a database of its own, closed with the
// benchmark.
func benchStore(b *testing.B) (*Store, context.Context) {
	s, err := Open(pgtest.Database(b), "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ctx := b.Context()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s, ctx
}
