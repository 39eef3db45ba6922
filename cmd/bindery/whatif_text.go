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
	if len(w.Sessions) == 0 {
		// A header over no rows reads as a fault; say why there are none.
		return "bindery whatif: no session to replay yet (no pi session with requests\n" +
			"on its current branch; bindery sessions lists what bindery has seen)\n"
	}
	if w.Scope == "session" && len(w.Sessions) == 1 {
		s := w.Sessions[0]
		fmt.Fprintf(&b, "bindery whatif: session %s", s.Session)
		if s.Model != "" {
			fmt.Fprintf(&b, " (%s)", s.Model)
		}
		fmt.Fprintf(&b, "\n%s replayed\n", plural(s.Requests, "request", "requests"))
	} else {
		fmt.Fprintf(&b, "bindery whatif: archive of %s, %d calibrated\n", plural(len(w.Sessions), "session", "sessions"), w.Calibrated)
	}
	fmt.Fprintf(&b, "keep-last keeps the last %d turns' thinking; spend: calibrated sessions only\n", w.Keep)
	// Named here because the two are read side by side (issue 32).
	b.WriteString("Not bindery report's figures: only requests with full cache usage are\n" +
		"replayed, and usage entries (cache warms) are not in the spend.\n\n")

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
	// Session ids print as given: whatifCmd has made them prefixes unique
	// among every session the daemon knows (a prefix unique among these
	// rows alone may name several).
	b.WriteString("\nper session: the as-recorded replay's error against the cache read and write\npi recorded (read%, write%), its spend, and each policy against it\n")
	head := []string{"session", "reqs", "read%", "write%", "recorded"}
	if len(w.Policies) > 1 {
		for _, p := range w.Policies[1:] {
			head = append(head, strings.Replace(p, api.PolicyKeepLast+"-", "keep-", 1))
		}
	}
	table := [][]string{head}
	// As in bindery report: a session with no request replayed is not a row.
	var listed []api.WhatIfSession
	for _, s := range w.Sessions {
		if s.Requests > 0 {
			listed = append(listed, s)
		}
	}
	n := min(len(listed), 20)
	for _, s := range listed[:n] {
		c := s.Calibration
		line := []string{s.Session, fmt.Sprint(s.Requests), errPct(c.ReadError), errPct(c.WriteError)}
		if !c.OK {
			line = append(line, "unpriced")
			for range s.Policies[1:] {
				line = append(line, "-")
			}
		} else {
			line = append(line, optMoney(s.Policies[0].Spend))
			for _, p := range s.Policies[1:] {
				line = append(line, deltaPct(p.Delta.Spend, s.Policies[0].Spend))
			}
		}
		table = append(table, line)
	}
	// Too wide (a long id): reqs, then the calibration errors go first.
	b.WriteString(fitTable(table, 1, textWidth, 1, 2, 3))
	if n < len(listed) {
		fmt.Fprintf(&b, "... and %d more (--json lists every session)\n", len(listed)-n)
	}
	if k := len(w.Sessions) - len(listed); k > 0 {
		fmt.Fprintf(&b, "(and %s without a request to replay, not listed)\n", plural(k, "session", "sessions"))
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
