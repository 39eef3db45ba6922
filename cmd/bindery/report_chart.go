package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
)

// The charts `bindery report --chart` and `bindery whatif --chart` write
// are drawn here, in the CLI, from the api's report types alone (the
// daemon computes, the client renders). They are hand-written SVG 1.1: no
// scripts, no external files; tooltips are <title> elements. Every chart
// is chartW wide so that it fits a 1000-pixel window, and its legend
// lists only what it drew.

// Session chart geometry, in SVG user units: two panels sharing the x
// axis, cache read above and cache write below, each on its own scale
// (reads are usually tens of times the writes, which would flatten on
// one scale).
const (
	chartW      = 960
	chartH      = 560
	marginLeft  = 80
	marginRight = 180 // room for the legend
	readTop     = 50
	readH       = 250
	writeTop    = 340
	writeH      = 150
	axisBottom  = writeTop + writeH
)

// Series and marker ids in the SVG, stable for tools and tests.
const (
	SeriesCacheRead  = "series-cache-read"
	SeriesCacheWrite = "series-cache-write"
	MarksStrips      = "marks-strips"
	MarksBreaks      = "marks-breaks"
	MarksEntries     = "marks-entries" // compactions, model and thinking changes
	HoverRequests    = "hover-requests"
	ChartLegend      = "legend"
)

// causeColors colours break dots by cause.
var causeColors = map[string]string{
	api.CauseCompaction: "#7f7f7f",
	api.CauseStrip:      "#8a2be2",
	api.CauseHost:       "#e377c2",
	api.CauseModel:      "#17becf",
	api.CauseIdle:       "#bcbd22",
	api.CauseUnknown:    "#d62728",
}

// markStyle is how an entry mark is drawn: colour, dash, legend label.
var markStyle = map[string][3]string{
	"compaction":            {"#555", "", "compaction"},
	"branch_summary":        {"#555", "2 2", "branch summary"},
	"model_change":          {"#17becf", "6 3", "model change"},
	"thinking_level_change": {"#17becf", "1 3", "thinking change"},
}

