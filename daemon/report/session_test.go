package report

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/my-pi/bindery/watcher"
)

// handSession is a small session whose every figure is worked out by hand
// in TestHandSession. Lines (the header is line 1):
//
//	2  model_change a1
//	3  user u1                    cycle 1 starts
//	4  m1 sonnet-4-5 toolUse      in 10 out 50 cr 0    cw 2000, thinking 400 chars (100 tok), pi cost
//	5  toolResult t1
//	6  m2 sonnet-4-5 toolUse      in 5  out 40 cr 2000 cw 300,  thinking 200 chars (50 tok), no cost
//	7  toolResult t2
//	8  m3 sonnet-4-5 stop         in 5  out 30 cr 2300 cw 200,  no thinking
//	9  user x1 (parent m3)        abandoned branch
//	10 x2 assistant               off the branch
//	11 user u2 (parent m3)        cycle 2 starts
//	12 m4 sonnet-4-5 error        all usage 0
//	13 m5 sonnet-4-5 stop         in 8  out 20 cr 1000 cw 1700, thinking 100+3 chars (25+1 tok); compile: strip
//	14 user u3                    cycle 3 starts
//	15 m6 sonnet-4-5 aborted      in 3  out 7  cr 2708 cw 0
//	16 m7 opus-4-5 stop           in 2  out 5  cr 2708 cw 100,  thinking 40 chars (10 tok), no cost, no table price
func handSession() SessionInput {
	var b builder
	b.add(watcher.Entry{ID: "a1", Type: "model_change", ModelID: "claude-sonnet-4-5"}, "-")
	b.user("u1", "")
	b.assistant("m1", "", asst{model: "claude-sonnet-4-5", stop: "toolUse", in: 10, out: 50, cr: 0, cw: 2000, think: []int{400},
		ts:   "2026-11-01T10:00:00Z",
		cost: &watcher.Cost{Input: f64(0.00003), Output: f64(0.00075), CacheRead: f64(0), CacheWrite: f64(0.0075), Total: f64(0.00828)}})
	b.toolResult("t1")
	b.assistant("m2", "", asst{model: "claude-sonnet-4-5", stop: "toolUse", in: 5, out: 40, cr: 2000, cw: 300, think: []int{200}, ts: "2026-11-01T10:00:10Z"})
	b.toolResult("t2")
	b.assistant("m3", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 5, out: 30, cr: 2300, cw: 200, ts: "2026-11-01T10:00:20Z"})
	b.user("x1", "m3")
	b.assistant("x2", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 1, out: 1, cr: 2500, cw: 9})
	b.user("u2", "m3")
	b.assistant("m4", "", asst{model: "claude-sonnet-4-5", stop: "error", ts: "2026-11-01T10:01:00Z"})
	b.assistant("m5", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 8, out: 20, cr: 1000, cw: 1700, think: []int{100, 3}, ts: "2026-11-01T10:01:05Z"})
	b.user("u3", "")
	b.assistant("m6", "", asst{model: "claude-sonnet-4-5", stop: "aborted", in: 3, out: 7, cr: 2708, cw: 0, ts: "2026-11-01T10:02:00Z"})
	b.assistant("m7", "", asst{model: "claude-opus-4-5", stop: "stop", in: 2, out: 5, cr: 2708, cw: 100, think: []int{40}, ts: "2026-11-01T10:02:30Z"})
	return SessionInput{
		Session: "hand",
		Entries: b.entries,
		Compiles: []CompileEvent{
			{Seq: 1, EntryID: "m5", CacheCause: "strip", Strips: []Strip{{Reason: "prefix-changed", Tokens: 50, WouldRefuse: true}}},
			{Seq: 2, EntryID: "m7", CacheCause: "none"},
		},
	}
}

