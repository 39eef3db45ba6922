package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/my-pi/bindery/api"
)

// `bindery report --shared`: the team's report (GET /v1/report/team), as
// a table, as JSON and as a chart of each day's spend stacked by machine.
// Money is integer micro-USD on the wire (the lines add up to the total
// exactly); the table shows dollars and cents.

// usdMicro shows micro-USD as money does USD.
func usdMicro(v int64) string { return money(float64(v) / 1e6) }

// teamText is the team report as the terminal shows it, every line within
// 80 columns: the total, then a table per grouping.
func teamText(r api.TeamReport) string {
	var b strings.Builder
	span := "every day"
	switch {
	case r.Since != "" && r.Until != "":
		span = r.Since + " to " + r.Until
	case r.Since != "":
		span = "since " + r.Since
	case r.Until != "":
		span = "until " + r.Until
	}
	t := r.Total
	fmt.Fprintf(&b, "team report: %s, %s\n", clip(r.Shared, 50), span)
	fmt.Fprintf(&b, "  %s over %s (%d errored), %d machines, %d people\n", usdMicro(t.Spend.Total), plural(int(t.Requests), "request", "requests"), t.Errored, len(r.Machines), len(r.People))
	fmt.Fprintf(&b, "  spend: input %s, output %s, cache write %s, cache read %s", usdMicro(t.Spend.Input), usdMicro(t.Spend.Output), usdMicro(t.Spend.CacheWrite), usdMicro(t.Spend.CacheRead))
	if t.Spend.Other != 0 {
		fmt.Fprintf(&b, ", as totals %s", usdMicro(t.Spend.Other))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  cache: %s read, %s written, hit ratio %.1f%%\n", tok(t.CacheRead), tok(t.CacheWrite), 100*t.HitRatio)
	fmt.Fprintf(&b, "  breaks: %d, %s tokens rewritten, cost %s, avoidable %s\n", t.Breaks.Count, tok(t.Breaks.Rewritten), usdMicro(t.Breaks.Cost), usdMicro(t.Breaks.Avoidable))
	if t.Unpriced > 0 {
		fmt.Fprintf(&b, "  %s with no known price (tokens counted, spend not)\n", plural(int(t.Unpriced), "request", "requests"))
	}
	for _, g := range []struct {
		title string
		lines []api.TeamLine
	}{{"MACHINE", r.Machines}, {"PERSON", r.People}, {"CLIENT", r.Clients}, {"MODEL", r.Models}, {"DAY", r.Days}} {
		b.WriteString("\n")
		fmt.Fprintf(&b, "%-24s %9s %11s %6s %7s %11s\n", g.title, "REQUESTS", "SPEND", "HIT", "BREAKS", "AVOIDABLE")
		for _, l := range g.lines {
			fmt.Fprintf(&b, "%-24s %9d %11s %5.1f%% %7d %11s\n", clip(l.Name, 24), l.Requests, usdMicro(l.Spend.Total), 100*l.HitRatio, l.Breaks.Count, usdMicro(l.Breaks.Avoidable))
		}
		if len(g.lines) == 0 {
			b.WriteString("(none)\n")
		}
	}
	return b.String()
}

// Team chart ids, stable for tools and tests.
const (
	SeriesTeamDays = "series-team-days" // one <g> per day, a rect per machine
)

var machineColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8"}

// teamSVG draws the team's spend per UTC day, stacked by machine (the
// nine costliest, the rest as "other machines"), each day's avoidable
// spend hatched on top of its bar.
func teamSVG(r api.TeamReport) []byte {
	var b bytes.Buffer
	// machines by spend: r.Machines is sorted so
	const shown = 9
	color := map[string]string{}
	var legend []string
	for i, m := range r.Machines {
		if i < shown {
			color[m.Name] = machineColors[i]
			legend = append(legend, m.Name)
		}
	}
	other := len(r.Machines) > shown
	type bar struct {
		parts     map[string]int64
		total     int64
		avoidable int64
	}
	bars := map[string]*bar{}
	for _, c := range r.DayMachines {
		br := bars[c.Day]
		if br == nil {
			br = &bar{parts: map[string]int64{}}
			bars[c.Day] = br
		}
		k := c.Machine
		if _, ok := color[k]; !ok {
			k = ""
		}
		br.parts[k] += c.Spend.Total
		br.total += c.Spend.Total
		br.avoidable += c.Breaks.Avoidable
	}
	days := make([]string, 0, len(bars))
	var top int64
	for d, br := range bars {
		days = append(days, d)
		top = max(top, br.total)
	}
	sort.Strings(days)
	ceil := niceCeilF(float64(top) / 1e6)
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
	title := fmt.Sprintf("team spend per day: %s, %s", plural(len(r.Machines), "machine", "machines"), plural(len(r.People), "person", "people"))
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(title))
	fmt.Fprintf(&b, `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="3"/></pattern></defs>`+"\n")
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", marginLeft, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s total over %s, %s avoidable (%d breaks), %d days</text>`+"\n",
		marginLeft, usdMicro(r.Total.Spend.Total), plural(int(r.Total.Requests), "request", "requests"), usdMicro(r.Total.Breaks.Avoidable), r.Total.Breaks.Count, len(days))

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

	order := append(append([]string{}, legend...), "")
	avoidable := false
	fmt.Fprintf(&b, `<g id="%s">`+"\n", SeriesTeamDays)
	for i, d := range days {
		br := bars[d]
		x0 := marginLeft + slot*float64(i) + (slot-barW)/2
		tip := fmt.Sprintf("%s: %s", d, usdMicro(br.total))
		for _, m := range order {
			if v := br.parts[m]; v > 0 {
				tip += fmt.Sprintf(", %s %s", cmp(m, "other machines"), usdMicro(v))
			}
		}
		if br.avoidable > 0 {
			tip += fmt.Sprintf(" (avoidable %s)", usdMicro(br.avoidable))
		}
		fmt.Fprintf(&b, `<g><title>%s</title>`, esc(tip))
		base := 0.0
		for _, m := range order {
			v := float64(br.parts[m]) / 1e6
			if v <= 0 {
				continue
			}
			fill := color[m]
			if m == "" {
				fill = "#c7c7c7"
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x0, y(base+v), barW, y(base)-y(base+v), fill)
			base += v
		}
		if br.avoidable > 0 {
			// The avoidable excess is part of the day's spend: hatched over
			// the top of the bar.
			a := min(float64(br.avoidable)/1e6, base)
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch)" stroke="#d62728"/>`,
				MarksAvoidable, x0, y(base), barW, y(base-a)-y(base))
			avoidable = true
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</g>\n")

	dayAxis(&b, days, slot, plotW, bottom)

	lx, ly := chartW-marginRight+14, plotTop+10
	fmt.Fprintf(&b, `<g id="%s">`+"\n", ChartLegend)
	for _, m := range legend {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-7, color[m], lx+20, ly+4, esc(clip(m, 20)))
		ly += 20
	}
	if other {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="#c7c7c7"/><text x="%d" y="%d">other machines</text>`+"\n", lx, ly-7, lx+20, ly+4)
		ly += 20
	}
	if avoidable {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="14" fill="url(#hatch)" stroke="#d62728"/><text x="%d" y="%d">avoidable</text>`+"\n", lx, ly-7, lx+20, ly+4)
	}
	if len(days) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">no spend shipped yet</text>`+"\n", marginLeft+plotW/2, plotTop+plotH/2)
	}
	b.WriteString("</g>\n</svg>\n")
	return b.Bytes()
}

// cmp is s, or alt when s is "".
func cmp(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
