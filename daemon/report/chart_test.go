package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/my-pi/bindery/watcher"
)

// piLines parses hand-written pi session lines (header first) the way the
// watcher ingests them.
func piLines(t *testing.T, lines ...string) SessionInput {
	t.Helper()
	p := watcher.NewParser("chart.jsonl")
	var in SessionInput
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

// A v1 reply aborted before message_start carries all-zero usage (the real
// large-session fixture has 16 such replies). It read and wrote nothing, so
// the chart gives it no point: plotted at 0 it drew a cache-read drop to the
// axis that no request made, and that looked like a cache break.
func TestSVGSkipsRequestsWithoutPrompt(t *testing.T) {
	usage := func(in, out, cr, cw int) string {
		return `"usage":{"input":` + strconv.Itoa(in) + `,"output":` + strconv.Itoa(out) + `,"cacheRead":` + strconv.Itoa(cr) +
			`,"cacheWrite":` + strconv.Itoa(cw) + `,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}`
	}
	asst := func(ts, stop, u string) string {
		return `{"type":"message","timestamp":"2025-11-21T00:` + ts + `.000Z","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5",` +
			u + `,"stopReason":"` + stop + `","timestamp":1763683200000}}`
	}
	in := piLines(t,
		`{"type":"session","id":"d703a1a9-0000-4000-8000-000000000001","timestamp":"2025-11-21T00:00:00.000Z","cwd":"/w","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off"}`,
		`{"type":"message","timestamp":"2025-11-21T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":1763683201000}}`,
		asst("00:10", "toolUse", usage(3, 100, 68979, 700)),
		`{"type":"message","timestamp":"2025-11-21T00:00:11.000Z","message":{"role":"toolResult","toolCallId":"toolu_1","toolName":"bash","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":1763683211000}}`,
		asst("00:20", "aborted", usage(0, 0, 0, 0)+`,"errorMessage":"Request was aborted."`),
		`{"type":"message","timestamp":"2025-11-21T00:00:21.000Z","message":{"role":"user","content":[{"type":"text","text":"again"}],"timestamp":1763683221000}}`,
		asst("00:30", "stop", usage(3, 50, 69679, 300)),
	)
	rep := SessionReport(Analyze(in, DefaultPrices()), DefaultPrices())
	if len(rep.Requests) != 3 || rep.Requests[1].Prompt != 0 {
		t.Fatalf("want 3 requests, the 2nd with an empty prompt; got %+v", rep.Requests)
	}
	svg := SVG(rep)
	got := svgSeries(t, svg)
	eq(t, "read points", got[SeriesCacheRead], 2)
	eq(t, "write points", got[SeriesCacheWrite], 2)
	eq(t, "breaks", got[MarksBreaks], 0)

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