func TestHandSession(t *testing.T) {
	s := Analyze(handSession(), DefaultPrices())
	f := s.Summary.Figures

	// Branch: leaf m7 -> m6 -> u3 -> m5 -> m4 -> u2 -> m3 -> ... -> a1;
	// x1/x2 are off it. Requests m1..m7 = 7; turns m1 m2 m3 m5 m7 = 5;
	// tool loops m1 m2 = 2; m4 errored, m6 aborted; x2 off the branch.
	eq(t, "requests", f.Requests, Requests{Total: 7, Turns: 5, ToolLoops: 2, Errored: 1, Aborted: 1, OffBranch: 1})

	// Cycles: u1 {m1 m2 m3} = 3, u2 {m5} = 1 (m4 errored is no turn),
	// u3 {m7} = 1 and open. Sorted 1 1 3: nearest-rank median rank
	// ceil(1.5)=2 -> 1; p90 rank ceil(2.7)=3 -> 3.
	c := f.Cycles
	eq(t, "cycles", c.Count, 3)
	eq(t, "closed", c.Closed, 2)
	eq(t, "open", c.Open, 1)
	if !reflect.DeepEqual(c.Lengths, Histogram{1: 2, 3: 1}) {
		t.Errorf("lengths = %v", c.Lengths)
	}
	eq(t, "median", c.Median, 1)
	eq(t, "p90", c.P90, 3)
	eq(t, "over16", c.Over16, 0)
	// Thinking per cycle: 150, 26, 10.
	eq(t, "max thinking", c.MaxThinking, int64(150))

	// Thinking volume: closed cycles hold m1 (100) m2 (50) m5 (25+1):
	// 4 blocks, 176 tokens; the open cycle m7's 10 tokens.
	th := f.Thinking
	eq(t, "closed volume", th.Closed, Volume{Blocks: 4, Tokens: 176})
	eq(t, "open volume", th.Open, Volume{Blocks: 1, Tokens: 10})
	// In prompts: m1 0; m2 carries m1's 100 (open); m3 carries 150 (open);
	// m5 (sonnet 4.5, last-turn-only) carries 150 of closed thinking, free;
	// m7 (opus 4.5, keep-all) carries 150+26 = 176 of closed thinking,
	// billed. Billed 0+100+150+0+176 = 426, free 150.
	eq(t, "billed", th.Billed, int64(426))
	eq(t, "free", th.Free, int64(150))
	// Prompts: m1 2010, m2 2305, m3 2505, m5 2708, m7 2810 = 12338.
	eq(t, "prompt tokens", th.PromptTokens, int64(12338))
	near(t, "share", th.Share, 426.0/12338)
	eq(t, "regimes", [3]int{th.LastTurnOnly, th.KeepAll, th.Unknown}, [3]int{4, 1, 0})
	wantBilled := []int64{0, 100, 150, 0, 0, 0, 176}
	wantFree := []int64{0, 0, 0, 0, 150, 0, 0}
	for i, r := range s.Requests {
		eq(t, "billed of "+r.EntryID, r.ThinkingBilled, wantBilled[i])
		eq(t, "free of "+r.EntryID, r.ThinkingFree, wantFree[i])
	}

	// Cache over the turns: read 0+2000+2300+1000+2708 = 8008, write
	// 2000+300+200+1700+100 = 4300, uncached 10+5+5+8+2 = 30, output
	// 50+40+30+20+5 = 145; hit ratio 8008/12338.
	k := f.Cache
	eq(t, "cache tokens", [4]int64{k.Read, k.Write, k.Input, k.Output}, [4]int64{8008, 4300, 30, 145})
	near(t, "hit ratio", k.HitRatio, 8008.0/12338)
	near(t, "read per turn", k.ReadPerReq, 8008.0/5)

	// Spend: m1 from pi (0.00003 + 0.00075 + 0 + 0.0075); m2 m3 m5 from
	// the table at $3 / $15 / $0.30 / $3.75 per Mtok:
	//   m2 5*3 + 40*15 + 2000*0.3 + 300*3.75  = 15+600+600+1125   = 2340e-6
	//   m3 5*3 + 30*15 + 2300*0.3 + 200*3.75  = 15+450+690+750    = 1905e-6
	//   m5 8*3 + 20*15 + 1000*0.3 + 1700*3.75 = 24+300+300+6375   = 6999e-6
	// m7 (opus 4.5, no cost, no table row) is unpriced.
	sp := f.Spend
	near(t, "spend input", sp.Input, (30+15+15+24)*1e-6)
	near(t, "spend output", sp.Output, (750+600+450+300)*1e-6)
	near(t, "spend cache read", sp.CacheRead, (0+600+690+300)*1e-6)
	near(t, "spend cache write", sp.CacheWrite, (7500+1125+750+6375)*1e-6)
	near(t, "spend total", sp.Total, 19524e-6)
	eq(t, "priced by", [3]int{sp.FromPi, sp.FromTable, sp.Unpriced}, [3]int{1, 3, 1})
	if !reflect.DeepEqual(sp.UnpricedModels, []string{"claude-opus-4-5"}) {
		t.Errorf("unpriced models = %v", sp.UnpricedModels)
	}
	if s.Requests[6].Cost != nil {
		t.Errorf("m7 cost = %v, want unknown", *s.Requests[6].Cost)
	}

	// Apart: m4 (all zero, table: $0) and m6: 3*3 + 7*15 + 2708*0.3 =
	// 9 + 105 + 812.4 = 926.4e-6.
	a := f.Apart
	eq(t, "apart tokens", [5]int64{int64(a.Requests), a.Input, a.Output, a.Read, a.Write}, [5]int64{2, 3, 7, 2708, 0})
	near(t, "apart spend", a.Spend.Total, 926.4e-6)

	// Breaks, over requests with usage and a prompt: m1 m2 m3 (m4's
	// prompt is 0) m5 m6 m7. m5: read 1000 < 2300 and prompt 2708 > 2505:
	// a break. Rewritten min(1700, 2300+200-1000 = 1500) = 1500; cost
	// 1500*3.75e-6 = 0.005625, excess 1500*(3.75-0.30)e-6 = 0.005175;
	// m5's compile reported its own strip. m6 and m7 read 2708: no break.
	if len(s.Summary.Breaks) != 1 {
		t.Fatalf("breaks = %+v", s.Summary.Breaks)
	}
	br := s.Summary.Breaks[0]
	eq(t, "break at", [4]int{br.Request, br.Line, br.Cycle, br.Turn}, [4]int{5, 13, 2, 1})
	eq(t, "break reads", [3]int64{br.ReadBefore, br.ReadAfter, br.Rewritten}, [3]int64{2300, 1000, 1500})
	near(t, "break cost", *br.Cost, 0.005625)
	near(t, "break excess", *br.Excess, 0.005175)
	eq(t, "break cause", br.Cause, CauseStrip)
	eq(t, "m5 marked", s.Requests[4].Break, true)
	eq(t, "break totals", [2]int64{int64(f.Breaks.Count), f.Breaks.Rewritten}, [2]int64{1, 1500})
	eq(t, "strip breaks", f.Breaks.ByCause[CauseStrip].Count, 1)

	// Bindery: 2 compiles, one prefix-changed strip of 50 tokens that the
	// provider would have refused; its cache cost is the break's excess.
	d := f.Bindery
	eq(t, "compiles", d.Compiles, 2)
	if !reflect.DeepEqual(d.Strips, map[string]int{"prefix-changed": 1}) {
		t.Errorf("strips = %v", d.Strips)
	}
	eq(t, "stripped tokens", d.StrippedTokens, int64(50))
	eq(t, "400s avoided", [2]int{d.RequestsRescued, d.RefusalsAvoided}, [2]int{1, 1})
	near(t, "strip cache cost", d.CacheCost, 0.005175)
	eq(t, "m5 strips", s.Requests[4].Strips, 1)
}

