package main

import (
	"bytes"
	"fmt"

	"github.com/my-pi/bindery/api"
)

// WhatIf chart ids, stable for tools and tests.
const (
	BarsSpend    = "bars-spend"
	BarsWrite    = "bars-cache-write"
	BarsThinking = "bars-thinking-read"
)

// whatifSVG draws a replay's policies side by side in three panels:
// spend (calibrated sessions), cache write tokens and thinking blocks
// read, a horizontal bar per policy labelled with its value and its
// difference against as-recorded. The one session's figures when the
// replay is of one session, else the archive's.
func whatifSVG(w api.WhatIf) []byte {
	rows := w.Archive
	title := fmt.Sprintf("whatif: archive of %d sessions (%d calibrated), keep-last %d", len(w.Sessions), w.Calibrated, w.Keep)
	if w.Scope == "session" && len(w.Sessions) == 1 {
		rows = w.Sessions[0].Policies
		title = fmt.Sprintf("whatif: session %s, keep-last %d", w.Sessions[0].Session, w.Keep)
		if !w.Sessions[0].Calibration.OK {
			title += " (NOT CALIBRATED: not priced)"
		}
	}
	const (
		labelW = 110
		panelH = 150
		top    = 60
	)
	height := top + 3*(panelH+20) + 10
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, height, chartW, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", chartW, height)
	fmt.Fprintf(&b, `<text x="20" y="28" font-size="15">%s</text>`+"\n", esc(title))
	panels := []struct {
		id, label, color string
		val              func(api.PolicyResult) (float64, bool)
		show             func(api.PolicyResult, api.PolicyResult) string
	}{
		{BarsSpend, "spend (USD)", "#2ca02c", func(p api.PolicyResult) (float64, bool) {
			if p.Spend == nil {
				return 0, false
			}
			return *p.Spend, true
		}, func(p, rec api.PolicyResult) string {
			if p.Spend == nil {
				return "not priced"
			}
			if p.Policy == rec.Policy {
				return money(*p.Spend)
			}
			return money(*p.Spend) + "  " + deltaMoney(p.Delta.Spend, rec.Spend)
		}},
		{BarsWrite, "cache write (tokens)", "#ff7f0e", func(p api.PolicyResult) (float64, bool) { return float64(p.CacheWrite), true },
			func(p, rec api.PolicyResult) string {
				if p.Policy == rec.Policy {
					return tok(p.CacheWrite)
				}
				return fmt.Sprintf("%s  (%s%s)", tok(p.CacheWrite), sign(p.Delta.CacheWrite), tok(p.Delta.CacheWrite))
			}},
		{BarsThinking, "thinking blocks read (summed over requests)", "#9467bd", func(p api.PolicyResult) (float64, bool) { return float64(p.ThinkingRead), true },
			func(p, rec api.PolicyResult) string {
				if p.Policy == rec.Policy {
					return fmt.Sprint(p.ThinkingRead)
				}
				return fmt.Sprintf("%d  (%s%d)", p.ThinkingRead, sign(int64(p.Delta.ThinkingRead)), p.Delta.ThinkingRead)
			}},
	}
	barMax := float64(chartW - labelW - 20 - 230) // room for the value label
	for k, pn := range panels {
		y0 := top + k*(panelH+20)
		fmt.Fprintf(&b, `<g id="%s">`+"\n", pn.id)
		fmt.Fprintf(&b, `<text x="20" y="%d" font-weight="bold">%s</text>`+"\n", y0, esc(pn.label))
		var top float64
		for _, p := range rows {
			if v, ok := pn.val(p); ok {
				top = max(top, v)
			}
		}
		barH := min(24.0, float64(panelH-20)/float64(max(len(rows), 1))-6)
		for i, p := range rows {
			y := float64(y0) + 12 + float64(i)*(barH+6)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, labelW, y+barH/2+4, esc(p.Policy))
			v, ok := pn.val(p)
			wd := 0.0
			if ok && top > 0 {
				wd = barMax * v / top
			}
			rec := rows[0]
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`, labelW+8, y, wd, barH, pn.color, esc(p.Policy), esc(pn.show(p, rec)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", float64(labelW+14)+wd, y+barH/2+4, esc(pn.show(p, rec)))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func sign(n int64) string {
	if n >= 0 {
		return "+"
	}
	return ""
}
