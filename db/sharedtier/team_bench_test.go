package sharedtier

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/db"
)

// BenchmarkTeamReport1M: the team report (every grouping: total, machine,
// person, client, model, day, day and machine) on 1M requests, read from
// the rollups against the simplest baseline in the same run: the same
// GROUPING SETS query summing the raw request rows. 20 machines (one
// person each), 4 clients, 4 models, 90 days, sessions of 50 requests
// (a session is one machine's, client's and model's). The rows are made by SQL and
// the rollups summed from them the way shipping keeps them; the bench
// first checks that both reads give the same lines.
func BenchmarkTeamReport1M(b *testing.B) {
	s, ctx := benchStore(b)
	const n = 1_000_000
	t0 := time.Now()
	if _, err := s.pool.Exec(ctx, `INSERT INTO team_requests (machine, key, rev, person, client, day, model, requests, errored,
		input, output, cache_read, cache_write, cache_write_1h, spend_input, spend_output, spend_read, spend_write, spend_other, unpriced,
		breaks, rewritten, break_cost, excess, avoidable)
		SELECT 'm' || (i / 50) % 20, 'pi:s' || (i / 50) || '/e' || i, 1, 'p' || (i / 50) % 20, (ARRAY['pi','claude-code','opencode','sdk'])[1 + (i / 1000) % 4],
		  date '2026-09-01' + (i / 11112) % 90, (ARRAY['opus','sonnet','haiku','fable'])[1 + (i / 150) % 4], 1, (i % 97 = 0)::int,
		  3 + i % 11, 400 + i % 300, 40000 + i % 9000, 900 + i % 500, 0, 15 + i % 11, 6000 + i % 300, 12000 + i % 900, 3375 + i % 500, 0, 0,
		  (i % 29 = 0)::int, CASE WHEN i % 29 = 0 THEN 30000 ELSE 0 END, CASE WHEN i % 29 = 0 THEN 112500 ELSE 0 END,
		  CASE WHEN i % 29 = 0 THEN 103500 ELSE 0 END, CASE WHEN i % 58 = 0 THEN 103500 ELSE 0 END
		FROM generate_series(1, $1) i`, n); err != nil {
		b.Fatal(err)
	}
	sum := make([]string, len(teamCounters))
	for i, c := range teamCounters {
		sum[i] = "sum(" + c + ")"
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO team_rollup SELECT day, machine, person, client, model, `+strings.Join(sum, ", ")+
		` FROM team_requests GROUP BY day, machine, person, client, model`); err != nil {
		b.Fatal(err)
	}
	for _, t := range []string{"team_requests", "team_rollup"} {
		if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE `+t); err != nil {
			b.Fatal(err)
		}
	}
	var rollups int
	s.pool.QueryRow(ctx, `SELECT count(*) FROM team_rollup`).Scan(&rollups)
	b.Logf("1M requests and %d rollup rows made in %s", rollups, time.Since(t0).Round(time.Millisecond))
	raw := teamQuery("team_requests")
	a, err := s.TeamReport(ctx, "", "")
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.teamReport(ctx, raw, "", "")
	if err != nil {
		b.Fatal(err)
	}
	if len(a) != len(r) || fmt.Sprint(lineSet(a)) != fmt.Sprint(lineSet(r)) {
		b.Fatalf("rollups and raw rows differ: %d and %d lines", len(a), len(r))
	}
	var fromRollups, fromRaw time.Duration
	for b.Loop() {
		t := time.Now()
		if _, err := s.TeamReport(ctx, "", ""); err != nil {
			b.Fatal(err)
		}
		fromRollups += time.Since(t)
		t = time.Now()
		if _, err := s.teamReport(ctx, raw, "", ""); err != nil {
			b.Fatal(err)
		}
		fromRaw += time.Since(t)
	}
	b.ReportMetric(float64(fromRollups.Milliseconds())/float64(b.N), "rollups-ms/report")
	b.ReportMetric(float64(fromRaw.Milliseconds())/float64(b.N), "raw-ms/report")
	b.ReportMetric(fromRaw.Seconds()/fromRollups.Seconds(), "raw/rollups")
	b.ReportMetric(float64(len(a)), "lines")
}

