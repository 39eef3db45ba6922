package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/my-pi/bindery/api"
)

// whatifText renders a replay as the terminal tables `bindery whatif`
// prints: the archive (or the one session) per policy, then one line per
// session with its calibration and each policy's difference in spend.
func whatifText(w api.WhatIf) string {
	var b strings.Builder
	if w.Scope == "session" && len(w.Sessions) == 1 {
		s := w.Sessions[0]
		fmt.Fprintf(&b, "bindery whatif: session %s", s.Session)
		if s.Model != "" {
			fmt.Fprintf(&b, " (%s)", s.Model)
		}
		fmt.Fprintf(&b, ", %s replayed\n", plural(s.Requests, "request", "requests"))
	} else {
		fmt.Fprintf(&b, "bindery whatif: archive of %s, %d calibrated\n", plural(len(w.Sessions), "session", "sessions"), w.Calibrated)
	}
	fmt.Fprintf(&b, "keep-last keeps the last %d turns' thinking; spend: calibrated sessions only\n\n", w.Keep)

	rows := w.Archive
	if w.Scope == "session" && len(w.Sessions) == 1 {
		rows = w.Sessions[0].Policies
		c := w.Sessions[0].Calibration
		if !c.OK {
			fmt.Fprintf(&b, "NOT CALIBRATED: %s\n", c.Reason)
		}
		fmt.Fprintf(&b, "the replay took %s as recorded and predicted %s\n\n",
			plural(c.AsRecorded, "cache loss", "cache losses"), plural(c.Expired, "idle expiry", "idle expiries"))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\tspend\tvs recorded\twrite\tread\tthinking\tbreaks\t\n")
	for i, p := range rows {
		vs := "-"
		if i > 0 {
			vs = deltaMoney(p.Delta.Spend, rows[0].Spend)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", p.Policy, optMoney(p.Spend), vs, tok(p.CacheWrite), tok(p.CacheRead), p.ThinkingRead, p.Breaks)
	}
	tw.Flush()
	b.WriteString("(write, read: cache tokens; thinking: blocks read, summed over requests)\n")

	if len(w.Sessions) == 0 {
		return b.String()
	}
	ids := make([]string, len(w.Sessions))
	for i, s := range w.Sessions {
		ids[i] = s.Session
	}
	short := api.ShortIDs(ids)
	b.WriteString("\nper session: the as-recorded replay's error against the cache read and write\npi recorded (read%, write%), its spend, and each policy against it\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.AlignRight)
	head := "session\treqs\tread%\twrite%\trecorded\t"
	if len(w.Policies) > 1 {
		for _, p := range w.Policies[1:] {
			head += strings.Replace(p, api.PolicyKeepLast+"-", "keep-", 1) + "\t"
		}
	}
	fmt.Fprintln(tw, head)
	n := min(len(w.Sessions), 20)
	for _, s := range w.Sessions[:n] {
		c := s.Calibration
		line := fmt.Sprintf("%s\t%d\t%s\t%s\t", short[s.Session], s.Requests, errPct(c.ReadError), errPct(c.WriteError))
		if !c.OK {
			line += "unpriced\t"
			for range s.Policies[1:] {
				line += "-\t"
			}
		} else {
			line += optMoney(s.Policies[0].Spend) + "\t"
			for _, p := range s.Policies[1:] {
				line += deltaPct(p.Delta.Spend, s.Policies[0].Spend) + "\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	if n < len(w.Sessions) {
		fmt.Fprintf(&b, "... and %d more (--json lists every session)\n", len(w.Sessions)-n)
	}
	if w.Uncalibrated > 0 {
		fmt.Fprintf(&b, "%d not calibrated: the replay missed pi's cache tokens by over %.0f%%: not priced\n",
			w.Uncalibrated, 100*api.CalibrationTolerance)
	}
	return b.String()
}

// deltaMoney prints a difference in spend, with its share of base when
// known: "+$4.93 (+11.6%)".
func deltaMoney(d, base *float64) string {
	if d == nil {
		return "unknown"
	}
	s := money(*d)
	if *d >= 0 {
		s = "+" + s
	}
	if base != nil && *base > 0 {
		s += fmt.Sprintf(" (%+.1f%%)", 100**d / *base)
	}
	return s
}

func errPct(e float64) string {
	if e > 10 {
		return ">1000%"
	}
	return fmt.Sprintf("%.2f%%", 100*e)
}

// deltaPct prints a difference in spend as a share of base: "+12.5%".
func deltaPct(d, base *float64) string {
	switch {
	case d == nil || base == nil:
		return "unknown"
	case *base == 0 && *d == 0:
		return "0.0%"
	case *base == 0:
		return "+" + money(*d)
	}
	return fmt.Sprintf("%+.1f%%", 100**d / *base)
}
