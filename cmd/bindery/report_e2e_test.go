package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// branchTotals computes, independently of bindery, what a session file's
// current branch holds: the turns (assistant messages neither errored nor
// aborted) and their summed cacheRead, walking parentId from the last line.
func branchTotals(t *testing.T, data []byte) (turns int, cacheRead int64) {
	t.Helper()
	type line struct {
		ID       string `json:"id"`
		ParentID string `json:"parentId"`
		Type     string `json:"type"`
		Message  struct {
			Role       string `json:"role"`
			StopReason string `json:"stopReason"`
			Usage      struct {
				CacheRead int64 `json:"cacheRead"`
			} `json:"usage"`
		} `json:"message"`
	}
	byID := map[string]line{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<26)
	for n := 0; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || n == 0 {
			continue
		}
		byID[l.ID] = l
		last = l.ID
	}
	for id, seen := last, map[string]bool{}; id != "" && !seen[id]; id = byID[id].ParentID {
		seen[id] = true
		l, ok := byID[id]
		if !ok {
			break
		}
		m := l.Message
		if l.Type == "message" && m.Role == "assistant" && m.StopReason != "error" && m.StopReason != "aborted" {
			turns++
			cacheRead += m.Usage.CacheRead
		}
	}
	return turns, cacheRead
}

// svgPoints counts the points of each series in an SVG chart.
func svgPoints(t *testing.T, data []byte) map[string]int {
	t.Helper()
	out := map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	group := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("chart does not parse: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			for _, a := range el.Attr {
				if el.Name.Local == "g" && a.Name.Local == "id" {
					group = a.Value
				}
				if el.Name.Local == "polyline" && a.Name.Local == "points" {
					out[group] = len(strings.Fields(a.Value))
				}
			}
		}
	}
}

