package report

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/my-pi/bindery/watcher"
)

// TestBreakRuleRealCases hand-checks the break rule on the two rewrites
// the old rule missed, with the numbers of pi's own fixture sessions
// (pi-mono packages/coding-agent/test/fixtures), and on ordinary turns
// around them, which are never breaks.
func TestBreakRuleRealCases(t *testing.T) {
	// before-compaction.jsonl, its last two requests: a cold write of
	// 167,753 tokens, a user message 148 s later, and another cold write
	// of 167,978: it read 0 of the 167,753 the request before left.
	var b builder
	m := "claude-opus-4-5"
	b.user("u1", "-")
	b.assistant("r482", "", asst{model: m, stop: "stop", in: 1, cr: 167000, cw: 579, ts: "2025-12-09T00:10:01.000Z"})
	b.user("u2", "")
	b.assistant("r483", "", asst{model: m, stop: "stop", in: 10, cr: 0, cw: 167753, ts: "2025-12-09T00:10:31.000Z"})
	b.user("u3", "")
	b.assistant("r484", "", asst{model: m, stop: "stop", in: 10, cr: 0, cw: 167978, ts: "2025-12-09T00:12:59.000Z"})
	b.user("u4", "")
	b.assistant("r485", "", asst{model: m, stop: "stop", in: 10, cr: 167978, cw: 300, ts: "2025-12-09T00:13:30.000Z"}) // ordinary
	s := Analyze(SessionInput{Session: "bc", Entries: b.entries}, DefaultPrices())
	got := breakList(s)
	// r483: left 167000+579 = 167579, reusable min(167579, 167763), read
	// 0: 167579 rewritten (of its 167753 written). r484: left 0+167753,
	// reusable min(167753, 167988) = 167753, read 0: min(167978, 167753).
	want := []string{"r483:unknown:167579", "r484:unknown:167753"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("before-compaction's end: breaks %v, want %v", got, want)
	}

	// large-session.jsonl, requests 199 to 202: request 201 (an aborted
	// reply that still read and wrote) rewrote 106,792 tokens from cold
	// while its prompt shrank slightly (107,239 to 106,795), with no
	// compaction in between: it read 0 of the 107,234 left, reusable
	// min(107234, 106795) = 106795, all of its write.
	b = builder{}
	m = "claude-sonnet-4-5"
	b.user("u1", "-")
	b.assistant("r199", "", asst{model: m, stop: "toolUse", in: 5, cr: 106879, cw: 236, ts: "2025-11-21T00:48:25.152Z"})
	b.toolResult("t199")
	b.assistant("r200", "", asst{model: m, stop: "stop", in: 5, cr: 107115, cw: 119, ts: "2025-11-21T00:48:31.632Z"}) // ordinary
	b.user("u2", "")
	b.assistant("r201", "", asst{model: m, stop: "aborted", in: 3, cr: 0, cw: 106792, ts: "2025-11-21T00:52:19.488Z"})
	b.user("u3", "")
	b.assistant("r202", "", asst{model: m, stop: "stop", in: 3, cr: 106792, cw: 500, ts: "2025-11-21T00:52:40.000Z"}) // ordinary
	s = Analyze(SessionInput{Session: "ls", Entries: b.entries}, DefaultPrices())
	if got, want := breakList(s), []string{"r201:unknown:106792"}; !reflect.DeepEqual(got, want) {
		t.Errorf("large-session 199-202: breaks %v, want %v", got, want)
	}
	// The aborted reply's rewrite is counted apart in spend, but it is a
	// break all the same: it paid the write.
	eq(t, "errored apart", s.Summary.Figures.Apart.Requests, 1)
	near(t, "avoidable", s.Summary.Figures.Breaks.Avoidable, 106792*(3.75-0.30)/1e6)
}

