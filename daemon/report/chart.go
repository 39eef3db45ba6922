package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartW      = 960
	chartH      = 480
	marginLeft  = 80
	marginRight = 180 // room for the legend
	marginTop   = 40
	marginBot   = 60
)

// Series and marker ids in the SVG, stable for tools and tests.
const (
	SeriesCacheRead  = "series-cache-read"
	SeriesCacheWrite = "series-cache-write"
	MarksStrips      = "marks-strips"
	MarksBreaks      = "marks-breaks"
)

// SVG draws a session report's cache read and cache write tokens per
// request (x: request number on the branch, y: tokens), with a dashed
// vertical line at each request whose compile bindery stripped and a red
// dot on each cache break. Hand-written SVG 1.1, no scripts, no external
// files. An archive report has no requests and draws empty axes.
func SVG(r Report) []byte {
	var b bytes.Buffer
	reqs := r.Requests
	n := len(reqs)
	var ymax int64
	for _, q := range reqs {
		ymax = max(ymax, q.CacheRead, q.CacheWrite)
	}
	top := niceCeil(ymax)
	plotW := float64(chartW - marginLeft - marginRight)
	plotH := float64(chartH - marginTop - marginBot)
	x := func(i int) float64 { // i is 1-based
		if n <= 1 {
			return marginLeft + plotW/2
		}
		return marginLeft + plotW*float64(i-1)/float64(n-1)
	}
	y := func(v int64) float64 {
		return marginTop + plotH*(1-float64(v)/float64(top))
	}

	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	title := "cache per request: session " + r.Session
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", marginLeft, esc(title))

	// Axes, grid and ticks.
	fmt.Fprintf(&b, `<g id="axes" stroke="#333" fill="none">`+"\n")
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", marginLeft, marginTop, marginLeft, chartH-marginBot)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", marginLeft, chartH-marginBot, chartW-marginRight, chartH-marginBot)
	b.WriteString("</g>\n")
	b.WriteString(`<g id="y-ticks" fill="#333" text-anchor="end">` + "\n")
	for i := 0; i <= 4; i++ {
		v := top * int64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, marginLeft, y(v), chartW-marginRight, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", marginLeft-6, y(v)+4, tok(v))
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g id="x-ticks" fill="#333" text-anchor="middle">` + "\n")
	for _, i := range xTicks(n) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`, x(i), chartH-marginBot, x(i), chartH-marginBot+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%d</text>`+"\n", x(i), chartH-marginBot+18, i)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text id="x-label" x="%.1f" y="%d" text-anchor="middle">request on the current branch</text>`+"\n", marginLeft+plotW/2, chartH-16)
	fmt.Fprintf(&b, `<text id="y-label" x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">tokens</text>`+"\n", marginTop+plotH/2, marginTop+plotH/2)

	// Strip markers under the series.
	fmt.Fprintf(&b, `<g id="%s" stroke="#8a2be2" stroke-dasharray="4 3">`+"\n", MarksStrips)
	for _, q := range reqs {
		if q.Strips > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"><title>request %d: %d blocks stripped (~%s tok)</title></line>`+"\n",
				x(q.N), marginTop, x(q.N), chartH-marginBot, q.N, q.Strips, tok(q.StrippedTokens))
		}
	}
	b.WriteString("</g>\n")

	series := func(id, color string, v func(Request) int64) {
		pts := make([]string, len(reqs))
		for i, q := range reqs {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(q.N), y(v(q)))
		}
		fmt.Fprintf(&b, `<g id="%s"><polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/></g>`+"\n", id, color, strings.Join(pts, " "))
	}
	series(SeriesCacheRead, "#1f77b4", func(r Request) int64 { return r.CacheRead })
	series(SeriesCacheWrite, "#ff7f0e", func(r Request) int64 { return r.CacheWrite })

	fmt.Fprintf(&b, `<g id="%s" fill="#d62728">`+"\n", MarksBreaks)
	for _, br := range r.Breaks {
		if br.Request < 1 || br.Request > n {
			continue
		}
		q := reqs[br.Request-1]
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4"><title>break at request %d: read %s to %s, %s tok rewritten, %s, cause %s</title></circle>`+"\n",
			x(q.N), y(q.CacheWrite), br.Request, tok(br.ReadBefore), tok(br.ReadAfter), tok(br.Rewritten), optMoney(br.Cost), br.Cause)
	}
	b.WriteString("</g>\n")

	// Legend.
	lx := chartW - marginRight + 16
	b.WriteString(`<g id="legend">` + "\n")
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f77b4" stroke-width="2"/><text x="%d" y="%d">cache read</text>`+"\n", lx, marginTop+10, lx+24, marginTop+10, lx+30, marginTop+14)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ff7f0e" stroke-width="2"/><text x="%d" y="%d">cache write</text>`+"\n", lx, marginTop+30, lx+24, marginTop+30, lx+30, marginTop+34)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8a2be2" stroke-dasharray="4 3"/><text x="%d" y="%d">bindery strip</text>`+"\n", lx+12, marginTop+42, lx+12, marginTop+58, lx+30, marginTop+54)
	fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="4" fill="#d62728"/><text x="%d" y="%d">cache break</text>`+"\n", lx+12, marginTop+70, lx+30, marginTop+74)
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// HTML wraps the chart and the text report in a page a browser opens
// directly.
func HTML(r Report) []byte {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>")
	b.WriteString(esc("bindery report: session " + r.Session))
	b.WriteString("</title></head>\n<body>\n")
	svg := SVG(r)
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	b.Write(svg)
	b.WriteString("<pre>")
	b.WriteString(esc(Text(r)))
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
