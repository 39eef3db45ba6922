package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/my-pi/bindery/daemon/report"
)

// TestPiFixtures checks bindery against real pi session files, the ones pi
// itself tests with. Fetched files are never committed here, so the test
// runs only when BINDERY_PI_FIXTURES names a folder of *.jsonl session
// files, e.g. pi's packages/coding-agent/test/fixtures/large-session.jsonl
// and before-compaction.jsonl from badlogic/pi-mono:
//
//	BINDERY_PI_FIXTURES=/tmp/pifix go test -run TestPiFixtures -count=1 -v ./cmd/bindery/
//
// Each file is copied into a fresh agent dir and read by a real `bindery
// serve`. The expected figures are computed here with plain encoding/json
// (piFigures), independently of the watcher and the report: entries,
// version, parent session (v1's branchedFrom), leaf (v1 ids synthesized as
// "v1:N"), thinking blocks signed and unsigned, requests, errored and
// aborted replies, usage totals and the sum of pi's cost.total, and each
// compaction's firstKeptEntryIndex resolved to the right line. Then every
// v1/v2 file is migrated in place the way pi does it (piMigrate: same inode,
// truncating write, every entry given an id) and must be read again as a
// rewrite with the same figures.
func TestPiFixtures(t *testing.T) {
	dir := os.Getenv("BINDERY_PI_FIXTURES")
	if dir == "" {
		t.Skip("set BINDERY_PI_FIXTURES to a folder of real pi session files (*.jsonl, e.g. pi-mono's " +
			"packages/coding-agent/test/fixtures) to check bindery against them")
	}
	checkPiFiles(t, dir)
}

// TestPiShapedFiles runs the same checks on hand-written files in pi's
// real shapes (testdata/pi): a v1 file with legacy header keys and
// branchedFrom, a malformed line before a compaction whose
// firstKeptEntryIndex counts parsed values rather than lines, a signed and
// an unsigned (aborted) thinking block, and an aborted reply with all-zero
// usage; a pi 1.6 file (usage entries, context edits, a persisted
// system message, usage with cacheWrite1h and reasoning, diagnostics); and
// one pi 1.6.0's own SessionManager wrote (appendUsage, appendContextEdit
// with a string, null and thinking-keeping replacement, a system message).
func TestPiShapedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	checkPiFiles(t, filepath.Join("testdata", "pi"))
}

