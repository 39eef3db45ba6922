package report

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher"
)

// parseFile reads a pi session file the way the watcher ingests it.
func parseFile(t *testing.T, path string) SessionInput {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := watcher.NewParser(path)
	var in SessionInput
	var off int64
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			res := p.Line(line, off)
			off += int64(len(line))
			if res.Header != nil {
				in.Session = res.Header.ID
			}
			if res.Entry != nil {
				in.Entries = append(in.Entries, *res.Entry)
			}
		}
		if err != nil {
			break
		}
	}
	return in
}

// fixtureFiles are pi's real session files when BINDERY_PI_FIXTURES names
// a folder of them (pi-mono's packages/coding-agent/test/fixtures:
// large-session.jsonl, before-compaction.jsonl), else nil.
func fixtureFiles(t *testing.T) []string {
	dir := os.Getenv("BINDERY_PI_FIXTURES")
	if dir == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("BINDERY_PI_FIXTURES=%s holds no *.jsonl files", dir)
	}
	return files
}

// TestReplayCalibration: on pi's real fixture sessions the as-recorded
// replay reproduces the cache read and write tokens pi recorded, per
// session, within api.CalibrationTolerance, and the errors are logged.
func TestReplayCalibration(t *testing.T) {
	files := fixtureFiles(t)
	if files == nil {
		t.Skip("set BINDERY_PI_FIXTURES to a folder of pi's real session files to calibrate the replay on them")
	}
	for _, f := range files {
		in := parseFile(t, f)
		w := Replay(in, DefaultPrices(), api.DefaultKeepLast)
		c := w.Calibration
		t.Logf("%s: %d requests; read recorded %d replayed %d (error %.3f%%); write recorded %d replayed %d (error %.3f%%); ok %v; %d losses taken as recorded, %d expiries predicted",
			filepath.Base(f), w.Requests, c.RecordedRead, c.ReplayedRead, 100*c.ReadError, c.RecordedWrite, c.ReplayedWrite, 100*c.WriteError, c.OK, c.AsRecorded, c.Expired)
		for _, p := range w.Policies {
			sp := "unpriced"
			if p.Spend != nil {
				sp = fmt.Sprintf("$%.2f", *p.Spend)
			}
			t.Logf("  %-14s read %d write %d thinking read %d blocks (%d tok) breaks %d spend %s", p.Policy, p.CacheRead, p.CacheWrite, p.ThinkingRead, p.ThinkingTokens, p.Breaks, sp)
		}
		if !c.OK {
			t.Errorf("%s: %s", filepath.Base(f), c.Reason)
		}
	}
}

// TestReplayHandChecked: a small keep-all session (Opus 4.5: closed-cycle
// thinking kept and billed) replayed by hand. Requests r1..r3 are one tool
// loop, r4 follows a user message; r1 and r2 each produced a 100-token
// thinking block, which sits where the next message begins: b1 at 10001
// (r1's prompt), b2 at 10601.
//
//	       recorded (read, write)  strip-all        keep-last-1
//	r1     0, 10000                0, 10000         0, 10000
//	r2     10000, 600              10000, 600       10000, 600
//	r3     10600, 600              10600, 600       b1 dropped at 10001: reads r1's 10000;
//	                                                prompt 11200-100: write 1100
//	r4     11200, 300              b1, b2 dropped:  b2 dropped at 10601 (10501 without b1):
//	                               reads 10000,     reads r1's 10000; prompt 11500-200:
//	                               writes 11300-10000 write 1300
//
// Thinking the model reads (blocks per request): recorded 0+1+2+2 = 5,
// strip-all 0+1+2+0 = 3, keep-last-1 0+1+1+0 = 2.
func TestReplayHandChecked(t *testing.T) {
	var b builder
	m := "claude-opus-4-5"
	price := func(in, out, cr, cw int64) *watcher.Cost {
		return &watcher.Cost{Input: f64(float64(in) * 5e-6), Output: f64(float64(out) * 25e-6), CacheRead: f64(float64(cr) * 0.5e-6),
			CacheWrite: f64(float64(cw) * 6.25e-6)}
	}
	req := func(id, ts, stop string, cr, cw int64, think []int) {
		b.assistant(id, "", asst{model: m, stop: stop, in: 1, out: 100, cr: cr, cw: cw, think: think, ts: "2026-12-01T10:00:" + ts + "Z", cost: price(1, 100, cr, cw)})
	}
	b.user("u1", "-")
	req("r1", "00", "toolUse", 0, 10000, []int{400})
	b.toolResult("t1")
	req("r2", "10", "toolUse", 10000, 600, []int{400})
	b.toolResult("t2")
	req("r3", "20", "stop", 10600, 600, nil)
	b.user("u2", "")
	req("r4", "30", "stop", 11200, 300, nil)
	w := Replay(SessionInput{Session: "h", Entries: b.entries}, DefaultPrices(), 1)
	type fig struct {
		read, write    int64
		thinking, brks int
	}
	want := map[string]fig{
		"as-recorded": {31800, 11500, 5, 0},
		"bindery":     {31800, 11500, 5, 0},
		"strip-all":   {30600, 12500, 3, 1},
		"keep-last-1": {30000, 13000, 2, 2},
	}
	if len(w.Policies) != 4 {
		t.Fatalf("policies %+v", w.Policies)
	}
	for _, p := range w.Policies {
		got := fig{p.CacheRead, p.CacheWrite, p.ThinkingRead, p.Breaks}
		if got != want[p.Policy] {
			t.Errorf("%s: %+v, want %+v", p.Policy, got, want[p.Policy])
		}
	}
	c := w.Calibration
	if !c.OK || c.ReadError != 0 || c.WriteError != 0 || c.RecordedRead != 31800 || c.RecordedWrite != 11500 || c.AsRecorded != 0 || c.Expired != 0 {
		t.Errorf("calibration %+v", c)
	}
	// Priced at the session's own rates: input 4 x $5, output 400 x $25,
	// then write and read per Mtok at $6.25 and $0.50.
	spend := func(read, write int64) float64 { return (4*5 + 400*25 + float64(write)*6.25 + float64(read)*0.5) / 1e6 }
	near(t, "as-recorded spend", *w.Policies[0].Spend, spend(31800, 11500))
	near(t, "strip-all spend", *w.Policies[2].Spend, spend(30600, 12500))
	near(t, "strip-all delta", *w.Policies[2].Delta.Spend, spend(30600, 12500)-spend(31800, 11500))
	eq(t, "keep-last-1 write delta", w.Policies[3].Delta.CacheWrite, int64(1500))

	// The same session with r4's read falling for no reason the replay
	// knows (not idle: 10 s): taken as recorded under every policy, and
	// the replay still matches.
	b.entries[len(b.entries)-1].Usage.CacheRead, b.entries[len(b.entries)-1].Usage.CacheWrite = i64(0), i64(11500)
	w = Replay(SessionInput{Session: "h", Entries: b.entries}, DefaultPrices(), 1)
	if c := w.Calibration; !c.OK || c.ReadError != 0 || c.WriteError != 0 || c.AsRecorded != 1 || c.Expired != 0 {
		t.Errorf("with an unexplained loss: %+v", c)
	}
	// A session whose recorded reads no cache explains: r3 read 10600
	// after 20 minutes (the replay predicts the cache expired).
	b.entries[5].Timestamp = "2026-12-01T10:20:20Z"
	b.entries[len(b.entries)-1].Timestamp = "2026-12-01T10:20:30Z"
	w = Replay(SessionInput{Session: "h", Entries: b.entries}, DefaultPrices(), 1)
	if c := w.Calibration; c.OK || c.Reason == "" || c.Expired != 1 || w.Policies[0].Spend != nil || w.Policies[2].Spend != nil {
		t.Errorf("uncalibrated session priced or not flagged: %+v %v", c, w.Policies[0].Spend)
	}
}

