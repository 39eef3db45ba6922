package sharedtier

import (
	"fmt"
	"testing"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
)

func teamFact(key, person, client, day, model string, spend int64) db.TeamFact {
	return db.TeamFact{Key: key, Person: person, Client: client, Day: day, Model: model, Requests: 1,
		Input: 100, Output: 10, CacheRead: 1000, CacheWrite: 50,
		SpendInput: spend, SpendOutput: 3 * spend, SpendRead: 7, SpendWrite: 11,
		Breaks: 1, Rewritten: 50, BreakCost: 11, Excess: 10, Avoidable: 10}
}

func lines(t *testing.T, s *Store, since, until string) map[string]TeamLine {
	t.Helper()
	ls, err := s.TeamReport(t.Context(), since, until)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]TeamLine{}
	for _, l := range ls {
		out[l.By+":"+l.Day+l.Machine+l.Person+l.Client+l.Model] = l
	}
	return out
}

// Two machines ship their facts; the report's lines per machine (and per
// person, client, day, model) add up to the total exactly, in micro-USD
// and in tokens; a batch sent twice, or an older one sent late, changes
// nothing; a changed fact moves its figures, a retracted one takes them
// out.
func TestTeamFactsTwoMachines(t *testing.T) {
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
	ctx := t.Context()
	for _, s := range []*Store{a, b} {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var batchA, batchB []db.TeamOutboxItem
	var want int64
	for i := range 40 {
		f := teamFact(fmt.Sprintf("pi:s%d/e%d", i%3, i), "ann", "pi", fmt.Sprintf("2026-12-%02d", 1+i%4), "claude-opus-5-5", int64(1000003*i+1))
		batchA = append(batchA, db.TeamOutboxItem{Rev: 10, Fact: f})
		want += f.Spend()
		g := teamFact(fmt.Sprintf("host:c_%d", i), "bob", []string{"claude-code", "opencode", "sdk"}[i%3], fmt.Sprintf("2026-12-%02d", 2+i%5), "claude-sonnet-5-5", int64(999_999_937+i))
		batchB = append(batchB, db.TeamOutboxItem{Rev: 10, Fact: g})
		want += g.Spend()
	}
	// a request both machines hold (a session file synced to the other)
	// counts once: its first shipper owns it, whatever the other's rev
	dup := db.TeamOutboxItem{Rev: 99, Fact: batchA[0].Fact}
	dup.Fact.Person, dup.Fact.SpendInput = "bob", 1
	batchB = append(batchB, dup)
	if n, err := a.PutTeamFacts(ctx, batchA); err != nil || n != 40 {
		t.Fatalf("machine a: %d %v", n, err)
	}
	if n, err := b.PutTeamFacts(ctx, batchB); err != nil || n != 40 {
		t.Fatalf("machine b: %d %v", n, err)
	}
	check := func(what string, wantTotal, wantRequests int64) map[string]TeamLine {
		t.Helper()
		ls := lines(t, a, "", "")
		total := ls["total:"]
		if got := total.Sums.Spend(); got != wantTotal || total.Sums.Requests != wantRequests {
			t.Fatalf("%s: total %d micro-USD over %d requests, want %d over %d", what, got, total.Sums.Requests, wantTotal, wantRequests)
		}
		for _, by := range []string{"machine", "person", "client", "day", "model", "day+machine"} {
			var spend, req, in, avoid int64
			for _, l := range ls {
				if l.By == by {
					spend += l.Sums.Spend()
					req += l.Sums.Requests
					in += l.Sums.Input
					avoid += l.Sums.Avoidable
				}
			}
			if spend != total.Sums.Spend() || req != total.Sums.Requests || in != total.Sums.Input || avoid != total.Sums.Avoidable {
				t.Errorf("%s: the %s lines sum to %d micro-USD, %d requests, %d input, %d avoidable; the total is %+v", what, by, spend, req, in, avoid, total.Sums)
			}
		}
		return ls
	}
	ls := check("two machines", want, 80)
	if m := ls["machine:laptop"].Sums; m.Requests != 40 || m.Breaks != 40 || m.Avoidable != 400 {
		t.Errorf("laptop: %+v", m)
	}
	if c := ls["client:claude-code"].Sums; c.Requests != 14 {
		t.Errorf("claude-code: %+v", c)
	}

	// a batch sent twice, and an older one late: nothing changes
	if n, err := a.PutTeamFacts(ctx, batchA); err != nil || n != 0 {
		t.Fatalf("a again: %d %v", n, err)
	}
	old := append([]db.TeamOutboxItem{}, batchA[:5]...)
	for i := range old {
		old[i].Rev = 5
		old[i].Fact.SpendInput += 1e9
	}
	if n, err := a.PutTeamFacts(ctx, old); err != nil || n != 0 {
		t.Fatalf("an older batch: %d %v", n, err)
	}
	check("duplicated and stale batches", want, 80)

	// a newer fact moves to another day and person; another is retracted
	moved := batchA[1]
	moved.Rev = 11
	moved.Fact.Day, moved.Fact.Person, moved.Fact.SpendOutput = "2027-01-01", "carol", moved.Fact.SpendOutput+5
	gone := batchA[2]
	gone.Rev = 11
	gone.Fact = gone.Fact.Retracted()
	if n, err := a.PutTeamFacts(ctx, []db.TeamOutboxItem{moved, gone}); err != nil || n != 2 {
		t.Fatalf("moved and retracted: %d %v", n, err)
	}
	want += 5 - batchA[2].Fact.Spend()
	ls = check("moved and retracted", want, 79)
	if p := ls["person:carol"].Sums; p.Requests != 1 || p.Spend() != moved.Fact.Spend() {
		t.Errorf("carol: %+v", p)
	}
	if _, ok := ls["day:2027-01-01"]; !ok {
		t.Error("the moved request's day is missing")
	}
	// a range of days
	ls = lines(t, a, "2026-12-02", "2026-12-02")
	if d := ls["total:"].Sums; d.Requests != ls["day:2026-12-02"].Sums.Requests || d.Requests == 0 {
		t.Errorf("one day: total %+v, day %+v", d, ls["day:2026-12-02"].Sums)
	}
	// bounds
	bad := batchA[3]
	bad.Fact.Day = "yesterday"
	if _, err := a.PutTeamFacts(ctx, []db.TeamOutboxItem{bad}); err == nil {
		t.Error("a fact with a bad day was shipped")
	}
	if _, err := a.PutTeamFacts(ctx, []db.TeamOutboxItem{batchA[3], batchA[3]}); err == nil {
		t.Error("a key twice in one batch was shipped")
	}
	if _, err := a.TeamReport(ctx, "2026-12-05", "2026-12-01"); err == nil {
		t.Error("an empty range was read")
	}
}

// Two machines racing to ship the same new requests (a synced session):
// each is counted once, and the per-machine lines still sum to the total.
func TestTeamFactsRace(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx := t.Context()
	var stores []*Store
	for _, m := range []string{"m1", "m2"} {
		s, err := Open(dsn, m)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	errs := make(chan error, 2)
	for i, s := range stores {
		go func() {
			var err error
			for k := range 20 {
				var batch []db.TeamOutboxItem
				for j := range 10 {
					f := teamFact(fmt.Sprintf("pi:s/e%d", (k*10+j+i*5)%200), "ann", "pi", "2026-12-01", "m", int64(k*10+j))
					batch = append(batch, db.TeamOutboxItem{Rev: 1, Fact: f})
				}
				if _, err = s.PutTeamFacts(ctx, batch); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ls := lines(t, stores[0], "", "")
	total := ls["total:"].Sums
	m := ls["machine:m1"].Sums.Requests + ls["machine:m2"].Sums.Requests
	if total.Requests != 200 || m != 200 {
		t.Fatalf("200 requests shipped by both: total %d, machines %d", total.Requests, m)
	}
	var raw int64
	if err := stores[0].pool.QueryRow(ctx, `SELECT sum(spend_input + spend_output + spend_read + spend_write + spend_other) FROM team_requests`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if total.Spend() != raw || ls["machine:m1"].Sums.Spend()+ls["machine:m2"].Sums.Spend() != raw {
		t.Errorf("rollups %d micro-USD, raw rows %d", total.Spend(), raw)
	}
}
