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
		t.Logf("%s: %d requests; read recorded %d replayed %d (error %.3f%%); write recorded %d replayed %d (error %.3f%%); ok %v",
			filepath.Base(f), w.Requests, c.RecordedRead, c.ReplayedRead, 100*c.ReadError, c.RecordedWrite, c.ReplayedWrite, 100*c.WriteError, c.OK)
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
