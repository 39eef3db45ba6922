package report

import (
	"testing"

	"github.com/my-pi/bindery/watcher"
)

// pi 1.6's entries in the report, worked by hand (sonnet-4-5 from the price
// table: input 3, output 15, 5m write 3.75, read 0.30 per Mtok; its 1h
// write is the documented 2x input, 6):
//
//	u1 user                       cycle 1
//	m1 toolUse  in 10 out 100 cr 0    cw 1000 (1h 400), thinking 400 chars (100 tok)
//	t1 toolResult
//	s1 system message             no new cycle
//	m2 toolUse  in 5  out 40  cr 1000 cw 200, thinking 200 chars (50 tok)
//	t2 toolResult
//	e1 context_edit m1, omitted   m1's 100 tok leave the prompts
//	e2 context_edit m2, replaced  by content holding 20 chars of thinking (5 tok)
//	m3 stop     in 5  out 30  cr 1200 cw 100
//	w1 usage cache_warm in 3 out 1 cr 5000 cw 0
//	u2 user                       cycle 2
//	m4 stop     in 4  out 10  cr 1300 cw 4000
func TestPi16Entries(t *testing.T) {
	var b builder
	m := "claude-sonnet-4-5"
	b.user("u1", "-")
	b.assistant("m1", "", asst{model: m, stop: "toolUse", in: 10, out: 100, cr: 0, cw: 1000, think: []int{400}, ts: "2026-12-01T10:00:00Z"})
	b.entries[len(b.entries)-1].Usage.CacheWrite1h = i64(400)
	b.toolResult("t1")
	b.add(watcher.Entry{ID: "s1", Role: "system"}, "")
	b.assistant("m2", "", asst{model: m, stop: "toolUse", in: 5, out: 40, cr: 1000, cw: 200, think: []int{200}, ts: "2026-12-01T10:00:10Z"})
	b.toolResult("t2")
	b.add(watcher.Entry{ID: "e1", Type: "context_edit", TargetID: "m1", EditOmit: true}, "")
	b.add(watcher.Entry{ID: "e2", Type: "context_edit", TargetID: "m2", Thinking: []watcher.ThinkingBlock{{Chars: 20, Signed: true}}}, "")
	b.assistant("m3", "", asst{model: m, stop: "stop", in: 5, out: 30, cr: 1200, cw: 100, ts: "2026-12-01T10:00:20Z"})
	b.add(watcher.Entry{ID: "w1", Type: "usage", UsageKind: "cache_warm", Provider: "anthropic", Model: m, Timestamp: "2026-12-01T10:04:20Z",
		Usage: &watcher.Usage{Input: i64(3), Output: i64(1), CacheRead: i64(5000), CacheWrite: i64(0)}}, "")
	b.user("u2", "")
	b.assistant("m4", "", asst{model: m, stop: "stop", in: 4, out: 10, cr: 1300, cw: 4000, ts: "2026-12-01T10:05:00Z"})

	s := Analyze(SessionInput{Session: "pi16", Entries: b.entries}, DefaultPrices())
	f := s.Summary.Figures
	// The usage entry is no request and no turn; the system message
	// closes no cycle: u1 {m1 m2 m3}, u2 {m4}.
	eq(t, "requests", f.Requests, Requests{Total: 4, Turns: 4, ToolLoops: 2})
	eq(t, "cycles", [3]int{f.Cycles.Count, f.Cycles.Closed, f.Cycles.Open}, [3]int{2, 1, 1})
	eq(t, "cycle 1 length", f.Cycles.Lengths[3], 1)
	// In prompts: m2 carries m1's 100 (open); m3 carries only the 5 of
	// m2's replacement (m1 omitted); m4 (last-turn-only) gets those 5 free.
	want := []int64{0, 100, 5, 0}
	for i, r := range s.Requests {
		eq(t, "billed of "+r.EntryID, r.ThinkingBilled, want[i])
	}
	eq(t, "free", f.Thinking.Free, int64(5))
	// Produced thinking is unchanged by the edits: m1 100 + m2 50.
	eq(t, "closed volume", f.Thinking.Closed, Volume{Blocks: 2, Tokens: 150})

	// m1's write: 600 at 3.75 + 400 at the 1h price 6.
	r1 := s.Requests[0]
	eq(t, "m1 cacheWrite1h", r1.CacheWrite1h, int64(400))
	near(t, "m1 cost", *r1.Cost, 10*3e-6+100*15e-6+600*3.75e-6+400*6e-6)
	near(t, "spend cache write", f.Spend.CacheWrite, (600*3.75+400*6+200*3.75+100*3.75+4000*3.75)*1e-6)
	eq(t, "priced by table", f.Spend.FromTable, 4)

	// The warm is its own line, out of the branch's spend and cache.
	w := f.Warm
	eq(t, "warm", [5]int64{int64(w.Entries), w.Input, w.Output, w.Read, w.Write}, [5]int64{1, 3, 1, 5000, 0})
	near(t, "warm spend", w.Spend.Total, 3*3e-6+1*15e-6+5000*0.3e-6)
	eq(t, "cache read", f.Cache.Read, int64(0+1000+1200+1300))
	// Counted as a request, the warm (read 5000) would make m4 (read 1300,
	// a larger prompt) a break; it is not one.
	eq(t, "breaks", f.Breaks.Count, 0)
	eq(t, "other usage", f.OtherUsage.Entries, 0)

	if r := SessionReport(s, DefaultPrices()); r.Figures.Total != f.Spend.Total+w.Spend.Total {
		t.Errorf("session total %v, want spend %v + warm %v", r.Figures.Total, f.Spend.Total, w.Spend.Total)
	}

	// An unknown kind goes to its own line, named.
	b.add(watcher.Entry{ID: "w2", Type: "usage", UsageKind: "title", Model: m, Usage: &watcher.Usage{Input: i64(1), Output: i64(1), CacheRead: i64(0), CacheWrite: i64(0)}}, "")
	f = Analyze(SessionInput{Session: "pi16", Entries: b.entries}, DefaultPrices()).Summary.Figures
	if f.OtherUsage.Entries != 1 || len(f.OtherUsage.Kinds) != 1 || f.OtherUsage.Kinds[0] != "title" || f.Warm.Entries != 1 {
		t.Fatalf("other usage %+v warm %+v", f.OtherUsage, f.Warm)
	}
	var merged Figures
	Merge(&merged, f)
	Merge(&merged, f)
	if merged.Warm.Entries != 2 || merged.OtherUsage.Entries != 2 || len(merged.OtherUsage.Kinds) != 1 {
		t.Fatalf("merged %+v %+v", merged.Warm, merged.OtherUsage)
	}
}

