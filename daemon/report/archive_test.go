package report

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestGeneratedCycles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []int
	var sums []Summary
	for i := 0; i < 40; i++ {
		lens := randomLens(rng, 1+rng.IntN(12))
		breaks := map[int]bool{}
		total := 0
		for _, l := range lens {
			total += l
		}
		for k := 0; k < 3; k++ {
			if total > 3 { // request 1 reads 0, so a fall needs n >= 3
				breaks[3+rng.IntN(total-2)] = true
			}
		}
		s := Analyze(genSession("g"+string(rune('a'+i%26))+string(rune('a'+i/26)), "claude-opus-4-5", lens, 40, breaks, true), DefaultPrices())
		f := s.Summary.Figures
		want := Histogram{}
		over16, over130 := 0, 0
		for _, l := range lens {
			want.Add(l, 1)
			if l > 16 {
				over16++
			}
			if l > 130 {
				over130++
			}
		}
		if !reflect.DeepEqual(f.Cycles.Lengths, want) {
			t.Fatalf("session %d: lengths %v, want %v", i, f.Cycles.Lengths, want)
		}
		eq(t, "count", f.Cycles.Count, len(lens))
		eq(t, "open", f.Cycles.Open, 1)
		eq(t, "over16", f.Cycles.Over16, over16)
		eq(t, "over130", f.Cycles.Over130, over130)
		eq(t, "median", f.Cycles.Median, nearestRank(lens, 0.5))
		eq(t, "p90", f.Cycles.P90, nearestRank(lens, 0.9))
		eq(t, "turns", f.Requests.Turns, total)
		eq(t, "tool loops", f.Requests.ToolLoops, total-len(lens))
		var got []int
		for _, b := range s.Summary.Breaks {
			got = append(got, b.Request)
			if b.Cost == nil || *b.Cost <= 0 {
				t.Errorf("break %d unpriced", b.Request)
			}
		}
		var wantB []int
		for n := 1; n <= total; n++ {
			// A break right after a break (a cold write after a cold
			// write) is one too: it read 0 of what the one before wrote.
			if breaks[n] && n > 1 {
				wantB = append(wantB, n)
			}
		}
		if !reflect.DeepEqual(got, wantB) {
			t.Fatalf("session %d: breaks %v, want %v", i, got, wantB)
		}
		// Keep-all model: every thinking block is billed in later prompts:
		// request n carries the n-1 earlier blocks of 10 tokens each.
		eq(t, "billed", f.Thinking.Billed, int64(10*total*(total-1)/2))
		all = append(all, lens...)
		sums = append(sums, s.Summary)
	}
	// The archive's exact histogram gives the median of all cycles.
	r := ArchiveReport(sums, DefaultPrices())
	eq(t, "archive cycles", r.Figures.Cycles.Count, len(all))
	eq(t, "archive median", r.Figures.Cycles.Median, nearestRank(all, 0.5))
	eq(t, "archive p90", r.Figures.Cycles.P90, nearestRank(all, 0.9))
	eq(t, "archive sessions", r.Figures.Sessions, 40)
	eq(t, "archive lines", len(r.Sessions), 40)
	if len(r.Breaks) != MaxArchiveBreaks || r.BreaksOmitted != r.Figures.Breaks.Count-MaxArchiveBreaks {
		t.Errorf("archive breaks %d shown, %d omitted of %d", len(r.Breaks), r.BreaksOmitted, r.Figures.Breaks.Count)
	}
	for i := 1; i < len(r.Breaks); i++ {
		if *r.Breaks[i].Cost > *r.Breaks[i-1].Cost {
			t.Fatalf("archive breaks not costliest first")
		}
	}
}

// A session merged alone equals its own figures; merging is order-free.
func TestMergeMatchesSessions(t *testing.T) {
	a := Analyze(handSession(), DefaultPrices()).Summary
	rng := rand.New(rand.NewPCG(3, 4))
	b := Analyze(genSession("gb", "claude-sonnet-4-5", randomLens(rng, 5), 100, nil, false), DefaultPrices()).Summary
	ab := ArchiveReport([]Summary{a, b}, DefaultPrices()).Figures
	ba := ArchiveReport([]Summary{b, a}, DefaultPrices()).Figures
	if !reflect.DeepEqual(ab, ba) {
		t.Errorf("merge depends on order")
	}
	one := ArchiveReport([]Summary{a}, DefaultPrices()).Figures
	if !reflect.DeepEqual(one, a.Figures) {
		t.Errorf("merge of one session differs:\n%+v\n%+v", one, a.Figures)
	}
	eq(t, "requests", ab.Requests.Total, a.Figures.Requests.Total+b.Figures.Requests.Total)
	near(t, "spend", ab.Spend.Total, a.Figures.Spend.Total+b.Figures.Spend.Total)
}

func TestJSONRoundTrip(t *testing.T) {
	s := Analyze(handSession(), DefaultPrices())
	for _, r := range []Report{SessionReport(s, DefaultPrices()), ArchiveReport([]Summary{s.Summary}, DefaultPrices())} {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("%s report changed in a JSON round trip", r.Scope)
		}
	}
	// The cached form: a Summary survives the cache unchanged.
	data, _ := json.Marshal(s.Summary)
	var sum Summary
	if err := json.Unmarshal(data, &sum); err != nil || !reflect.DeepEqual(sum, s.Summary) {
		t.Errorf("summary changed in a JSON round trip (%v)", err)
	}
	// Stable field names: the documented top-level and figure keys.
	var m map[string]json.RawMessage
	_ = json.Unmarshal(mustJSON(t, SessionReport(s, DefaultPrices())), &m)
	for _, k := range []string{"version", "scope", "session", "figures", "breaks", "breaksOmitted", "requests", "prices"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	var fig map[string]json.RawMessage
	_ = json.Unmarshal(m["figures"], &fig)
	for _, k := range []string{"sessions", "requests", "cycles", "thinking", "cache", "spend", "apart", "breaks", "bindery"} {
		if _, ok := fig[k]; !ok {
			t.Errorf("figures JSON lacks %q", k)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