func TestReportEndToEnd(t *testing.T) {
	e := newE2E(t)
	var sessions []*pisessiontest.Session
	wantTurns, wantRead := 0, int64(0)
	wantEntries := 0
	write := func(i int) {
		start := time.Date(2026, 10, 1, i, 0, 0, 0, time.UTC)
		s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(100 + i), Turns: 5 + i})
		if err := s.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(start, s.ID))); err != nil {
			t.Fatal(err)
		}
		turns, read := branchTotals(t, s.Data)
		wantTurns += turns
		wantRead += read
		wantEntries += len(s.Lines) - 1
		sessions = append(sessions, s)
	}
	for i := range 4 {
		write(i)
	}
	e.serve()
	ingested := func(n int) func() (bool, string) {
		return func() (bool, string) {
			m, err := e.sessionsJSON()
			if err != nil {
				return false, err.Error()
			}
			got := 0
			for _, s := range m {
				got += s.Entries
			}
			return len(m) == n && got == wantEntries, fmt.Sprintf("%d sessions, %d of %d entries", len(m), got, wantEntries)
		}
	}
	waitFor(t, "4 sessions ingested", ingested(4))

	out, serr, code := e.run("report")
	if code != 0 || !strings.Contains(out, "archive of 4 sessions") || !strings.Contains(out, "cache breaks") && !strings.Contains(out, "breaks ") {
		t.Fatalf("report: exit %d\n%s%s", code, out, serr)
	}
	rep := reportJSON(t, e)
	f := rep.Figures
	if f.Sessions != 4 || f.Requests.Turns != wantTurns || f.Cache.Read != wantRead {
		t.Errorf("archive: %d sessions, %d turns, %d read; want 4, %d, %d", f.Sessions, f.Requests.Turns, f.Cache.Read, wantTurns, wantRead)
	}
	// pi wrote every cost: all of it is pi's, split.
	if f.Spend.FromPi != wantTurns || f.Spend.Unpriced != 0 || f.Spend.Unsplit != 0 || f.Spend.Total <= 0 {
		t.Errorf("spend: %+v", f.Spend)
	}

	// One set of figures: the archive's total is the sum of its session
	// lines, and each session's own report shows its line's spend.
	var sum float64
	for _, l := range rep.Sessions {
		sum += l.Spend
		own := reportJSON(t, e, "--session", l.Session)
		if own.Figures.Total != l.Spend || own.Figures.Breaks.Avoidable != l.Avoidable {
			t.Errorf("session %s: its report says %v (avoidable %v), the archive's line %v (%v)", l.Session, own.Figures.Total, own.Figures.Breaks.Avoidable, l.Spend, l.Avoidable)
		}
	}
	if len(rep.Sessions) != 4 || math.Abs(sum-f.Total) >= 0.005 || f.Total != f.Spend.Total+f.Apart.Spend.Total+f.Warm.Spend.Total+f.OtherUsage.Spend.Total {
		t.Errorf("archive total %v, its %d session lines add up to %v", f.Total, len(rep.Sessions), sum)
	}
	if !strings.Contains(out, "spend     "+fmt.Sprintf("$%.2f", f.Total)+" total") {
		t.Errorf("the report text does not lead with the total %.2f:\n%s", f.Total, out)
	}

	// whatif over the daemon: the generated sessions' usage is random
	// (each request's cacheRead drawn apart from the one before), which
	// no prompt cache produces: the replay cannot reproduce it, so every
	// one is shown uncalibrated and nothing is priced.
	w := whatifJSON(t, e)
	if len(w.Sessions) != 4 || w.Calibrated != 0 || w.Uncalibrated != 4 || len(w.Archive) != 4 || w.Archive[0].Spend != nil || w.Keep != api.DefaultKeepLast {
		t.Fatalf("whatif: %d sessions, %d calibrated, archive %+v", len(w.Sessions), w.Calibrated, w.Archive)
	}
	for _, s := range w.Sessions {
		if s.Calibration.OK || s.Calibration.Reason == "" || s.Policies[0].Spend != nil || s.Calibration.RecordedRead == 0 {
			t.Errorf("session %s: calibration %+v, spend %v", s.Session, s.Calibration, s.Policies[0].Spend)
		}
	}
	one3 := whatifJSON(t, e, "--session", sessions[1].ID[:13], "--keep", "2")
	if one3.Scope != "session" || len(one3.Sessions) != 1 || one3.Sessions[0].Session != sessions[1].ID || one3.Policies[3] != "keep-last-2" {
		t.Errorf("whatif --session: %+v", one3)
	}
	wsvg := filepath.Join(e.root, "w.svg")
	if out, serr, code := e.run("whatif", "--chart", wsvg); code != 0 || !strings.Contains(out, "keep-last-16") || !strings.Contains(out, "not calibrated") {
		t.Errorf("whatif: exit %d\n%s%s", code, out, serr)
	}
	if data, err := os.ReadFile(wsvg); err != nil || !bytes.Contains(data, []byte(`id="`+BarsSpend+`"`)) {
		t.Errorf("whatif chart: %v %.200s", err, data)
	}
	if _, _, code := e.run("whatif", "--keep", "0"); code != 2 {
		t.Errorf("whatif --keep 0: exit %d, want 2", code)
	}

	// One session, with a chart in each format.
	id := sessions[2].ID
	svg := filepath.Join(e.root, "c.svg")
	out, serr, code = e.run("report", "--session", id, "--chart", svg)
	// Named by its unique prefix, as the tables name it (issue 32).
	if code != 0 || !strings.Contains(out, "session "+id[:8]+" ") || strings.Contains(out, id) {
		t.Fatalf("session report: exit %d\n%s%s", code, out, serr)
	}
	one := reportJSON(t, e, "--session", id)
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	pts := svgPoints(t, data)
	if n := len(one.Requests); n == 0 || pts[SeriesCacheRead] != n || pts[SeriesCacheWrite] != n {
		t.Errorf("chart points %v, want %d per series", pts, n)
	}
	html := filepath.Join(e.root, "c.html")
	if _, serr, code = e.run("report", "--chart", html); code != 0 || !strings.Contains(serr, "chart of the archive") {
		t.Fatalf("html chart: exit %d %s", code, serr)
	}
	if b, _ := os.ReadFile(html); !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte(`id="`+SeriesDays+`"`)) {
		t.Errorf("html chart: %.200s", b)
	}

	// Bad input: a chart format it cannot write, an unknown session.
	if _, _, code = e.run("report", "--chart", filepath.Join(e.root, "c.png")); code != 2 {
		t.Errorf("--chart c.png: exit %d, want 2", code)
	}
	if _, serr, code = e.run("report", "--session", "no-such-session"); code != 1 || !strings.Contains(serr, "no-such-session") {
		t.Errorf("unknown session: exit %d %s", code, serr)
	}

	// A new session: the next report includes it.
	write(4)
	waitFor(t, "5 sessions ingested", ingested(5))
	rep = reportJSON(t, e)
	if rep.Figures.Sessions != 5 || rep.Figures.Requests.Turns != wantTurns || rep.Figures.Cache.Read != wantRead {
		t.Errorf("after a new session: %d sessions, %d turns; want 5, %d", rep.Figures.Sessions, rep.Figures.Requests.Turns, wantTurns)
	}
}