func checkPiFiles(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("BINDERY_PI_FIXTURES=%s holds no *.jsonl files (%v)", dir, err)
	}
	e := newE2E(t)
	want := map[string]piFigures{}
	paths := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fig := computePiFigures(t, data)
		if _, dup := want[fig.ID]; dup {
			t.Fatalf("two fixtures share session id %s", fig.ID)
		}
		want[fig.ID] = fig
		paths[fig.ID] = filepath.Join(e.sessions, filepath.Base(f))
		if err := os.WriteFile(paths[fig.ID], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.serve()
	waitIngested := func(what string, version map[string]int) {
		waitFor(t, what, func() (bool, string) {
			m, err := e.sessionsJSON()
			if err != nil {
				return false, err.Error()
			}
			for id, w := range want {
				s, ok := m[id]
				if !ok || s.Entries != w.Entries || s.Version != version[id] {
					return false, fmt.Sprintf("%s: %+v", id, s)
				}
			}
			return true, ""
		})
	}
	versions := map[string]int{}
	for id, w := range want {
		versions[id] = w.Version
	}
	waitIngested("fixtures ingested", versions)

	before := map[string]report.Report{}
	m, err := e.sessionsJSON()
	if err != nil {
		t.Fatal(err)
	}
	for id, w := range want {
		s := m[id]
		t.Run(filepath.Base(paths[id]), func(t *testing.T) {
			t.Logf("%s: v%d, %d entries, %d requests (%d errored, %d aborted), %d thinking (%d signed), cost $%.2f",
				filepath.Base(paths[id]), w.Version, w.Entries, w.Requests, w.Errored, w.Aborted, w.Thinking, w.Signed, w.Cost)
			if s.Cwd != w.Cwd || s.ParentSession != w.Parent || s.ThinkingBlocks != w.Thinking {
				t.Errorf("sessions: cwd %q parent %q thinking %d; want %q %q %d", s.Cwd, s.ParentSession, s.ThinkingBlocks, w.Cwd, w.Parent, w.Thinking)
			}
			if w.Version == 1 && s.Leaf != fmt.Sprintf("v1:%d", w.Entries) {
				t.Errorf("v1 leaf %q, want v1:%d", s.Leaf, w.Entries)
			}
			if w.Version >= 2 && s.Leaf != w.LastID {
				t.Errorf("leaf %q, want %q", s.Leaf, w.LastID)
			}
			signed, unsigned := e.thinkingRows(paths[id])
			if signed != w.Signed || unsigned != w.Thinking-w.Signed {
				t.Errorf("thinking rows: %d signed, %d unsigned; want %d, %d", signed, unsigned, w.Signed, w.Thinking-w.Signed)
			}
			checkCompactions(t, e.compactionLines(paths[id]), w.Compactions)
			rep := reportJSON(t, e, "--session", id)
			checkPiReport(t, rep.Figures, w)
			before[id] = rep
		})
	}

	// One set of figures: the archive's total, the sum of its session
	// lines and each session's own report agree to the cent (errored and
	// aborted replies, cache warms and other usage are in all three).
	arch := reportJSON(t, e)
	var lines float64
	for _, l := range arch.Sessions {
		lines += l.Spend
		if own := before[l.Session].Figures.Total; own != l.Spend {
			t.Errorf("%s: its report's total %.4f, the archive's line %.4f", filepath.Base(paths[l.Session]), own, l.Spend)
		}
	}
	if math.Abs(lines-arch.Figures.Total) >= 0.005 {
		t.Errorf("archive total %.4f, its lines add up to %.4f", arch.Figures.Total, lines)
	}
	t.Logf("archive: total $%.2f = requests $%.2f + errored/aborted $%.2f + cache warm $%.2f + other $%.2f; lines add up to $%.2f",
		arch.Figures.Total, arch.Figures.Spend.Total, arch.Figures.Apart.Spend.Total, arch.Figures.Warm.Spend.Total, arch.Figures.OtherUsage.Spend.Total, lines)

	// The what-if replay of every file, through the daemon: the
	// as-recorded replay reproduces the cache tokens pi recorded (summed
	// here with encoding/json) within 5%, and reports its errors; a file
	// whose usage no prompt cache produces is flagged and not priced.
	wi := whatifJSON(t, e)
	for _, s := range wi.Sessions {
		w, c := want[s.Session], s.Calibration
		name := filepath.Base(paths[s.Session])
		t.Logf("%s: whatif calibration: cache read recorded %d, replayed %d (error %.3f%%); cache write recorded %d, replayed %d (error %.3f%%)",
			name, c.RecordedRead, c.ReplayedRead, 100*c.ReadError, c.RecordedWrite, c.ReplayedWrite, 100*c.WriteError)
		if c.RecordedRead != w.CacheRead || c.RecordedWrite != w.CacheWrite {
			t.Errorf("%s: whatif recorded read %d write %d; the file says %d, %d", name, c.RecordedRead, c.RecordedWrite, w.CacheRead, w.CacheWrite)
		}
		if syntheticUsage[name] {
			if c.OK || s.Policies[0].Spend != nil {
				t.Errorf("%s: usage no cache produces, yet calibrated or priced: %+v", name, c)
			}
			continue
		}
		if !c.OK {
			t.Errorf("%s: %s", name, c.Reason)
		}
	}
	if len(wi.Sessions) != len(want) {
		t.Errorf("whatif replayed %d sessions, want %d", len(wi.Sessions), len(want))
	}

	// pi migrates a v1/v2 file in place when it opens it: bindery must
	// notice the rewrite and end with the same figures.
	for id, w := range want {
		if w.Version >= 3 {
			continue
		}
		ino := inode(t, paths[id])
		piMigrate(t, paths[id])
		if inode(t, paths[id]) != ino {
			t.Fatal("the migration changed the inode")
		}
		versions[id] = 3
	}
	waitIngested("migrated fixtures read again", versions)
	for id, w := range want {
		if w.Version >= 3 {
			continue
		}
		t.Run(filepath.Base(paths[id])+"/migrated", func(t *testing.T) {
			got := reportJSON(t, e, "--session", id)
			a, b := mustMarshal(t, before[id].Figures), mustMarshal(t, got.Figures)
			if !bytes.Equal(a, b) {
				t.Errorf("figures changed by the migration:\nbefore %s\nafter  %s", a, b)
			}
			data, err := os.ReadFile(paths[id])
			if err != nil {
				t.Fatal(err)
			}
			// Lines pi dropped as malformed move the later ones up.
			checkCompactions(t, e.compactionLines(paths[id]), computePiFigures(t, data).Compactions)
		})
	}
}

// syntheticUsage names the testdata files whose usage pi's own
// SessionManager was handed made up (v3-pi16-session-manager.jsonl reads
// 2000 after a request that left 1300, then 3000 after an errored one that
// left 300): no prompt cache produces it, so the replay must say it is
// not calibrated.
var syntheticUsage = map[string]bool{"v3-pi16-session-manager.jsonl": true}