// sessionSVG draws a session report: cache read and cache write tokens per
// request (one panel each), x the request number on the current branch,
// or its time when byTime (idle gaps, the main cause of rewrites, then
// show as gaps). Marked: compactions, branch summaries, model and thinking
// changes (vertical lines through both panels), bindery's strips (dashed
// purple), and each cache break (a dot on the write panel, coloured by
// cause, its tooltip the tokens rewritten and their cost). Each request
// has a tooltip with its time, tokens and cost. Requests with an empty
// prompt (no usage) get no point. An archive report has no requests and
// draws empty axes.
func sessionSVG(r api.Report, byTime bool) []byte {
	var b bytes.Buffer
	reqs := r.Requests
	n := len(reqs)
	var readMax, writeMax int64
	for _, q := range reqs {
		readMax = max(readMax, q.CacheRead)
		writeMax = max(writeMax, q.CacheWrite)
	}
	plotW := float64(chartW - marginLeft - marginRight)
	// Time axis: every request needs a timestamp; else fall back.
	times := make([]time.Time, n)
	if byTime {
		for i, q := range reqs {
			t, err := time.Parse(time.RFC3339Nano, q.Timestamp)
			if err != nil {
				byTime = false
				break
			}
			times[i] = t
		}
	}
	var t0, t1 time.Time
	if byTime && n > 0 {
		t0, t1 = times[0], times[n-1]
	}
	xAt := func(t time.Time) float64 {
		span := t1.Sub(t0).Seconds()
		if span <= 0 {
			return marginLeft + plotW/2
		}
		return marginLeft + plotW*t.Sub(t0).Seconds()/span
	}
	x := func(i int) float64 { // i is 1-based
		if byTime && i >= 1 && i <= n {
			return xAt(times[i-1])
		}
		if n <= 1 {
			return marginLeft + plotW/2
		}
		return marginLeft + plotW*float64(i-1)/float64(n-1)
	}
	type panel struct {
		top, h float64
		ceil   int64
	}
	readP := panel{readTop, readH, niceCeil(readMax)}
	writeP := panel{writeTop, writeH, niceCeil(writeMax)}
	y := func(p panel, v int64) float64 { return p.top + p.h*(1-float64(v)/float64(p.ceil)) }

	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	title := "cache per request: session " + r.Session
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", marginLeft, esc(title))
	sub := fmt.Sprintf("%s, %d requests, %s, %d breaks (%s avoidable)", r.Model, n, money(r.Figures.Total), r.Figures.Breaks.Count, money(r.Figures.Breaks.Avoidable))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", marginLeft, esc(strings.TrimPrefix(sub, ", ")))

	for _, p := range []struct {
		id, label string
		p         panel
	}{{"read-axis", "cache read (tokens)", readP}, {"write-axis", "cache write (tokens)", writeP}} {
		fmt.Fprintf(&b, `<g id="%s" fill="#333" text-anchor="end">`+"\n", p.id)
		for i := 0; i <= 4; i++ {
			v := p.p.ceil * int64(i) / 4
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, marginLeft, y(p.p, v), chartW-marginRight, y(p.p, v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", marginLeft-6, y(p.p, v)+4, tok(v))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", marginLeft, p.p.top, marginLeft, p.p.top+p.p.h)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", marginLeft, p.p.top+p.p.h, chartW-marginRight, p.p.top+p.p.h)
		cy := p.p.top + p.p.h/2
		fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", cy, cy, p.label)
		b.WriteString("</g>\n")
	}
	b.WriteString(`<g id="x-ticks" fill="#333" text-anchor="middle">` + "\n")
	xLabel := "request on the current branch"
	if byTime && n > 0 {
		xLabel = "time (UTC)"
		for _, t := range timeTicks(t0, t1) {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`, xAt(t), axisBottom, xAt(t), axisBottom+5)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", xAt(t), axisBottom+18, timeLabel(t, t0, t1))
		}
	} else {
		for _, i := range xTicks(n) {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`, x(i), axisBottom, x(i), axisBottom+5)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%d</text>`+"\n", x(i), axisBottom+18, i)
		}
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text id="x-label" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginLeft+plotW/2, axisBottom+42, xLabel)

	// Entry marks: between the request before and the one after (at the
	// entry's time on a time axis).
	drawn := map[string]bool{}
	fmt.Fprintf(&b, `<g id="%s">`+"\n", MarksEntries)
	for _, m := range r.Marks {
		st, ok := markStyle[m.Kind]
		if !ok || n == 0 {
			continue
		}
		var mx float64
		t, err := time.Parse(time.RFC3339Nano, m.Timestamp)
		switch {
		case byTime && err == nil:
			mx = xAt(t)
		case m.Before <= 1:
			mx = x(1)
		case m.Before > n:
			mx = x(n)
		default:
			mx = (x(m.Before-1) + x(m.Before)) / 2
		}
		mx = math.Max(marginLeft, math.Min(mx, chartW-marginRight))
		drawn["mark:"+m.Kind] = true
		dash := ""
		if st[1] != "" {
			dash = ` stroke-dasharray="` + st[1] + `"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5"%s><title>%s before request %d (line %d, %s)</title></line>`+"\n",
			mx, readTop, mx, axisBottom, st[0], dash, st[2], m.Before, m.Line, m.Timestamp)
	}
	b.WriteString("</g>\n")

	fmt.Fprintf(&b, `<g id="%s" stroke="#8a2be2" stroke-dasharray="4 3">`+"\n", MarksStrips)
	for _, q := range reqs {
		if q.Strips > 0 {
			drawn["strip"] = true
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"><title>request %d: %d blocks stripped (~%s tok)</title></line>`+"\n",
				x(q.N), readTop, x(q.N), axisBottom, q.N, q.Strips, tok(q.StrippedTokens))
		}
	}
	b.WriteString("</g>\n")

	// A request with an empty prompt (pi's aborted replies that never got a
	// message_start carry all-zero usage) read and wrote nothing: drawing it
	// at 0 would show a cache-read drop that never happened, so it gets no
	// point and the line joins its neighbours.
	series := func(id, color string, p panel, v func(api.Request) int64) {
		pts := make([]string, 0, len(reqs))
		for _, q := range reqs {
			if q.Prompt == 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(q.N), y(p, v(q))))
		}
		fmt.Fprintf(&b, `<g id="%s"><polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/></g>`+"\n", id, color, strings.Join(pts, " "))
	}
	series(SeriesCacheRead, "#1f77b4", readP, func(q api.Request) int64 { return q.CacheRead })
	series(SeriesCacheWrite, "#ff7f0e", writeP, func(q api.Request) int64 { return q.CacheWrite })

	fmt.Fprintf(&b, `<g id="%s">`+"\n", MarksBreaks)
	for _, br := range r.Breaks {
		if br.Request < 1 || br.Request > n {
			continue
		}
		q := reqs[br.Request-1]
		col, ok := causeColors[br.Cause]
		if !ok {
			col = causeColors[api.CauseUnknown]
		}
		drawn["cause:"+br.Cause] = true
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>break at request %d (%s): read %s of the %s left, %s tok rewritten, %s (%s above reading), cause %s</title></circle>`+"\n",
			x(q.N), y(writeP, q.CacheWrite), col, br.Request, br.Timestamp, tok(br.ReadAfter), tok(br.Reusable), tok(br.Rewritten), optMoney(br.Cost), optMoney(br.Excess), br.Cause)
	}
	b.WriteString("</g>\n")

	// Hover targets: one transparent column per request, its tooltip the
	// request's time, tokens and cost.
	fmt.Fprintf(&b, `<g id="%s" fill="#000" fill-opacity="0">`+"\n", HoverRequests)
	for i, q := range reqs {
		lo, hi := x(q.N), x(q.N)
		if i > 0 {
			lo = (x(reqs[i-1].N) + x(q.N)) / 2
		}
		if i < n-1 {
			hi = (x(q.N) + x(reqs[i+1].N)) / 2
		}
		w := math.Max(hi-lo, 1)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d"><title>request %d, %s, %s: read %s, write %s, uncached %s, output %s, cost %s</title></rect>`+"\n",
			lo, readTop, w, axisBottom-readTop, q.N, q.Timestamp, q.StopReason, tok(q.CacheRead), tok(q.CacheWrite), tok(q.Input), tok(q.Output), optMoney(q.Cost))
	}
	b.WriteString("</g>\n")

	// Legend: only what was drawn.
	lx := chartW - marginRight + 14
	ly := readTop + 10
	fmt.Fprintf(&b, `<g id="%s">`+"\n", ChartLegend)
	item := func(symbol, label string) {
		fmt.Fprintf(&b, symbol+`<text x="%d" y="%d">%s</text>`+"\n", lx+30, ly+4, esc(label))
		ly += 20
	}
	line := func(color, dash string, width float64) string {
		d := ""
		if dash != "" {
			d = ` stroke-dasharray="` + dash + `"`
		}
		return fmt.Sprintf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%.1f"%s/>`, lx, ly, lx+24, ly, color, width, d)
	}
	if n > 0 {
		item(line("#1f77b4", "", 2), "cache read")
		item(line("#ff7f0e", "", 2), "cache write")
	}
	for _, k := range []string{"compaction", "branch_summary", "model_change", "thinking_level_change"} {
		if drawn["mark:"+k] {
			st := markStyle[k]
			item(line(st[0], st[1], 1.5), st[2])
		}
	}
	if drawn["strip"] {
		item(line("#8a2be2", "4 3", 1), "bindery strip")
	}
	for _, c := range api.Causes {
		if drawn["cause:"+c] {
			item(fmt.Sprintf(`<circle cx="%d" cy="%d" r="4" fill="%s"/>`, lx+12, ly, causeColors[c]), "break: "+c)
		}
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// htmlPage wraps a chart and a text report in a page a browser opens
// directly; it fits a 1000-pixel window (the chart scales down in a
// narrower one, long text lines wrap).
func htmlPage(title string, svg []byte, text string) []byte {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>")
	b.WriteString(esc(title))
	b.WriteString("</title>\n<style>body{margin:8px;max-width:980px;font-family:sans-serif}h1{font-size:16px;font-weight:normal;overflow-wrap:anywhere}" +
		"svg{max-width:100%;height:auto}pre{font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}</style></head>\n<body>\n<h1>")
	b.WriteString(esc(title))
	b.WriteString("</h1>\n")
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	b.Write(svg)
	b.WriteString("<pre>")
	b.WriteString(esc(text))
	b.WriteString("</pre>\n</body></html>\n")
	return b.Bytes()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v int64) int64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(float64(v))))
	for _, m := range []float64{1, 2, 5, 10} {
		if c := int64(m * p); c >= v {
			return c
		}
	}
	return v
}