func TestBranchRules(t *testing.T) {
	// No parentId anywhere (pi v1): the whole file in order.
	lin := []watcher.Entry{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	if got := Branch(lin); !reflect.DeepEqual(got, []int{0, 1, 2}) {
		t.Errorf("linear = %v", got)
	}
	// A parent loop and a dangling parent both end the walk.
	loop := []watcher.Entry{{ID: "a", ParentID: "c"}, {ID: "b", ParentID: "a"}, {ID: "c", ParentID: "b"}}
	if got := Branch(loop); !reflect.DeepEqual(got, []int{0, 1, 2}) {
		t.Errorf("loop = %v", got)
	}
	dangling := []watcher.Entry{{ID: "a"}, {ID: "b", ParentID: "zz"}, {ID: "c", ParentID: "b"}}
	if got := Branch(dangling); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("dangling = %v", got)
	}
	if Branch(nil) != nil {
		t.Error("empty branch")
	}
}

func TestBreakCauses(t *testing.T) {
	var b builder
	m := "claude-sonnet-4-5"
	b.user("u", "-")
	step := func(id, ts string, cr, cw int64) {
		b.assistant(id, "", asst{model: m, stop: "toolUse", in: 1, cr: cr, cw: cw, ts: "2026-11-01T" + ts + "Z"})
		b.toolResult("t" + id)
	}
	step("r1", "10:00:00", 0, 5000)    // prompt 5001
	step("r2", "10:00:10", 5000, 500)  // prompt 5501, normal
	step("r3", "10:00:20", 1000, 4600) // prompt 5601, read fell: compile saw a host change
	step("r4", "10:06:20", 0, 6000)    // prompt 6001, read fell after 6 minutes idle
	step("r5", "10:06:30", 6000, 200)  // prompt 6201, normal
	step("r6", "10:06:40", 100, 6300)  // prompt 6401, read fell, no known cause
	b.add(watcher.Entry{ID: "k", Type: "compaction", FirstKeptEntryID: "tr6"}, "")
	step("r7", "10:06:50", 50, 100) // prompt 151 after a compaction: reusable min(6400, 151), read 50
	s := Analyze(SessionInput{Session: "c", Entries: b.entries,
		Compiles: []CompileEvent{{EntryID: "r3", CacheCause: "host"},
			// Linked by the entry the request was built on: r6's parent.
			{Parent: "tr5", CacheCause: "bindery", Strips: []Strip{{Reason: "gap", Tokens: 7}}}}}, DefaultPrices())
	var got []string
	for _, br := range s.Summary.Breaks {
		got = append(got, br.EntryID+":"+br.Cause)
	}
	want := []string{"r3:host", "r4:idle", "r6:strip", "r7:compaction"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("breaks = %v, want %v", got, want)
	}
	// r3: min(4600, 5000+500-1000) = 4500; r4: min(6000, 1000+4600-0) =
	// 5600; r6: min(6300, 6000+200-100) = 6100; r7: min(100,
	// min(100+6300, 151)-50) = 100.
	for i, w := range []int64{4500, 5600, 6100, 100} {
		eq(t, "rewritten "+want[i], s.Summary.Breaks[i].Rewritten, w)
	}
	eq(t, "by cause", len(s.Summary.Figures.Breaks.ByCause), 4)
	// Avoidable: the host and strip breaks' excess (idle and compaction
	// are not): (4500 + 6100) * (3.75 - 0.30) per Mtok.
	near(t, "avoidable", s.Summary.Figures.Breaks.Avoidable, (4500+6100)*3.45e-6)
	eq(t, "r6 strips", s.Requests[5].Strips, 1)
	// r6's excess: 6100 * (3.75 - 0.30) per Mtok.
	near(t, "strip cache cost", s.Summary.Figures.Bindery.CacheCost, 6100*3.45e-6)

	// With no compile, r6's break has no known cause.
	s = Analyze(SessionInput{Session: "c", Entries: b.entries}, DefaultPrices())
	eq(t, "r6 unlinked", s.Summary.Breaks[2].Cause, CauseUnknown)
}