func lineSet(ls []TeamLine) map[string]db.TeamFact {
	out := map[string]db.TeamFact{}
	for _, l := range ls {
		out[l.By+"|"+l.Day+"|"+l.Machine+"|"+l.Person+"|"+l.Client+"|"+l.Model] = l.Sums
	}
	return out
}

// BenchmarkShipTeamFacts: the team outbox's shipping end to end, in rows
// per second (read from the SQLite outbox in batches of 2000,
// PutTeamFacts, the rows deleted as shipped), against a raw COPY of the
// same rows into a table of the same shape with no key, in the same run;
// and PutTeamFacts alone (the tier's part: COPY into a temporary table,
// the replace by rev, the rollups' difference) against the same COPY.
func BenchmarkShipTeamFacts(b *testing.B) {
	s, ctx := benchStore(b)
	if _, err := s.pool.Exec(ctx, `CREATE TABLE raw (LIKE team_requests INCLUDING DEFAULTS)`); err != nil {
		b.Fatal(err)
	}
	local, err := db.Open(ctx, filepath.Join(b.TempDir(), "b.db"), db.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	const batch, perLoop = 2000, 10000
	k := 0
	var ship, put, copyT time.Duration
	shipped := 0
	for b.Loop() {
		facts := make([]db.TeamFact, perLoop)
		for i := range facts {
			k++
			facts[i] = teamFact(fmt.Sprintf("pi:s%d/e%d", k/40, k), "ann", "pi", fmt.Sprintf("2026-12-%02d", 1+k%28), "claude-opus-5-5", int64(k))
		}
		b.StopTimer()
		if _, err := local.QueueTeamFacts(ctx, []db.TeamScope{{Scope: fmt.Sprint("s", k), Facts: facts}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var src [][]any
		t := time.Now()
		for {
			items, upto, err := local.TeamOutbox(ctx, batch)
			if err != nil {
				b.Fatal(err)
			}
			if upto == 0 {
				break
			}
			tp := time.Now()
			if _, err := s.PutTeamFacts(ctx, items); err != nil {
				b.Fatal(err)
			}
			put += time.Since(tp)
			if err := local.TeamShipped(ctx, upto); err != nil {
				b.Fatal(err)
			}
			for _, it := range items {
				f := it.Fact
				day, _ := time.Parse(time.DateOnly, f.Day)
				row := []any{"bench", f.Key, it.Rev, f.Person, f.Client, day, f.Model}
				for _, c := range counters(&f) {
					row = append(row, *c)
				}
				src = append(src, row)
			}
		}
		ship += time.Since(t)
		shipped += perLoop
		t = time.Now()
		if err := copyRaw(ctx, s, src, batch); err != nil {
			b.Fatal(err)
		}
		copyT += time.Since(t)
	}
	b.ReportMetric(float64(shipped)/ship.Seconds(), "ship-rows/s")
	b.ReportMetric(float64(shipped)/copyT.Seconds(), "copy-rows/s")
	b.ReportMetric(copyT.Seconds()/ship.Seconds(), "ship/copy")
	// PutTeamFacts alone: the tier's part of shipping
	b.ReportMetric(float64(shipped)/put.Seconds(), "put-rows/s")
	b.ReportMetric(copyT.Seconds()/put.Seconds(), "put/copy")
}

// copyRaw copies rows into raw in batches of the same size, one
// transaction each.
func copyRaw(ctx context.Context, s *Store, src [][]any, batch int) error {
	for len(src) > 0 {
		n := min(batch, len(src))
		if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"raw"}, teamInCols, pgx.CopyFromRows(src[:n])); err != nil {
			return err
		}
		src = src[n:]
	}
	return nil
}
