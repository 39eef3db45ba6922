package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// Chart geometry, in SVG user units: two panels sharing the x axis, cache
// read above and cache write below, each on its own scale (reads are
// usually tens of times the writes, which would flatten on one scale).
const (
	chartW      = 960
	chartH      = 560
	marginLeft  = 80
	marginRight = 170 // room for the legend
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
)

// SVG draws a session report's cache read and cache write tokens per
// request (x: request number on the current branch; y: tokens, one panel
// each), a dashed vertical line through both panels at each request whose
// compile bindery stripped, and a red dot on the write panel at each cache
// break. Requests with an empty prompt (no usage) get no point. Hand-written
// SVG 1.1: no scripts, no external files. An archive report has no requests
// and draws empty axes.
func SVG(r Report) []byte {
	var b bytes.Buffer
	reqs := r.Requests
	n := len(reqs)
	var readMax, writeMax int64
	for _, q := range reqs {
		readMax = max(readMax, q.CacheRead)
		writeMax = max(writeMax, q.CacheWrite)
	}
	plotW := float64(chartW - marginLeft - marginRight)
	x := func(i int) float64 { // i is 1-based
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

	// Each panel: frame, y grid and ticks, its axis label.
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
	for _, i := range xTicks(n) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`, x(i), axisBottom, x(i), axisBottom+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%d</text>`+"\n", x(i), axisBottom+18, i)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text id="x-label" x="%.1f" y="%d" text-anchor="middle">request on the current branch</text>`+"\n", marginLeft+plotW/2, axisBottom+42)

	// Strip markers under the series, through both panels.
	fmt.Fprintf(&b, `<g id="%s" stroke="#8a2be2" stroke-dasharray="4 3">`+"\n", MarksStrips)
	for _, q := range reqs {
		if q.Strips > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"><title>request %d: %d blocks stripped (~%s tok)</title></line>`+"\n",
				x(q.N), readTop, x(q.N), axisBottom, q.N, q.Strips, tok(q.StrippedTokens))
		}
	}
	b.WriteString("</g>\n")

	// A request with an empty prompt (pi's aborted replies that never got a
	// message_start carry all-zero usage) read and wrote nothing: drawing it
	// at 0 would show a cache-read drop that never happened, so it gets no
	// point and the line joins its neighbours.
	series := func(id, color string, p panel, v func(Request) int64) {
		pts := make([]string, 0, len(reqs))
		for _, q := range reqs {
			if q.Prompt == 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(q.N), y(p, v(q))))
		}
		fmt.Fprintf(&b, `<g id="%s"><polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/></g>`+"\n", id, color, strings.Join(pts, " "))
	}
	series(SeriesCacheRead, "#1f77b4", readP, func(q Request) int64 { return q.CacheRead })
	series(SeriesCacheWrite, "#ff7f0e", writeP, func(q Request) int64 { return q.CacheWrite })

	fmt.Fprintf(&b, `<g id="%s" fill="#d62728">`+"\n", MarksBreaks)
	for _, br := range r.Breaks {
		if br.Request < 1 || br.Request > n {
			continue
		}
		q := reqs[br.Request-1]
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4"><title>break at request %d: read %s to %s, %s tok rewritten, %s, cause %s</title></circle>`+"\n",
			x(q.N), y(writeP, q.CacheWrite), br.Request, tok(br.ReadBefore), tok(br.ReadAfter), tok(br.Rewritten), optMoney(br.Cost), br.Cause)
	}
	b.WriteString("</g>\n")

	// Legend.
	lx := chartW - marginRight + 16
	b.WriteString(`<g id="legend">` + "\n")
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f77b4" stroke-width="2"/><text x="%d" y="%d">cache read</text>`+"\n", lx, readTop+10, lx+24, readTop+10, lx+30, readTop+14)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ff7f0e" stroke-width="2"/><text x="%d" y="%d">cache write</text>`+"\n", lx, readTop+30, lx+24, readTop+30, lx+30, readTop+34)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8a2be2" stroke-dasharray="4 3"/><text x="%d" y="%d">bindery strip</text>`+"\n", lx+12, readTop+42, lx+12, readTop+58, lx+30, readTop+54)
	fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="4" fill="#d62728"/><text x="%d" y="%d">cache break</text>`+"\n", lx+12, readTop+70, lx+30, readTop+74)
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
