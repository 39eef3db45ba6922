package sharedtier

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

// BenchmarkShipStamps: the outbox's shipping (PutStamps, batches of 500
// in one transaction each, ON CONFLICT DO NOTHING) against the simplest
// baseline in the same run: a raw COPY of the same rows into a table of
// the same shape with no key. Rows per second of each, and the ratio.
func BenchmarkShipStamps(b *testing.B) {
	s, err := Open(pgtest.Database(b), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE TABLE raw (LIKE stamps INCLUDING DEFAULTS)`); err != nil {
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
	var ship, copyT time.Duration
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
		shipped += len(batchRows)
	}
	b.ReportMetric(float64(shipped)/ship.Seconds(), "ship-rows/s")
	b.ReportMetric(float64(shipped)/copyT.Seconds(), "copy-rows/s")
	b.ReportMetric(copyT.Seconds()/ship.Seconds(), "ship/copy")
}