// BenchmarkReplay: a replay of a long session (2,000 requests, a thinking
// block on each) against Analyze of the same session, the simplest pass
// over it, as the baseline: go test -bench Replay -run X ./daemon/report.
func BenchmarkReplay(b *testing.B) {
	lens := make([]int, 100)
	for i := range lens {
		lens[i] = 20
	}
	in := genSession("bench", "claude-opus-4-5", lens, 400, map[int]bool{500: true, 1500: true}, true)
	b.Run("analyze", func(b *testing.B) {
		for b.Loop() {
			Analyze(in, DefaultPrices())
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			Replay(in, DefaultPrices(), api.DefaultKeepLast)
		}
	})
}

// TestReplayBindingModels: thinking kept across a compaction is read on a
// model without the prefix check, and dropped (as recorded: pi sends
// drop_block) or stripped (bindery) on one that runs it: the two policies
// cost the same, and the model reads no kept block either way.
func TestReplayBindingModels(t *testing.T) {
	session := func(m string) SessionInput {
		var b builder
		b.user("u1", "-")
		b.assistant("r1", "", asst{model: m, stop: "toolUse", in: 1, cr: 0, cw: 10000, think: []int{400}, ts: "2026-12-01T10:00:00Z"})
		b.toolResult("t1")
		b.assistant("r2", "", asst{model: m, stop: "stop", in: 1, cr: 10000, cw: 600, think: []int{400}, ts: "2026-12-01T10:00:10Z"})
		b.user("u2", "")
		b.add(watcher.Entry{ID: "k", Type: "compaction", FirstKeptEntryID: "r2"}, "")
		b.user("u3", "")
		b.assistant("r3", "", asst{model: m, stop: "stop", in: 1, cr: 0, cw: 3000, ts: "2026-12-01T10:00:20Z"})
		b.user("u4", "")
		b.assistant("r4", "", asst{model: m, stop: "stop", in: 1, cr: 3000, cw: 200, ts: "2026-12-01T10:00:30Z"})
		return SessionInput{Session: "k", Entries: b.entries}
	}
	// Opus 4.5 (keep-all, no prefix check): r2 reads b1; r3 and r4 read
	// b2, kept across the compaction (b1 was before firstKept): 1+0+1+1.
	w := Replay(session("claude-opus-4-5"), DefaultPrices(), 16)
	eq(t, "opus 4.5 thinking read", w.Policies[0].ThinkingRead, 3)
	eq(t, "opus 4.5 bindery", w.Policies[1].ThinkingRead, 3)
	// Opus 5.5 runs the check: b2's prefix changed with the compaction,
	// so r3 and r4 read nothing of it under either policy.
	w = Replay(session("claude-opus-5-5"), DefaultPrices(), 16)
	rec, bdy := w.Policies[0], w.Policies[1]
	eq(t, "opus 5.5 thinking read", rec.ThinkingRead, 1)
	if bdy.ThinkingRead != rec.ThinkingRead || bdy.CacheRead != rec.CacheRead || bdy.CacheWrite != rec.CacheWrite {
		t.Errorf("bindery %+v differs from as-recorded %+v", bdy, rec)
	}
	if !w.Calibration.OK {
		t.Errorf("calibration %+v", w.Calibration)
	}
}
