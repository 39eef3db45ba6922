package report

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// parseGenerated parses a generated session file as the watcher does.
func parseGenerated(s *pisessiontest.Session) []watcher.Entry {
	p := watcher.NewParser("gen.jsonl")
	var out []watcher.Entry
	for i := range s.Offsets {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		if e := p.Line(s.Data[s.Offsets[i]:end], int64(s.Offsets[i])).Entry; e != nil {
			out = append(out, *e)
		}
	}
	return out
}

// genCompiles makes compile events for some of a session's replies, linked
// the two ways bindery links them (by entry, by the branch they were built
// on), with every cache cause and some strips.
func genCompiles(rng *rand.Rand, entries []watcher.Entry) []CompileEvent {
	var out []CompileEvent
	causes := []string{"strip", "host", "bindery", "none", ""}
	for i := range entries {
		e := &entries[i]
		if e.Role != "assistant" || rng.IntN(3) != 0 {
			continue
		}
		c := CompileEvent{Seq: int64(len(out) + 1), CacheCause: causes[rng.IntN(len(causes))]}
		if rng.IntN(2) == 0 {
			c.EntryID = e.ID
		} else {
			c.Parent = e.ParentID
		}
		for range rng.IntN(3) {
			reason := []string{"prefix-changed", "no-stamp", "gap", "released"}[rng.IntN(4)]
			c.Strips = append(c.Strips, Strip{Reason: reason, Tokens: int64(rng.IntN(500)), WouldRefuse: WouldRefuse(reason)})
		}
		out = append(out, c)
	}
	return out
}

func summaryJSON(t *testing.T, s Summary) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stored is an aggregate as the database holds it: built ones replace it,
// extended ones replace sums and walk and add their new breaks.
type stored struct {
	sums, walk []byte
	breaks     [][]byte
}

func store(t *testing.T, a *Aggregate, into *stored, built bool) {
	t.Helper()
	sums, walk, breaks, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if built {
		into.breaks = nil
	}
	into.sums, into.walk, into.breaks = sums, walk, append(into.breaks, breaks...)
}

