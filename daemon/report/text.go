package report

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
)

// Text renders a report as the terminal table `bindery report` prints.
func Text(r Report) string {
	var b strings.Builder
	f := r.Figures
	if r.Scope == "session" {
		fmt.Fprintf(&b, "bindery report: session %s", r.Session)
		if r.Model != "" {
			fmt.Fprintf(&b, " (%s)", r.Model)
		}
		if r.First != "" {
			fmt.Fprintf(&b, ", %s to %s", r.First, r.Last)
		}
		b.WriteString("\n")
		if len(r.SameID) > 1 {
			fmt.Fprintf(&b, "%d files carry this session id; reporting the first (live, latest activity):\n", len(r.SameID))
			for _, f := range r.SameID {
				state := "live"
				if f.Removed {
					state = "removed"
				}
				fmt.Fprintf(&b, "  %s (%s, last activity %s)\n", f.File, state, f.LastActivity)
			}
		}
		b.WriteString("\n")
	} else {
		fmt.Fprintf(&b, "bindery report: archive of %d sessions\n\n", f.Sessions)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	q := f.Requests
	row("requests", "%d total: %d turns (%d tool loops), %d errored, %d aborted", q.Total, q.Turns, q.ToolLoops, q.Errored, q.Aborted)
	if q.UsageMissing > 0 || q.OffBranch > 0 {
		row("", "%d without full usage, %d off the current branch (not counted)", q.UsageMissing, q.OffBranch)
	}
	c := f.Cycles
	row("cycles", "%d (%d closed, %d open); length median %d, p90 %d turns", c.Count, c.Closed, c.Open, c.Median, c.P90)
	row("", "> 16 turns: %d (%s); > 130 turns: %d (%s); most thinking in one cycle ~%s tok", c.Over16, pct(c.Over16, c.Count), c.Over130, pct(c.Over130, c.Count), tok(c.MaxThinking))
	t := f.Thinking
	row("thinking", "closed cycles %d blocks ~%s tok; open cycle %d blocks ~%s tok", t.Closed.Blocks, tok(t.Closed.Tokens), t.Open.Blocks, tok(t.Open.Tokens))
	row("", "in prompts: billed ~%s tok (%.1f%% of prompt tokens), dropped free ~%s tok", tok(t.Billed), 100*t.Share, tok(t.Free))
	row("", "requests by regime: keep-all %d, last-turn-only %d, unknown %d", t.KeepAll, t.LastTurnOnly, t.Unknown)
	k := f.Cache
	row("cache", "read %s, write %s, uncached %s, output %s; hit ratio %.1f%%", tok(k.Read), tok(k.Write), tok(k.Input), tok(k.Output), 100*k.HitRatio)
	row("", "per turn: read %s, write %s, uncached %s", tok(int64(k.ReadPerReq)), tok(int64(k.WritePerReq)), tok(int64(k.InputPerReq)))
	s := f.Spend
	row("spend", "%s = input %s + output %s + cache write %s + cache read %s%s", money(s.Total), money(s.Input), money(s.Output), money(s.CacheWrite), money(s.CacheRead), unsplit(s))
	row("", "priced by pi %d, by table %d; unknown price %d%s", s.FromPi, s.FromTable, s.Unpriced, models(s.UnpricedModels))
	a := f.Apart
	if a.Requests > 0 {
		row("apart", "%d errored/aborted: read %s, write %s, uncached %s, output %s, %s%s", a.Requests, tok(a.Read), tok(a.Write), tok(a.Input), tok(a.Output), money(a.Spend.Total), models(a.Spend.UnpricedModels))
	}
	for _, l := range []struct {
		name string
		u    UsageLine
	}{{"cache warm", f.Warm}, {"other usage", f.OtherUsage}} {
		if l.u.Entries > 0 {
			row(l.name, "%d %s: read %s, write %s (1h %s), uncached %s, output %s, %s%s", l.u.Entries, strings.Join(append([]string{"entries"}, l.u.Kinds...), " "),
				tok(l.u.Read), tok(l.u.Write), tok(l.u.Write1h), tok(l.u.Input), tok(l.u.Output), money(l.u.Spend.Total), models(l.u.Spend.UnpricedModels))
		}
	}
	br := f.Breaks
	row("breaks", "%d: %s tok rewritten, cost %s (%s above reading it)%s", br.Count, tok(br.Rewritten), money(br.Cost), money(br.Excess), unpricedBreaks(br.Unpriced))
	if len(br.ByCause) > 0 {
		var parts []string
		for _, cause := range []string{CauseStrip, CauseHost, CauseIdle, CauseUnknown} {
			if ct, ok := br.ByCause[cause]; ok {
				parts = append(parts, fmt.Sprintf("%s %d (%s tok, %s)", cause, ct.Count, tok(ct.Rewritten), money(ct.Cost)))
			}
		}
		row("", "by cause: %s", strings.Join(parts, ", "))
	}
	d := f.Bindery
	row("bindery", "%d compiles, %d stripped blocks ~%s tok%s", d.Compiles, sumInts(d.Strips), tok(d.StrippedTokens), reasons(d.Strips))
	row("", "strip cache cost %s; 400s avoided %d (%d refused blocks)", money(d.CacheCost), d.RequestsRescued, d.RefusalsAvoided)
	tw.Flush()

	if len(r.Breaks) > 0 {
		if r.Scope == "session" {
			fmt.Fprintf(&b, "\ncache breaks\n")
		} else {
			fmt.Fprintf(&b, "\ncache breaks, costliest %d of %d\n", len(r.Breaks), len(r.Breaks)+r.BreaksOmitted)
		}
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		if r.Scope == "session" {
			fmt.Fprintf(tw, "request\tline\tcycle.turn\tread before\tread after\trewritten\tcost\tcause\t\n")
		} else {
			fmt.Fprintf(tw, "session\trequest\tcycle.turn\tread before\tread after\trewritten\tcost\tcause\t\n")
		}
		for _, x := range r.Breaks {
			first := fmt.Sprint(x.Line)
			if r.Scope != "session" {
				first = short(x.Session)
			}
			if r.Scope == "session" {
				fmt.Fprintf(tw, "%d\t%s\t%d.%d\t%s\t%s\t%s\t%s\t%s\t\n", x.Request, first, x.Cycle, x.Turn, tok(x.ReadBefore), tok(x.ReadAfter), tok(x.Rewritten), optMoney(x.Cost), x.Cause)
			} else {
				fmt.Fprintf(tw, "%s\t%d\t%d.%d\t%s\t%s\t%s\t%s\t%s\t\n", first, x.Request, x.Cycle, x.Turn, tok(x.ReadBefore), tok(x.ReadAfter), tok(x.Rewritten), optMoney(x.Cost), x.Cause)
			}
		}
		tw.Flush()
	}
	if r.Scope == "archive" && len(r.Sessions) > 0 {
		n := min(10, len(r.Sessions))
		fmt.Fprintf(&b, "\ntop %d sessions by spend\n", n)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "session\tmodel\trequests\tcycles\tbreaks\thit\tspend\t\n")
		for _, l := range r.Sessions[:n] {
			sp := money(l.Spend)
			if l.Unpriced > 0 {
				sp += fmt.Sprintf(" +%d unpriced", l.Unpriced)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f%%\t%s\t\n", short(l.Session), l.Model, l.Requests, l.Cycles, l.Breaks, 100*l.HitRatio, sp)
		}
		tw.Flush()
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func pct(n, of int) string {
	if of == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// tok prints a token count compactly: 950, 12.3k, 4.56M.
func tok(n int64) string {
	switch {
	case n < 0:
		return "-" + tok(-n)
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
}

func money(v float64) string {
	if v != 0 && v < 0.01 && v > -0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func optMoney(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return money(*v)
}

func unsplit(s Spend) string {
	if s.Unsplit == 0 {
		return ""
	}
	return fmt.Sprintf(" + %s priced by pi as a total only", money(s.Unsplit))
}

func unpricedBreaks(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d unpriced", n)
}

func models(ms []string) string {
	if len(ms) == 0 {
		return ""
	}
	return " (no price for " + strings.Join(ms, ", ") + ")"
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func reasons(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
