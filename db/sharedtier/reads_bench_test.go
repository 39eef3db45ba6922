package sharedtier

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// BenchmarkCompileReads: the two reads a compile joined to a tier makes
// (ReleasesAfter, every compile; Stamps, when it reads through), each
// against the same read in an explicit transaction (BEGIN, the statements,
// COMMIT: what they were), in one run. Over a Unix socket a round trip is
// cheap; over a team's network it is most of the read.
func BenchmarkCompileReads(b *testing.B) {
	s, ctx := benchStore(b)
	var rels []db.ReleaseRow
	var keys []binding.Digest
	var stamps []db.StampRow
	for i := range 20 {
		rels = append(rels, releaseRow("conv", "main", fmt.Sprint("rel", i)))
		st := stampRow(fmt.Sprint("sig", i))
		stamps, keys = append(stamps, st), append(keys, st.Key)
	}
	if _, err := s.PutReleases(ctx, rels); err != nil {
		b.Fatal(err)
	}
	if _, err := s.PutStamps(ctx, stamps); err != nil {
		b.Fatal(err)
	}
	raw := make([][]byte, len(keys))
	for i := range keys {
		raw[i] = keys[i][:]
	}
	inTx := func(fn func(pgx.Tx) error) {
		if err := pgx.BeginFunc(ctx, s.pool, fn); err != nil {
			b.Fatal(err)
		}
	}
	count := func(rows pgx.Rows, err error) (int, error) {
		if err != nil {
			return 0, err
		}
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	}
	var rel, relTx, st, stTx time.Duration
	for b.Loop() {
		t0 := time.Now()
		got, err := s.ReleasesAfter(ctx, "conv", 0, 0)
		if err != nil || len(got) != len(rels) {
			b.Fatalf("releases: %d, %v", len(got), err)
		}
		t1 := time.Now()
		inTx(func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(29, hashtext($1))`, "conv"); err != nil {
				return err
			}
			n, err := count(tx.Query(ctx, `SELECT ord, branch, key, reason, compile, message, path, machine, created_ms
				FROM releases WHERE conversation = $1 AND ord > $2 ORDER BY ord LIMIT $3`, "conv", 0, MaxReleases))
			if n != len(rels) {
				b.Fatalf("releases in a transaction: %d", n)
			}
			return err
		})
		t2 := time.Now()
		found, err := s.Stamps(ctx, keys)
		if err != nil || len(found) != len(keys) {
			b.Fatalf("stamps: %d, %v", len(found), err)
		}
		t3 := time.Now()
		inTx(func(tx pgx.Tx) error {
			n, err := count(tx.Query(ctx, `SELECT key, seed, chain, pred, model, CASE WHEN salt_id = $2 THEN account END, source, conversation, branch, compile, created_ms
				FROM stamps WHERE key = ANY($1)`, raw, s.salt()))
			if n != len(keys) {
				b.Fatalf("stamps in a transaction: %d", n)
			}
			return err
		})
		t4 := time.Now()
		rel, relTx, st, stTx = rel+t1.Sub(t0), relTx+t2.Sub(t1), st+t3.Sub(t2), stTx+t4.Sub(t3)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(us(rel), "releases-µs")
	b.ReportMetric(us(relTx), "releases-in-tx-µs")
	b.ReportMetric(float64(rel)/float64(relTx), "releases/in-tx")
	b.ReportMetric(us(st), "stamps-µs")
	b.ReportMetric(us(stTx), "stamps-in-tx-µs")
	b.ReportMetric(float64(st)/float64(stTx), "stamps/in-tx")
}
