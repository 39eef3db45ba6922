package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/watcher"
)

// svgParts is what a chart drew: per group id, polyline points or child
// marks (lines, circles, rects), the legend's labels and every tooltip.
type svgParts struct {
	count  map[string]int
	legend []string
	titles []string
	fills  map[string][]string // per group id, the fill of each circle
}

// parseSVG parses a chart (failing the test when it does not parse) and
// returns what it drew.
func parseSVG(t *testing.T, data []byte) svgParts {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	p := svgParts{count: map[string]int{}, fills: map[string][]string{}}
	var stack []string
	var inText, inTitle bool
	for {
		tk, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch el := tk.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			group := ""
			if len(stack) > 0 {
				group = stack[len(stack)-1]
			}
			switch el.Name.Local {
			case "polyline":
				p.count[group] += len(strings.Fields(attr["points"]))
			case "line", "circle", "rect":
				p.count[group]++
				if el.Name.Local == "circle" {
					p.fills[group] = append(p.fills[group], attr["fill"])
				}
			case "text":
				inText = group == ChartLegend
			case "title":
				inTitle = true
			}
			if el.Name.Local == "g" && attr["id"] != "" {
				stack = append(stack, attr["id"])
			} else {
				stack = append(stack, group)
			}
		case xml.CharData:
			if inText {
				p.legend = append(p.legend, string(el))
			}
			if inTitle {
				p.titles = append(p.titles, string(el))
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			inText, inTitle = false, false
		}
	}
	return p
}

// piLines parses hand-written pi session lines (header first) the way the
// watcher ingests them.
func piLines(t *testing.T, lines ...string) report.SessionInput {
	t.Helper()
	p := watcher.NewParser("chart.jsonl")
	var in report.SessionInput
	var off int64
	for _, l := range lines {
		res := p.Line([]byte(l+"\n"), off)
		off += int64(len(l) + 1)
		if res.Err != nil {
			t.Fatalf("line %q: %s", l, res.Err.Reason)
		}
		if res.Header != nil {
			in.Session = res.Header.ID
		}
		if res.Entry != nil {
			in.Entries = append(in.Entries, *res.Entry)
		}
	}
	return in
}

func piUsage(in, out, cr, cw int) string {
	cost := func(n int, price float64) string { return strconv.FormatFloat(float64(n)*price/1e6, 'f', -1, 64) }
	return `"usage":{"input":` + strconv.Itoa(in) + `,"output":` + strconv.Itoa(out) + `,"cacheRead":` + strconv.Itoa(cr) +
		`,"cacheWrite":` + strconv.Itoa(cw) + `,"cost":{"input":` + cost(in, 3) + `,"output":` + cost(out, 15) + `,"cacheRead":` + cost(cr, 0.3) +
		`,"cacheWrite":` + cost(cw, 3.75) + `,"total":0}}`
}

func piAssistant(ts, stop, usage string) string {
	return `{"type":"message","timestamp":"2025-11-21T` + ts + `.000Z","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5",` +
		usage + `,"stopReason":"` + stop + `","timestamp":1763683200000}}`
}

func piUser(ts, text string) string {
	return `{"type":"message","timestamp":"2025-11-21T` + ts + `.000Z","message":{"role":"user","content":[{"type":"text","text":"` + text + `"}],"timestamp":1763683201000}}`
}

const piHeader = `{"type":"session","id":"d703a1a9-0000-4000-8000-000000000001","timestamp":"2025-11-21T00:00:00.000Z","cwd":"/w","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off"}`

// A v1 reply aborted before message_start carries all-zero usage (the real
// large-session fixture has 16 such replies). It read and wrote nothing, so
// the chart gives it no point: plotted at 0 it drew a cache-read drop to the
// axis that no request made, and that looked like a cache break.
func TestSVGSkipsRequestsWithoutPrompt(t *testing.T) {
	in := piLines(t, piHeader,
		piUser("00:00:01", "go"),
		piAssistant("00:00:10", "toolUse", piUsage(3, 100, 68979, 700)),
		`{"type":"message","timestamp":"2025-11-21T00:00:11.000Z","message":{"role":"toolResult","toolCallId":"toolu_1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":1763683211000}}`,
		piAssistant("00:00:20", "aborted", piUsage(0, 0, 0, 0)+`,"errorMessage":"Request was aborted."`),
		piUser("00:00:21", "again"),
		piAssistant("00:00:30", "stop", piUsage(3, 50, 69679, 300)),
	)
	rep := report.SessionReport(report.Analyze(in, report.DefaultPrices()), report.DefaultPrices())
	if len(rep.Requests) != 3 || rep.Requests[1].Prompt != 0 {
		t.Fatalf("want 3 requests, the 2nd with an empty prompt; got %+v", rep.Requests)
	}
	svg := sessionSVG(rep, false)
	got := parseSVG(t, svg)
	if got.count[SeriesCacheRead] != 2 || got.count[SeriesCacheWrite] != 2 || got.count[MarksBreaks] != 0 {
		t.Errorf("points %v, want 2 read, 2 write, no break", got.count)
	}
	// No read point sits on the read panel's zero line.
	m := regexp.MustCompile(`<g id="` + SeriesCacheRead + `"><polyline [^>]*points="([^"]*)"`).FindSubmatch(svg)
	if m == nil {
		t.Fatal("no cache-read polyline")
	}
	zero := strconv.FormatFloat(float64(readTop+readH), 'f', 1, 64)
	for _, pt := range strings.Fields(string(m[1])) {
		if strings.HasSuffix(pt, ","+zero) {
			t.Errorf("cache-read point %s is on the zero line", pt)
		}
	}
}

