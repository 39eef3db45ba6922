package main

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/my-pi/bindery/api"
)

// Archive chart ids, stable for tools and tests.
const (
	SeriesDays     = "series-days"     // one <g> per day, a rect per kind
	MarksAvoidable = "marks-avoidable" // the avoidable part of each day
)

// spendKinds are the archive chart's stacked kinds, bottom up.
var spendKinds = []struct {
	label, color string
	of           func(api.Day) float64
}{
	{"output", "#2ca02c", func(d api.Day) float64 { return d.Output }},
	{"cache write", "#ff7f0e", func(d api.Day) float64 { return d.CacheWrite }},
	{"cache read", "#1f77b4", func(d api.Day) float64 { return d.CacheRead }},
	{"input", "#9467bd", func(d api.Day) float64 { return d.Input }},
	{"errored/aborted", "#8c564b", func(d api.Day) float64 { return d.Errors }},
	{"warm, other usage", "#bcbd22", func(d api.Day) float64 { return d.Other }},
	{"priced as total", "#7f7f7f", func(d api.Day) float64 { return d.Unsplit }},
	{"bindery proxy, hosts", "#17becf", func(d api.Day) float64 { return d.Hosts }},
}

// archiveSVG draws an archive report's spend per UTC day, stacked by
// kind (output, cache write, cache read, input, errored and aborted
// replies, cache warms, what pi priced only as a total), with the
// avoidable part of each day (the excess of its strip, host and unknown
// cache breaks, which is inside its cache write) hatched over the cache
// write. Each bar's tooltip lists its kinds.
func archiveSVG(r api.Report) []byte {
	var b bytes.Buffer
	byDay, total := chartDays(r)
	days := make([]string, 0, len(byDay))
	for d := range byDay {
		days = append(days, d)
	}
	sort.Strings(days)
	var top float64
	for _, d := range days {
		top = max(top, byDay[d].Sum())
	}
	ceil := niceCeilF(top)
	const (
		plotTop = 60
		plotH   = 400
		bottom  = plotTop + plotH
	)
	plotW := float64(chartW - marginLeft - marginRight)
	y := func(v float64) float64 { return plotTop + plotH*(1-v/ceil) }
	slot := plotW / float64(max(len(days), 1))
	barW := max(1, min(slot*0.8, 60))

	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	title := fmt.Sprintf("spend per day: archive of %d sessions", r.Figures.Sessions)
	if r.Hosts != nil && len(r.Hosts.Conversations) > 0 {
		title += " and " + plural(len(r.Hosts.Conversations), "host conversation", "host conversations")
	}
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="3"/></pattern></defs>`+"\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", marginLeft, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s total, %s avoidable (%d breaks), %d days</text>`+"\n",
		marginLeft, money(total), money(r.Figures.Breaks.Avoidable), r.Figures.Breaks.Count, len(days))

	b.WriteString(`<g id="y-axis" fill="#333" text-anchor="end">` + "\n")
	for i := 0; i <= 4; i++ {
		v := ceil * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, marginLeft, y(v), chartW-marginRight, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`+"\n", marginLeft-6, y(v)+4, money(v))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, plotTop, marginLeft, bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, bottom, chartW-marginRight, bottom)
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">spend (USD)</text>`+"\n", plotTop+plotH/2, plotTop+plotH/2)
	b.WriteString("</g>\n")

	drawn := map[string]bool{}
	avoidable := false
	fmt.Fprintf(&b, `<g id="%s">`+"\n", SeriesDays)
	for i, d := range days {
		day := byDay[d]
		x0 := marginLeft + slot*float64(i) + (slot-barW)/2
		tip := fmt.Sprintf("%s: %s", d, money(day.Sum()))
		for _, k := range spendKinds {
			if v := k.of(day); v > 0 {
				tip += fmt.Sprintf(", %s %s", k.label, money(v))
			}
		}
		if day.Avoidable > 0 {
			tip += fmt.Sprintf(" (avoidable %s)", money(day.Avoidable))
		}
		fmt.Fprintf(&b, `<g><title>%s</title>`, esc(tip))
		base := 0.0
		for _, k := range spendKinds {
			v := k.of(day)
			if v <= 0 {
				continue
			}
			drawn[k.label] = true
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x0, y(base+v), barW, y(base)-y(base+v), k.color)
			if k.label == "cache write" && day.Avoidable > 0 {
				// The avoidable excess sits inside the cache write.
				a := min(day.Avoidable, v)
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch)" stroke="#d62728"/>`,
					MarksAvoidable, x0, y(base+v), barW, y(base+v-a)-y(base+v))
				avoidable = true
			}
			base += v
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n")

	// Day labels: at most about twelve.
	dayAxis(&b, days, slot, plotW, bottom)

	lx, ly := chartW-marginRight+14, plotTop+10
	fmt.Fprintf(&b, `<g id="%s">`+"\n", ChartLegend)
	for i := len(spendKinds) - 1; i >= 0; i-- { // top of the stack first
		k := spendKinds[i]
		if !drawn[k.label] {
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-7, k.color, lx+20, ly+4, esc(k.label))
		ly += 20
	}
	if avoidable {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="url(#hatch)" stroke="#d62728"/><text x="%d" y="%d">avoidable</text>`+"\n", lx, ly-7, lx+20, ly+4)
	}
	if len(days) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">no priced spend yet</text>`+"\n", marginLeft+plotW/2, plotTop+plotH/2)
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// chartDays is pi's spend per day with the hosts' (bindery proxy's
// conversations) as a kind of its own, and the total they add up to: the
// grand total when there are hosts, pi's otherwise.
func chartDays(r api.Report) (map[string]api.Day, float64) {
	if r.Hosts == nil || len(r.Hosts.Days) == 0 {
		return r.Figures.Days, r.Figures.Total
	}
	out := make(map[string]api.Day, len(r.Figures.Days)+len(r.Hosts.Days))
	for d, v := range r.Figures.Days {
		out[d] = v
	}
	for d, h := range r.Hosts.Days {
		v := out[d]
		v.Hosts += h.Sum()
		out[d] = v
	}
	return out, r.Figures.Total + r.Hosts.Total
}

// dayLabel shortens "2026-12-01" to "12-01" (when every day is of one
// year).
func dayLabel(d string) string {
	if len(d) == 10 {
		return d[5:]
	}
	return d
}

// dayAxis writes a chart's axis of days (YYYY-MM-DD, sorted): at most
// about twelve labels, or eight whole dates when the days cross a year,
// and the axis's title.
func dayAxis(b *bytes.Buffer, days []string, slot, plotW float64, bottom int) {
	b.WriteString(`<g id="x-ticks" fill="#333" text-anchor="middle">` + "\n")
	step := max(1, (len(days)+11)/12)
	years := len(days) > 0 && days[0][:min(4, len(days[0]))] != days[len(days)-1][:min(4, len(days[len(days)-1]))]
	if years {
		step = max(1, (len(days)+7)/8) // a longer label
	}
	for i := 0; i < len(days); i += step {
		cx := marginLeft + slot*(float64(i)+0.5)
		label := days[i]
		if !years {
			label = dayLabel(label)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`+"\n", cx, bottom+18, label)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(b, `<text id="x-label" x="%.1f" y="%d" text-anchor="middle">day (UTC)</text>`+"\n", marginLeft+plotW/2, bottom+42)
}