func reportJSON(t *testing.T, e *e2e, args ...string) api.Report {
	t.Helper()
	out, serr, code := e.run(append([]string{"report", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("report --json: exit %d %s", code, serr)
	}
	var r api.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report --json: %v", err)
	}
	return r
}

// TestReportChartLatest: the archive report names as Latest the live
// session with the latest last activity (a removed session, however
// recent, is skipped, and a tie goes to the file ingested last); `report
// --chart` without --session draws the archive, with --session Latest
// that session.
func TestReportChartLatest(t *testing.T) {
	e := newE2E(t)
	e.serve()
	start := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	a := pisessiontest.Generate(pisessiontest.Options{Seed: 7, Turns: 3, Plain: true, Start: start})
	// b is a with another id: the same last activity, ingested after a.
	bID := "0192f0c1-7e2a-7bbb-8ccc-0123456789ab"
	b := &pisessiontest.Session{ID: bID, Data: bytes.ReplaceAll(a.Data, []byte(a.ID), []byte(bID))}
	// c is active later than both, and then removed.
	c := pisessiontest.Generate(pisessiontest.Options{Seed: 8, Turns: 3, Plain: true, Start: start.Add(24 * time.Hour)})
	listed := func(ids ...string) func() (bool, string) {
		return func() (bool, string) {
			m, err := e.sessionsJSON()
			if err != nil {
				return false, err.Error()
			}
			for _, id := range ids {
				if m[id].Entries == 0 {
					return false, fmt.Sprintf("%s not ingested yet: %v", id, m)
				}
			}
			return len(m) == len(ids), fmt.Sprint(len(m), " sessions listed")
		}
	}
	if err := a.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(start, a.ID))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a ingested", listed(a.ID))
	if err := b.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(start, b.ID))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b ingested", listed(a.ID, b.ID))
	pathC := filepath.Join(e.sessions, pisessiontest.FileName(start.Add(24*time.Hour), c.ID))
	if err := c.WriteFile(pathC); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c ingested", listed(a.ID, b.ID, c.ID))
	if got := reportJSON(t, e).Latest; got != c.ID {
		t.Fatalf("latest with c live: %q, want c %s", got, c.ID)
	}
	if err := os.Remove(pathC); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c removed", listed(a.ID, b.ID))

	rep := reportJSON(t, e)
	if rep.Latest != b.ID {
		t.Errorf("latest: %q, want b %s (a %s, removed c %s)", rep.Latest, b.ID, a.ID, c.ID)
	}
	svg := filepath.Join(e.root, "latest.svg")
	if _, serr, code := e.run("report", "--chart", svg); code != 0 || !strings.Contains(serr, "chart of the archive (3 sessions") {
		t.Errorf("report --chart: exit %d, want the archive's chart: %s", code, serr)
	}
	_, serr, code := e.run("report", "--session", rep.Latest, "--chart", svg)
	if code != 0 || !strings.Contains(serr, "chart of session "+b.ID[:8]+" ") {
		t.Errorf("report --chart: exit %d, want the chart of b %s: %s", code, b.ID, serr)
	}
	if _, err := os.Stat(svg); err != nil {
		t.Error(err)
	}
}

func whatifJSON(t *testing.T, e *e2e, args ...string) api.WhatIf {
	t.Helper()
	out, serr, code := e.run(append([]string{"whatif", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("whatif --json: exit %d %s", code, serr)
	}
	var w api.WhatIf
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatalf("whatif --json: %v", err)
	}
	return w
}