func TestMissingAndPartialUsage(t *testing.T) {
	var b builder
	b.user("u", "-")
	// Old pi: no totalTokens (never needed) and no cost; Sonnet 4.5 is in
	// the table, so it is priced from it.
	b.assistant("r1", "", asst{model: "claude-sonnet-4-5-20250929", stop: "stop", in: 100, out: 10, cr: 0, cw: 1000})
	b.user("u2", "")
	// No usage at all: counted as a request, not priced, no break role.
	b.assistant("r2", "", asst{model: "claude-sonnet-4-5", stop: "stop", noUsage: true})
	b.user("u3", "")
	// cacheWrite missing: usage incomplete, skipped by break detection.
	b.assistant("r3", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 5, out: 1, cr: 0, noWrite: true})
	// Unknown model with only cost.total: priced as an unsplit total.
	b.assistant("r4", "", asst{model: "gpt-9", stop: "stop", in: 5, out: 5, cr: 900, cw: 200, cost: &watcher.Cost{Total: f64(0.5)}})
	// Sonnet 4.5 with only cost.total (what the index keeps): pi's total,
	// split in the table's proportions: 1000*0.3 + 100*3.75 = 300 + 375
	// = 675e-6 at list price; pi says 0.00135, twice that.
	b.assistant("r4b", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 0, out: 0, cr: 1000, cw: 100, cost: &watcher.Cost{Total: f64(0.00135)}})
	// Unknown model, no cost: unpriced.
	b.assistant("r5", "", asst{model: "claude-opus-5-5", stop: "stop", in: 5, out: 5, cr: 800, cw: 400})
	s := Analyze(SessionInput{Session: "p", Entries: b.entries}, DefaultPrices())
	f := s.Summary.Figures
	eq(t, "usage missing", f.Requests.UsageMissing, 2)
	// r1: 100*3 + 10*15 + 1000*3.75 = 300+150+3750 = 4200e-6. r2 (no
	// usage) and r3 (no cacheWrite) are unpriced: their tokens are not
	// all known.
	near(t, "split total", f.Spend.Input+f.Spend.Output+f.Spend.CacheRead+f.Spend.CacheWrite, 4200e-6+1350e-6)
	near(t, "split cache read", f.Spend.CacheRead, 600e-6)
	near(t, "split cache write", f.Spend.CacheWrite, 3750e-6+750e-6)
	near(t, "unsplit", f.Spend.Unsplit, 0.5)
	near(t, "total", f.Spend.Total, 4200e-6+1350e-6+0.5)
	eq(t, "priced by", [3]int{f.Spend.FromPi, f.Spend.FromTable, f.Spend.Unpriced}, [3]int{2, 1, 3})
	if !reflect.DeepEqual(f.Spend.UnpricedModels, []string{"claude-opus-5-5", "claude-sonnet-4-5"}) {
		t.Errorf("unpriced models = %v", f.Spend.UnpricedModels)
	}
	// The requests with full usage are r1, r4, r4b, r5, each on another
	// model than the one before. r4 after r1: read 900 of the 1000 r1
	// left (reusable min(1000, 1105)): 100 rewritten; r4b after r4: 1000
	// of 1100, 100; r5 after r4b: 800 of 1100, min(400, 300) = 300. All
	// model changes. r4 (gpt-9, only cost.total, no table row) and r5
	// (Opus 5.5: neither a cost nor a table price) are unpriced; r4b is
	// priced from the table (Sonnet 4.5).
	var got []string
	for _, br := range s.Summary.Breaks {
		got = append(got, fmt.Sprintf("%s:%s:%d:%v", br.EntryID, br.Cause, br.Rewritten, br.Cost != nil))
	}
	if want := []string{"r4:model:100:false", "r4b:model:100:true", "r5:model:300:false"}; !reflect.DeepEqual(got, want) || f.Breaks.Unpriced != 2 {
		t.Errorf("breaks = %v (unpriced %d), want %v", got, f.Breaks.Unpriced, want)
	}
	if s.Requests[1].Cost != nil || s.Requests[1].UsageKnown {
		t.Errorf("r2 = %+v", s.Requests[1])
	}
}

func TestCompactionDropsThinking(t *testing.T) {
	var b builder
	m := "claude-opus-4-5" // keep-all: closed thinking billed until compacted away
	b.user("u1", "-")
	b.assistant("a1", "", asst{model: m, stop: "stop", in: 1, cw: 10, think: []int{400}}) // 100 tok
	b.user("u2", "")
	b.assistant("a2", "", asst{model: m, stop: "stop", in: 1, cw: 10, think: []int{80}}) // 20 tok
	b.add(watcher.Entry{ID: "c", Type: "compaction", FirstKeptEntryID: "u2"}, "")
	b.user("u3", "")
	b.assistant("a3", "", asst{model: m, stop: "stop", in: 1, cw: 10})
	s := Analyze(SessionInput{Session: "k", Entries: b.entries}, nil)
	// a2 carries a1's 100; a3 carries only a2's 20 (a1 is before u2).
	eq(t, "a2 billed", s.Requests[1].ThinkingBilled, int64(100))
	eq(t, "a3 billed", s.Requests[2].ThinkingBilled, int64(20))
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