// TestBreakCausesByEntry: every cause the rule gives, each from what the
// session file holds between the two requests, and the cache lifetime
// the usage shows (1 hour after 1-hour writes).
func TestBreakCausesByEntry(t *testing.T) {
	var b builder
	m := "claude-opus-5-5"
	b.user("u", "-")
	n := 0
	var prompt int64 = 10000
	turn := func(ts string, cold bool, w1h int64) {
		n++
		prompt += 500
		a := asst{model: m, stop: "stop", in: 1, cr: prompt - 501, cw: 500, ts: "2026-12-01T" + ts + "Z"}
		if cold {
			a.cr, a.cw = 0, prompt-1
		}
		b.assistant(fmt.Sprintf("r%d", n), "", a)
		b.entries[len(b.entries)-1].Usage.CacheWrite1h = i64(w1h)
		b.user(fmt.Sprintf("u%d", n), "")
	}
	turn("10:00:00", true, 0)
	turn("10:00:30", false, 0)
	b.add(watcher.Entry{ID: "bs", Type: "branch_summary", UserText: true}, "")
	turn("10:01:00", true, 0) // r3: compaction (a branch summary)
	b.add(watcher.Entry{ID: "mc", Type: "model_change", ModelID: m}, "")
	turn("10:01:30", true, 0) // r4: model
	turn("10:08:00", true, 0) // r5: idle (6.5 minutes)
	turn("10:08:30", false, 3000)
	turn("10:20:00", true, 0) // r7: 11.5 minutes after 1-hour writes: unknown
	turn("10:20:30", false, 0)
	turn("10:26:00", false, 0) // r9: 5.5 minutes, read all: no break
	s := Analyze(SessionInput{Session: "c", Entries: b.entries}, nil)
	want := []string{"r3:compaction", "r4:model", "r5:idle", "r7:unknown"}
	var got []string
	for _, br := range s.Summary.Breaks {
		got = append(got, br.EntryID+":"+br.Cause)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("breaks %v, want %v", got, want)
	}
}

func breakList(s Session) []string {
	var out []string
	for _, br := range s.Summary.Breaks {
		out = append(out, fmt.Sprintf("%s:%s:%d", br.EntryID, br.Cause, br.Rewritten))
	}
	return out
}

// TestBreakRuleOnPiFixtures checks the rule against every request of pi's
// real fixture sessions (BINDERY_PI_FIXTURES): a request is a break
// exactly when it read less than the request before left (up to its
// prompt), so no ordinary appended turn is one, and each break's
// rewritten tokens are what it wrote again. The breaks by cause are
// logged.
func TestBreakRuleOnPiFixtures(t *testing.T) {
	files := fixtureFiles(t)
	if files == nil {
		t.Skip("set BINDERY_PI_FIXTURES to a folder of pi's real session files to check the break rule on them")
	}
	for _, f := range files {
		s := Analyze(parseFile(t, f), DefaultPrices())
		breaks := map[int]Break{}
		for _, br := range s.Summary.Breaks {
			breaks[br.Request] = br
		}
		var prev *Request
		appended := 0
		for i := range s.Requests {
			q := &s.Requests[i]
			if !q.UsageKnown || q.Prompt == 0 {
				continue
			}
			if prev != nil {
				left := prev.CacheRead + prev.CacheWrite
				reusable := min(left, q.Prompt)
				br, isBreak := breaks[q.N]
				if (q.CacheRead < reusable) != isBreak {
					t.Errorf("%s request %d: read %d, left %d, prompt %d; break %v", filepath.Base(f), q.N, q.CacheRead, left, q.Prompt, isBreak)
				}
				if isBreak && br.Rewritten != min(q.CacheWrite, reusable-q.CacheRead) {
					t.Errorf("%s request %d: rewritten %d", filepath.Base(f), q.N, br.Rewritten)
				}
				if q.CacheRead == left && isBreak {
					t.Errorf("%s request %d: an appended turn taken as a break", filepath.Base(f), q.N)
				}
				if q.CacheRead >= left {
					appended++
				}
			}
			prev = q
		}
		bt := s.Summary.Figures.Breaks
		t.Logf("%s: %d requests, %d read all the request before left, %d breaks: %v; avoidable $%.2f of $%.2f",
			filepath.Base(f), len(s.Requests), appended, bt.Count, bt.ByCause, bt.Avoidable, s.Summary.Figures.Total)
	}
}