// A row with an explicit 1h write price uses it; a row without an input
// price cannot price 1h writes, and says so instead of guessing.
func TestWrite1hPrice(t *testing.T) {
	p, err := ParsePrices([]byte(`{"claude-opus-5-5": {"input": 5, "output": 25, "cacheWrite": 6.25, "cacheWrite1h": 11, "cacheRead": 0.25, "source": "test"},
		"claude-haiku-5-5": {"output": 5, "cacheWrite": 1.25, "cacheRead": 0.1, "source": "test"}}`))
	if err != nil {
		t.Fatal(err)
	}
	u := &watcher.Usage{Input: i64(0), Output: i64(0), CacheRead: i64(0), CacheWrite: i64(100), CacheWrite1h: i64(40)}
	parts, ok := tableParts(u, "claude-opus-5-5", p)
	if !ok {
		t.Fatal("opus 5.5 unpriced")
	}
	near(t, "opus write", parts[3], (60*6.25+40*11)*1e-6)
	if _, ok := tableParts(u, "claude-haiku-5-5", p); ok {
		t.Fatal("a 1h write priced without a 1h or input price")
	}
	u.CacheWrite1h = nil
	if _, ok := tableParts(u, "claude-haiku-5-5", p); !ok {
		t.Fatal("5-minute writes alone need no 1h price")
	}
	if _, err := ParsePrices([]byte(`{"x": {"cacheWrite1h": -1, "source": "t"}}`)); err == nil {
		t.Fatal("a negative 1h price accepted")
	}
}

// A break after a long pause is put down to the cache expiring (idle)
// only when no cache warm kept it alive in between.
func TestBreakAfterWarmIsNotIdle(t *testing.T) {
	build := func(warm bool) Session {
		var b builder
		m := "claude-sonnet-4-5"
		b.user("u1", "-")
		b.assistant("m1", "", asst{model: m, stop: "stop", in: 5, out: 10, cr: 3000, cw: 500, ts: "2026-12-01T10:00:00Z"})
		if warm {
			b.add(watcher.Entry{ID: "w1", Type: "usage", UsageKind: "cache_warm", Model: m, Timestamp: "2026-12-01T10:04:30Z",
				Usage: &watcher.Usage{Input: i64(2), Output: i64(1), CacheRead: i64(2000), CacheWrite: i64(0)}}, "")
		}
		b.user("u2", "")
		// 8 minutes after m1 (3.5 after the warm): less read, more prompt
		b.assistant("m2", "", asst{model: m, stop: "stop", in: 5, out: 10, cr: 500, cw: 3100, ts: "2026-12-01T10:08:00Z"})
		return Analyze(SessionInput{Session: "w", Entries: b.entries}, DefaultPrices())
	}
	cold, warmed := build(false), build(true)
	if len(cold.Summary.Breaks) != 1 || cold.Summary.Breaks[0].Cause != CauseIdle {
		t.Fatalf("without a warm: %+v", cold.Summary.Breaks)
	}
	if len(warmed.Summary.Breaks) != 1 || warmed.Summary.Breaks[0].Cause != CauseUnknown {
		t.Fatalf("after a warm: %+v", warmed.Summary.Breaks)
	}
}

// An edit of an entry a compaction has since summarized puts nothing back
// into the prompts.
func TestEditBeforeCompactionWindow(t *testing.T) {
	var b builder
	m := "claude-opus-4-5"
	b.user("u1", "-")
	b.assistant("m1", "", asst{model: m, stop: "stop", in: 5, out: 10, cr: 0, cw: 100, think: []int{400}, ts: "2026-12-01T10:00:00Z"})
	b.user("u2", "")
	b.assistant("m2", "", asst{model: m, stop: "stop", in: 5, out: 10, cr: 100, cw: 100, ts: "2026-12-01T10:01:00Z"})
	b.add(watcher.Entry{ID: "k1", Type: "compaction", FirstKeptEntryID: "u2"}, "")
	b.add(watcher.Entry{ID: "e1", Type: "context_edit", TargetID: "m1", Thinking: []watcher.ThinkingBlock{{Chars: 400, Signed: true}}}, "")
	b.user("u3", "")
	b.assistant("m3", "", asst{model: m, stop: "stop", in: 5, out: 10, cr: 100, cw: 100, ts: "2026-12-01T10:02:00Z"})
	s := Analyze(SessionInput{Session: "k", Entries: b.entries}, DefaultPrices())
	if got := s.Requests[2].ThinkingBilled; got != 0 {
		t.Fatalf("m3 carries %d tokens of thinking the compaction summarized", got)
	}
}
