package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/daemon/report"
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

	// One session, with a chart in each format.
	id := sessions[2].ID
	svg := filepath.Join(e.root, "c.svg")
	out, serr, code = e.run("report", "--session", id, "--chart", svg)
	if code != 0 || !strings.Contains(out, "session "+id) {
		t.Fatalf("session report: exit %d\n%s%s", code, out, serr)
	}
	one := reportJSON(t, e, "--session", id)
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	pts := svgPoints(t, data)
	if n := len(one.Requests); n == 0 || pts[report.SeriesCacheRead] != n || pts[report.SeriesCacheWrite] != n {
		t.Errorf("chart points %v, want %d per series", pts, n)
	}
	html := filepath.Join(e.root, "c.html")
	if _, serr, code = e.run("report", "--chart", html); code != 0 {
		t.Fatalf("html chart: exit %d %s", code, serr)
	}
	if b, _ := os.ReadFile(html); !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte("<svg")) {
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

func reportJSON(t *testing.T, e *e2e, args ...string) report.Report {
	t.Helper()
	out, serr, code := e.run(append([]string{"report", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("report --json: exit %d %s", code, serr)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report --json: %v", err)
	}
	return r
}

// TestReportChartLatest: `report --chart` without --session draws the live
// session with the latest last activity; a removed session, however
// recent, is skipped, and a tie goes to the file ingested last.
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
	_, serr, code := e.run("report", "--chart", svg)
	if code != 0 || !strings.Contains(serr, "chart of session "+b.ID) {
		t.Errorf("report --chart: exit %d, want the chart of b %s: %s", code, b.ID, serr)
	}
	if _, err := os.Stat(svg); err != nil {
		t.Error(err)
	}
}
