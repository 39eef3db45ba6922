package report

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/my-pi/bindery/db"
)

// A session's team facts are its report: one per request, the same
// tokens, breaks and avoidable spend, and a spend that differs from the
// report's only by the rounding to micro-USD (at most half a micro-USD per
// part of each request).
func TestSessionTeamFactsMatchTheReport(t *testing.T) {
	in := genSession("s1", "claude-sonnet-4-5", []int{3, 5, 2, 8}, 400, map[int]bool{4: true, 9: true}, true)
	in.Entries[len(in.Entries)-1].Usage.Cost = nil // one priced by the table
	s := Analyze(in, DefaultPrices())
	facts := SessionTeamFacts(in, s, DefaultPrices(), "ann", "2026-12-01")
	f := s.Summary.Figures
	Finish(&f)
	eq(t, "facts", len(facts), len(s.Requests))
	var sum db.TeamFact
	for _, x := range facts {
		if x.Person != "ann" || x.Client != "pi" || x.Day == "" || x.Requests != 1 {
			t.Fatalf("fact %+v", x)
		}
		sum.Input += x.Input
		sum.CacheRead += x.CacheRead
		sum.Breaks += x.Breaks
		sum.Rewritten += x.Rewritten
		sum.Avoidable += x.Avoidable
		sum.SpendInput += x.Spend()
	}
	eq(t, "input", sum.Input, f.Cache.Input+f.Apart.Input)
	eq(t, "cache read", sum.CacheRead, f.Cache.Read+f.Apart.Read)
	eq(t, "breaks", sum.Breaks, int64(f.Breaks.Count))
	eq(t, "rewritten", sum.Rewritten, f.Breaks.Rewritten)
	if f.Breaks.Count == 0 {
		t.Fatal("the session has no break to test")
	}
	tol := 4 * 0.5 * float64(len(facts))
	if d := math.Abs(float64(sum.SpendInput) - f.Total*1e6); d > tol {
		t.Errorf("spend %d micro-USD, report %.6f USD (off by %.1f, over %.1f)", sum.SpendInput, f.Total, d, tol)
	}
	if d := math.Abs(float64(sum.Avoidable) - f.Breaks.Avoidable*1e6); d > float64(f.Breaks.Count) {
		t.Errorf("avoidable %d micro-USD, report %.6f USD", sum.Avoidable, f.Breaks.Avoidable)
	}
}

func TestHostTeamFact(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	u := db.AcceptUsage{Compile: "c_9", Conversation: "claude-code:abc", Model: "claude-sonnet-4-5", AcceptedMs: 1796083200000,
		Input: n(1_000_000), Output: n(0), CacheRead: n(0), CacheWrite: n(0)}
	f := HostTeamFact(u, DefaultPrices(), "bob", "box")
	eq(t, "key", f.Key, "host:box/c_9")
	eq(t, "client", f.Client, "claude-code")
	eq(t, "day", f.Day, "2026-12-01")
	eq(t, "spend", f.SpendInput, int64(3_000_000)) // $3 per million input tokens
	u.Model = "no-such-model"
	if g := HostTeamFact(u, DefaultPrices(), "bob", "box"); g.Unpriced != 1 || g.Spend() != 0 {
		t.Errorf("unpriced: %+v", g)
	}
}

func TestTeamFactNamesAreCut(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	u := db.AcceptUsage{Compile: "c", Conversation: long + ":x", Model: long}
	f := HostTeamFact(u, DefaultPrices(), "p", "m")
	if len(f.Model) > maxName || len(f.Client) > maxName || !utf8.ValidString(f.Model) || !utf8.ValidString(f.Client) {
		t.Errorf("model %d bytes, client %d bytes", len(f.Model), len(f.Client))
	}
}