// niceCeilF is niceCeil for money.
func niceCeilF(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if c := m * p; c >= v*(1-1e-12) {
			return c
		}
	}
	return v
}

// xTicks picks at most about ten request numbers to label.
func xTicks(n int) []int {
	if n == 0 {
		return nil
	}
	step := int(niceCeil(int64((n + 9) / 10)))
	ticks := []int{1}
	for i := step; i <= n; i += step {
		if i != 1 {
			ticks = append(ticks, i)
		}
	}
	return ticks
}

// timeTicks picks at most about eight round times between t0 and t1.
func timeTicks(t0, t1 time.Time) []time.Time {
	span := t1.Sub(t0)
	if span <= 0 {
		return []time.Time{t0}
	}
	var step time.Duration
	for _, s := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour} {
		step = s
		if span/s <= 8 {
			break
		}
	}
	var out []time.Time
	for t := t0.UTC().Truncate(step); !t.After(t1); t = t.Add(step) {
		if !t.Before(t0) {
			out = append(out, t)
		}
	}
	return out
}

// timeLabel prints a tick: the clock, with the date where the span
// crosses days.
func timeLabel(t, t0, t1 time.Time) string {
	t = t.UTC()
	if t1.Sub(t0) >= 24*time.Hour {
		return t.Format("01-02 15:04")
	}
	return t.Format("15:04")
}