// TestSessionChart: a pi-shaped session with an idle rewrite, a thinking
// level change followed by a rewrite, a compaction and an unexplained
// rewrite. The chart marks the compaction and the thinking change, colours
// each break by its cause, gives every request a tooltip with its cost,
// and its legend names only what it drew (no "bindery strip": there is
// none). On the time axis the points follow the clock.
func TestSessionChart(t *testing.T) {
	in := piLines(t, piHeader,
		piUser("00:00:01", "go"),
		piAssistant("00:00:10", "stop", piUsage(3, 100, 0, 20000)),
		piUser("00:10:00", "later"),                                // 10 minutes idle
		piAssistant("00:10:10", "stop", piUsage(3, 100, 0, 20400)), // idle
		`{"type":"thinking_level_change","timestamp":"2025-11-21T00:10:20.000Z","thinkingLevel":"high"}`,
		piUser("00:10:30", "think"),
		piAssistant("00:10:40", "stop", piUsage(3, 100, 0, 20800)), // model (thinking change)
		piUser("00:11:00", "more"),
		piAssistant("00:11:10", "stop", piUsage(3, 100, 20800, 400)), // ordinary turn
		`{"type":"compaction","timestamp":"2025-11-21T00:11:20.000Z","summary":"s","firstKeptEntryIndex":9,"tokensBefore":21200}`,
		piUser("00:11:30", "after"),
		piAssistant("00:11:40", "stop", piUsage(3, 100, 0, 5000)), // compaction
		piUser("00:12:00", "again"),
		piAssistant("00:12:10", "stop", piUsage(3, 100, 0, 5300)), // unknown: a cold write after a cold write
	)
	rep := report.SessionReport(report.Analyze(in, report.DefaultPrices()), report.DefaultPrices())
	var causes []string
	for _, b := range rep.Breaks {
		causes = append(causes, b.Cause)
	}
	if want := []string{api.CauseIdle, api.CauseModel, api.CauseCompaction, api.CauseUnknown}; !slices.Equal(causes, want) {
		t.Fatalf("break causes %v, want %v", causes, want)
	}
	for _, byTime := range []bool{false, true} {
		got := parseSVG(t, sessionSVG(rep, byTime))
		if got.count[SeriesCacheRead] != 6 || got.count[MarksBreaks] != 4 || got.count[MarksEntries] != 2 || got.count[HoverRequests] != 6 || got.count[MarksStrips] != 0 {
			t.Errorf("time %v: drew %v", byTime, got.count)
		}
		fills := got.fills[MarksBreaks]
		want := []string{causeColors[api.CauseIdle], causeColors[api.CauseModel], causeColors[api.CauseCompaction], causeColors[api.CauseUnknown]}
		if !slices.Equal(fills, want) {
			t.Errorf("break colours %v, want %v", fills, want)
		}
		wantLegend := []string{"cache read", "cache write", "compaction", "thinking change", "break: compaction", "break: model", "break: idle", "break: unknown"}
		if !slices.Equal(got.legend, wantLegend) {
			t.Errorf("time %v: legend %v, want %v", byTime, got.legend, wantLegend)
		}
		costs := 0
		for _, tt := range got.titles {
			if strings.HasPrefix(tt, "request ") && strings.Contains(tt, "cost $") {
				costs++
			}
		}
		if costs != 6 {
			t.Errorf("%d request tooltips with a cost, want 6", costs)
		}
	}
	// An empty session and an archive still draw valid charts.
	parseSVG(t, sessionSVG(report.SessionReport(report.Analyze(report.SessionInput{Session: "empty"}, nil), nil), true))
	parseSVG(t, archiveSVG(report.ArchiveReport(nil, nil)))
	// HTML wraps the same SVG; its SVG part parses too.
	html := htmlPage("bindery report: session "+rep.Session, sessionSVG(rep, false), reportText(rep))
	i, j := bytes.Index(html, []byte("<svg")), bytes.Index(html, []byte("</svg>"))
	if i < 0 || j < 0 || !bytes.HasPrefix(html, []byte("<!DOCTYPE html>")) {
		t.Fatalf("HTML does not hold an SVG")
	}
	if got := parseSVG(t, html[i:j+len("</svg>")]); got.count[SeriesCacheRead] != 6 {
		t.Errorf("html read points %d", got.count[SeriesCacheRead])
	}
}

// TestArchiveChart: a bar per day stacked by the kinds that day spent on,
// the avoidable part hatched, the legend only the kinds drawn.
func TestArchiveChart(t *testing.T) {
	r := api.Report{Scope: "archive", Figures: api.Figures{Sessions: 2, Total: 7.5, Days: map[string]api.Day{
		"2026-11-30": {Output: 1, CacheWrite: 2, CacheRead: 0.5, Input: 0.01, Avoidable: 1.5},
		"2026-12-01": {Output: 2, CacheWrite: 1, Errors: 1},
	}}}
	r.Figures.Breaks.Avoidable = 1.5
	got := parseSVG(t, archiveSVG(r))
	// 4 kinds + the hatch on day 1, 3 kinds on day 2.
	if got.count[SeriesDays] != 8 {
		t.Errorf("drew %d rects, want 8", got.count[SeriesDays])
	}
	if want := []string{"errored/aborted", "input", "cache read", "cache write", "output", "avoidable"}; !slices.Equal(got.legend, want) {
		t.Errorf("legend %v, want %v", got.legend, want)
	}
	if !slices.ContainsFunc(got.titles, func(s string) bool {
		return strings.HasPrefix(s, "2026-11-30: $3.51") && strings.Contains(s, "avoidable $1.50")
	}) {
		t.Errorf("no tooltip for the first day: %q", got.titles)
	}
}
