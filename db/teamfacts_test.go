package db

import (
	"context"
	"testing"
)

// Team facts are queued once per change: an unchanged fact is not queued
// again, a changed one is (with a higher rev), and a key a whole scope no
// longer has is retracted with its zero fact. Shipping deletes what it
// shipped; a key queued twice ships once.
func TestTeamFactsQueue(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	f := func(key string, in int64) TeamFact {
		return TeamFact{Key: key, Person: "ann", Client: "pi", Day: "2026-12-01", Model: "m", Requests: 1, Input: in, SpendInput: in * 3}
	}
	n, err := d.QueueTeamFacts(ctx, []TeamScope{{Scope: "s1", Stamp: "st1", Whole: true, Facts: []TeamFact{f("pi:s1/a", 10), f("pi:s1/b", 20)}}})
	if err != nil || n != 2 {
		t.Fatalf("first queue: %d %v", n, err)
	}
	n, err = d.QueueTeamFacts(ctx, []TeamScope{{Scope: "s1", Stamp: "st2", Whole: true, Facts: []TeamFact{f("pi:s1/a", 10), f("pi:s1/b", 20)}}})
	if err != nil || n != 0 {
		t.Fatalf("unchanged: %d %v", n, err)
	}
	items, _, err := d.TeamOutbox(ctx, 100)
	if err != nil || len(items) != 2 {
		t.Fatalf("outbox: %v %v", items, err)
	}
	rev0 := items[0].Rev
	// b changes, a leaves the branch
	n, err = d.QueueTeamFacts(ctx, []TeamScope{{Scope: "s1", Stamp: "st3", Whole: true, Facts: []TeamFact{f("pi:s1/b", 25)}}})
	if err != nil || n != 2 {
		t.Fatalf("changed: %d %v", n, err)
	}
	items, upto, err := d.TeamOutbox(ctx, 100)
	if err != nil || len(items) != 2 {
		t.Fatalf("outbox after change: %+v %v", items, err)
	}
	got := map[string]TeamOutboxItem{}
	for _, it := range items {
		got[it.Fact.Key] = it
	}
	if a := got["pi:s1/a"]; a.Fact.Requests != 0 || a.Fact.Input != 0 || a.Fact.Person != "ann" || a.Rev <= rev0 {
		t.Errorf("a retracted: %+v", a)
	}
	if b := got["pi:s1/b"]; b.Fact.Input != 25 || b.Rev <= rev0 {
		t.Errorf("b changed: %+v", b)
	}
	scans, err := d.TeamScans(ctx)
	if err != nil || scans["s1"] != "st3" {
		t.Fatalf("scans: %v %v", scans, err)
	}
	if err := d.TeamShipped(ctx, upto); err != nil {
		t.Fatal(err)
	}
	if n, err := d.TeamOutboxLen(ctx); err != nil || n != 0 {
		t.Fatalf("after shipping: %d %v", n, err)
	}
	if _, err := d.QueueTeamFacts(ctx, []TeamScope{{Scope: "x", Facts: make([]TeamFact, MaxTeamFacts+1)}}); err == nil {
		t.Error("an unbounded call was taken")
	}
	if _, _, err := d.TeamOutbox(ctx, 0); err == nil {
		t.Error("limit 0 was taken")
	}
}

// A host conversation's accepts are offered once: after their facts are
// queued they are not offered again.
func TestHostAcceptsUnqueued(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	n := func(v int64) *int64 { return &v }
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		for i, c := range []string{"c_1", "c_2"} {
			if err := tx.InsertAcceptUsage(ctx, AcceptUsage{Compile: c, Conversation: "claude-code:x", Branch: "b", Model: "m", AcceptedMs: int64(i), Input: n(5), CacheRead: n(1)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := d.HostAcceptsUnqueued(ctx, "box", 10)
	if err != nil || len(got) != 2 || got[0].Compile != "c_1" || *got[0].Input != 5 || got[0].Output != nil {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := d.QueueTeamFacts(ctx, []TeamScope{{Scope: TeamHostScope, Facts: []TeamFact{{Key: TeamHostKey("box", "c_1"), Requests: 1, Day: "2026-12-01"}}}}); err != nil {
		t.Fatal(err)
	}
	got, err = d.HostAcceptsUnqueued(ctx, "box", 10)
	if err != nil || len(got) != 1 || got[0].Compile != "c_2" {
		t.Fatalf("after queueing c_1: %+v %v", got, err)
	}
}