// piFigures is what a pi session file holds, computed with encoding/json.
type piFigures struct {
	ID, Cwd, Parent, LastID string
	Version, Entries        int
	Requests, Turns         int
	Errored, Aborted        int
	Thinking, Signed        int
	Input, Output           int64
	CacheRead, CacheWrite   int64
	Cost                    float64
	Usage                   int // pi 1.6 usage entries (cache warms): not requests
	// Compactions maps a compaction's line to the line of its first kept
	// entry (0 when it resolves to none).
	Compactions map[int]int
}

func computePiFigures(t *testing.T, data []byte) piFigures {
	t.Helper()
	type block struct {
		Type      string `json:"type"`
		Signature string `json:"thinkingSignature"`
	}
	type line struct {
		Type, ID, Cwd, ParentSession, BranchedFrom string
		Version                                    *int
		FirstKeptEntryIndex                        *int
		FirstKeptEntryID                           string
		Message                                    *struct {
			Role       string          `json:"role"`
			StopReason string          `json:"stopReason"`
			Content    json.RawMessage `json:"content"`
			Usage      *struct {
				Input, Output, CacheRead, CacheWrite int64
				Cost                                 *struct{ Total float64 }
			} `json:"usage"`
		} `json:"message"`
	}
	var f piFigures
	f.Compactions = map[int]int{}
	lineOfValue := map[int]int{} // pi's entry index (valid JSON values, header 0) -> line
	lineOfID := map[string]int{}
	type pending struct{ line, index int }
	var byIndex []pending
	var byID = map[int]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<26)
	values := 0
	for n := 1; sc.Scan(); n++ {
		var l line
		if !json.Valid(sc.Bytes()) {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			values++
			continue
		}
		lineOfValue[values] = n
		values++
		if values == 1 {
			f.ID, f.Cwd, f.Version = l.ID, l.Cwd, 1
			if l.Version != nil {
				f.Version = *l.Version
			}
			f.Parent = l.ParentSession
			if f.Parent == "" {
				f.Parent = l.BranchedFrom
			}
			continue
		}
		f.Entries++
		f.LastID = l.ID
		if l.ID != "" {
			lineOfID[l.ID] = n
		}
		if l.Type == "compaction" {
			if l.FirstKeptEntryIndex != nil {
				byIndex = append(byIndex, pending{n, *l.FirstKeptEntryIndex})
			} else {
				byID[n] = l.FirstKeptEntryID
			}
		}
		if l.Type == "usage" {
			f.Usage++
		}
		m := l.Message
		if l.Type != "message" || m == nil || m.Role != "assistant" {
			continue
		}
		f.Requests++
		switch m.StopReason {
		case "error":
			f.Errored++
		case "aborted":
			f.Aborted++
		default:
			f.Turns++
		}
		var blocks []block
		json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "thinking" {
				f.Thinking++
				if strings.TrimSpace(b.Signature) != "" {
					f.Signed++
				}
			}
		}
		if u := m.Usage; u != nil {
			f.Input += u.Input
			f.Output += u.Output
			f.CacheRead += u.CacheRead
			f.CacheWrite += u.CacheWrite
			if u.Cost != nil {
				f.Cost += u.Cost.Total
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, p := range byIndex {
		if p.index > 0 {
			f.Compactions[p.line] = lineOfValue[p.index]
		}
	}
	for n, id := range byID {
		f.Compactions[n] = lineOfID[id]
	}
	return f
}

func checkPiReport(t *testing.T, f report.Figures, w piFigures) {
	t.Helper()
	r := f.Requests
	if r.Total != w.Requests || r.Turns != w.Turns || r.Errored != w.Errored || r.Aborted != w.Aborted || r.OffBranch != 0 {
		t.Errorf("requests %+v; want %d total, %d turns, %d errored, %d aborted", r, w.Requests, w.Turns, w.Errored, w.Aborted)
	}
	// Completed replies and the apart ones add up to the file's usage.
	got := [4]int64{f.Cache.Input + f.Apart.Input, f.Cache.Output + f.Apart.Output, f.Cache.Read + f.Apart.Read, f.Cache.Write + f.Apart.Write}
	if want := [4]int64{w.Input, w.Output, w.CacheRead, w.CacheWrite}; got != want {
		t.Errorf("usage input/output/cacheRead/cacheWrite %v, want %v", got, want)
	}
	if cost := f.Spend.Total + f.Apart.Spend.Total; math.Abs(cost-w.Cost) > 1e-6 {
		t.Errorf("spend $%.6f, want pi's cost.total sum $%.6f", cost, w.Cost)
	}
	if f.Warm.Entries+f.OtherUsage.Entries != w.Usage {
		t.Errorf("usage entries %d + %d, want %d", f.Warm.Entries, f.OtherUsage.Entries, w.Usage)
	}
	if f.Apart.Requests != w.Errored+w.Aborted {
		t.Errorf("apart %d, want %d", f.Apart.Requests, w.Errored+w.Aborted)
	}
}

func checkCompactions(t *testing.T, got, want map[int]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("compactions %v, want %v (line -> first kept line)", got, want)
		return
	}
	for n, l := range want {
		if got[n] != l {
			t.Errorf("compaction at line %d keeps from line %d, want %d", n, got[n], l)
		}
	}
}