// forExtend loads it as ingest does (no breaks); forSummary as a report
// does (no walk).
func (s *stored) forExtend(t *testing.T) *Aggregate {
	t.Helper()
	a, err := DecodeAggregate(s.sums, s.walk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (s *stored) forSummary(t *testing.T) *Aggregate {
	t.Helper()
	a, err := DecodeAggregate(s.sums, nil, s.breaks)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// roundTrip stores and loads an aggregate the way the database holds it.
func roundTrip(t *testing.T, a *Aggregate) *Aggregate {
	t.Helper()
	var s stored
	store(t, a, &s, true)
	b, err := DecodeAggregate(s.sums, s.walk, s.breaks)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An aggregate built at once, or built on a prefix of the file and
// extended by the rest (through its stored form), gives exactly the
// summary Analyze computes from all the entries, with any compile events:
// on pi-shaped sessions with compactions, branches, custom entries, pi
// 1.6's entries and v1 files.
func TestAggregateMatchesAnalyze(t *testing.T) {
	prices := DefaultPrices()
	extended, refused := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		o := pisessiontest.Options{Seed: seed, Turns: 4 + int(seed%9)}
		switch seed % 4 {
		case 1:
			o.Pi16 = true
		case 2:
			o.Plain = true
		case 3:
			o.Version = 1
		}
		s := pisessiontest.Generate(o)
		entries := parseGenerated(s)
		rng := rand.New(rand.NewPCG(seed, 7))
		compiles := genCompiles(rng, entries)
		id := fmt.Sprint("s", seed)
		want := summaryJSON(t, Analyze(SessionInput{Session: id, Entries: entries, Compiles: compiles}, prices).Summary)
		if got := summaryJSON(t, roundTrip(t, BuildAggregate(entries, prices)).Summary(id, compiles)); got != want {
			t.Fatalf("seed %d: built at once:\n got %s\nwant %s", seed, got, want)
		}
		for _, cut := range []int{0, 1, 2, len(entries) / 3, len(entries) / 2, len(entries) - 1} {
			var st stored
			store(t, BuildAggregate(entries[:cut], prices), &st, true)
			// Appended in a few batches, as the watcher hands them over.
			ok := true
			for at := cut; at < len(entries) && ok; {
				end := min(len(entries), at+1+rng.IntN(7))
				a := st.forExtend(t)
				if ok = a.Extend(entries[at:end], prices); ok {
					store(t, a, &st, false)
				}
				at = end
			}
			if !ok {
				refused++
				continue // the caller rebuilds: the branch moved
			}
			extended++
			if got := summaryJSON(t, st.forSummary(t).Summary(id, compiles)); got != want {
				t.Fatalf("seed %d, built on %d entries and extended: \n got %s\nwant %s", seed, cut, got, want)
			}
		}
	}
	t.Logf("extended %d, refused %d", extended, refused)
	// Plain and most other sessions extend; branches refuse.
	if extended < 100 || refused == 0 {
		t.Errorf("extended %d, refused %d: the test does not cover both", extended, refused)
	}
}

// Extend refuses what would move the branch, and an aggregate priced with
// another table.
func TestAggregateExtendRefuses(t *testing.T) {
	var b builder
	b.user("u1", "-")
	b.assistant("a1", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 1, out: 1, cr: 0, cw: 100, ts: "2026-11-01T10:00:00Z"})
	b.user("u2", "")
	base := b.entries
	prices := DefaultPrices()
	for name, e := range map[string]watcher.Entry{
		"a reply to an older entry": {ID: "x", ParentID: "a1", Type: "message", Role: "user", UserText: true},
		"a new root":                {ID: "x", Type: "message", Role: "user", UserText: true},
		"an id the branch holds":    {ID: "a1", ParentID: "u2", Type: "message", Role: "user", UserText: true},
		"an entry without an id":    {ParentID: "u2", Type: "message", Role: "user", UserText: true},
	} {
		a := BuildAggregate(base, prices)
		if a.Extend([]watcher.Entry{e}, prices) {
			t.Errorf("%s: extended", name)
		}
	}
	// A root whose parent is not in the file: an entry taking that id
	// gives the root a parent.
	orphan := append([]watcher.Entry(nil), base...)
	orphan[0].ParentID = "ghost"
	if a := BuildAggregate(orphan, prices); a.Extend([]watcher.Entry{{ID: "ghost", ParentID: "u2", Type: "message"}}, prices) {
		t.Error("the root's missing parent: extended")
	}
	// A v1 file (no parentId) turning into a tree.
	linear := append([]watcher.Entry(nil), base...)
	for i := range linear {
		linear[i].ParentID = ""
	}
	if a := BuildAggregate(linear, prices); a.Extend([]watcher.Entry{{ID: "x", ParentID: "u2", Type: "message"}}, prices) {
		t.Error("a linear file turning into a tree: extended")
	}
	a := BuildAggregate(base, prices)
	if !a.Extend([]watcher.Entry{{ID: "a2", ParentID: "u2", Type: "message", Role: "assistant", Model: "claude-sonnet-4-5"}}, prices) {
		t.Fatal("a reply to the leaf was refused")
	}
	// a1's usage has no cost: the table priced it.
	if a.Sums.Prices != prices.Fingerprint() {
		t.Fatalf("prices %q, want the table's fingerprint", a.Sums.Prices)
	}
	other, err := ParsePrices([]byte(`{"claude-sonnet-4-5": {"input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Extend([]watcher.Entry{{ID: "u3", ParentID: "a2", Type: "message", Role: "user", UserText: true}}, other) {
		t.Error("extended under another price table")
	}
	// An aggregate that never consulted the table holds under any.
	var c builder
	c.user("u1", "-")
	c.assistant("a1", "", asst{model: "claude-sonnet-4-5", stop: "stop", in: 1, out: 1, cr: 0, cw: 100,
		cost: &watcher.Cost{Input: f64(1), Output: f64(1), CacheRead: f64(0), CacheWrite: f64(1)}})
	pa := BuildAggregate(c.entries, prices)
	if pa.Sums.Prices != "" || !pa.Extend([]watcher.Entry{{ID: "u2", ParentID: "a1", Type: "message", Role: "user", UserText: true}}, other) {
		t.Errorf("an aggregate priced by pi alone: prices %q, or refused under another table", pa.Sums.Prices)
	}
}

// The stored form is compact enough to rewrite per batch: the walk holds
// ids, not entries.
func TestAggregateEncode(t *testing.T) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 3, Turns: 30})
	entries := parseGenerated(s)
	sums, walk, _, err := BuildAggregate(entries, DefaultPrices()).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(walk) > 80*len(entries) || len(sums) > 8<<10 {
		t.Errorf("walk %d bytes, sums %d bytes for %d entries", len(walk), len(sums), len(entries))
	}
	if _, err := DecodeAggregate([]byte(`{"version": 1`), walk, nil); err == nil {
		t.Error("a damaged aggregate decoded")
	}
	for _, bad := range []string{"", `{"len":1}`, "{}\n", "{}\n9\nab", "{}\n-1\n"} {
		if _, err := DecodeAggregate(sums, []byte(bad), nil); err == nil {
			t.Errorf("a damaged walk %q decoded", bad)
		}
	}
}

// Ids are kept one per line of the walk's path: one holding a newline or
// a backslash is escaped, found again, and resolved by a compaction.
func TestAggregatePathEscapes(t *testing.T) {
	for _, id := range []string{"plain", "a\nb", `c\d`, `e\nf`, "\\\n", ""} {
		if got := unescapeID([]byte(escapeID(id))); got != id {
			t.Errorf("%q: round trip gave %q", id, got)
		}
	}
	var b builder
	m := "claude-sonnet-4-5"
	b.user("u\n1", "-")
	b.assistant(`a\1`, "", asst{model: m, stop: "stop", in: 1, out: 1, cr: 0, cw: 100, think: []int{400}, ts: "2026-11-01T10:00:00Z"})
	b.user("u\\n2", "")
	b.assistant("a\n2", "", asst{model: m, stop: "stop", in: 1, out: 1, cr: 100, cw: 100, think: []int{400}, ts: "2026-11-01T10:00:10Z"})
	b.add(watcher.Entry{ID: "c1", Type: "compaction", FirstKeptEntryID: "u\\n2"}, "")
	b.user("u3", "")
	b.assistant("a3", "", asst{model: m, stop: "stop", in: 1, out: 1, cr: 0, cw: 300, ts: "2026-11-01T10:00:20Z"})
	prices := DefaultPrices()
	want := summaryJSON(t, Analyze(SessionInput{Session: "s", Entries: b.entries}, prices).Summary)
	a := roundTrip(t, BuildAggregate(b.entries[:4], prices))
	if a.Extend([]watcher.Entry{{ID: `a\1`, ParentID: "a\n2", Type: "message"}}, prices) {
		t.Error("an escaped id already on the branch extended it")
	}
	a = roundTrip(t, BuildAggregate(b.entries[:4], prices))
	if !a.Extend(b.entries[4:], prices) {
		t.Fatal("refused")
	}
	if got := summaryJSON(t, a.Summary("s", nil)); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