func (e *e2e) query(q string, args ...any) *sql.Rows {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.state, "bindery.db")+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	rows, err := db.Query(q, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

// thinkingRows counts the file's thinking rows with and without a signature.
func (e *e2e) thinkingRows(path string) (signed, unsigned int) {
	// A pi 1.6 context_edit's copy of a block is not a block of the session.
	rows := e.query(`SELECT t.signed, count(*) FROM thinking t JOIN files f ON f.id = t.file JOIN entries e ON e.seq = t.entry
		WHERE f.path = ? AND f.removed = 0 AND e.type = 'message' GROUP BY 1`, path)
	defer rows.Close()
	for rows.Next() {
		var s, n int
		rows.Scan(&s, &n)
		if s != 0 {
			signed = n
		} else {
			unsigned = n
		}
	}
	return signed, unsigned
}

// compactionLines maps each compaction's line to the line of the entry its
// firstKeptEntryId names (0 when none), as bindery stored them.
func (e *e2e) compactionLines(path string) map[int]int {
	rows := e.query(`SELECT e.line, coalesce((SELECT x.line FROM entries x WHERE x.file = e.file AND x.id = e.first_kept_entry_id), 0)
		FROM entries e JOIN files f ON f.id = e.file WHERE f.path = ? AND f.removed = 0 AND e.type = 'compaction'`, path)
	defer rows.Close()
	m := map[int]int{}
	for rows.Next() {
		var n, l int
		rows.Scan(&n, &l)
		m[n] = l
	}
	return m
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return inodeOf(fi)
}

var (
	versionKey   = regexp.MustCompile(`,"version":\d+`)
	keptIndexKey = regexp.MustCompile(`,?"firstKeptEntryIndex":\d+`)
)

// piMigrate rewrites a v1/v2 session file in place as pi 0.58 does on open
// (session-manager.ts migrateV1ToV2, migrateV2ToV3, _rewriteFile): malformed
// lines dropped, every v1 entry given an 8-hex id and the previous entry as
// parent, compaction.firstKeptEntryIndex turned into firstKeptEntryId,
// hookMessage renamed custom, the header set to version 3, and the whole
// file written over itself with one truncating write. The lines are edited
// as text so numbers keep pi's own formatting; new keys go last, where
// JavaScript's property order puts them.
func piMigrate(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v struct{ Type string }
		if json.Unmarshal([]byte(l), &v) != nil {
			continue
		}
		lines = append(lines, l)
		types = append(types, v.Type)
	}
	var h struct{ Version *int }
	json.Unmarshal([]byte(lines[0]), &h)
	v1 := h.Version == nil || *h.Version < 2
	ids := make([]string, len(lines))
	prev := "null"
	for i, l := range lines {
		if types[i] == "session" {
			lines[i] = versionKey.ReplaceAllString(l, "")
			lines[i] = strings.TrimSuffix(lines[i], "}") + `,"version":3}`
			continue
		}
		if v1 {
			ids[i] = fmt.Sprintf("%08x", uint32(0x9e3779b9*uint32(i+1)))
			l = strings.TrimSuffix(l, "}") + `,"id":"` + ids[i] + `","parentId":` + prev + `}`
			prev = strconv.Quote(ids[i])
			if types[i] == "compaction" {
				var c struct{ FirstKeptEntryIndex *int }
				json.Unmarshal([]byte(l), &c)
				if c.FirstKeptEntryIndex != nil {
					l = keptIndexKey.ReplaceAllString(l, "")
					if k := *c.FirstKeptEntryIndex; k > 0 && k < i && types[k] != "session" {
						l = strings.TrimSuffix(l, "}") + `,"firstKeptEntryId":"` + ids[k] + `"}`
					}
				}
			}
		}
		lines[i] = strings.Replace(l, `"role":"hookMessage"`, `"role":"custom"`, 1)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
