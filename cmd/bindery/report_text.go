package main

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
)

// Text renders a report as the terminal table `bindery report` prints.
func reportText(r api.Report) string {
	var b strings.Builder
	f := r.Figures
	if r.Scope == "session" {
		// The id and the model, then the span on a line of its own: the
		// two timestamps made the first line 132 columns.
		title, span := "bindery report: session "+r.Session, ""
		if r.Model != "" {
			if m := " (" + r.Model + ")"; utf8.RuneCountInString(title+m) <= textWidth {
				title += m
			} else {
				span = r.Model
			}
		}
		if r.First != "" {
			if span != "" {
				span += ", "
			}
			span += fmt.Sprintf("from %s to %s", when(r.First), when(r.Last))
		}
		b.WriteString(title + "\n")
		if span != "" {
			b.WriteString(span + "\n")
		}
		if len(r.SameID) > 1 {
			fmt.Fprintf(&b, "%d files carry this session id; reporting the first (live, latest activity):\n", len(r.SameID))
			for _, f := range r.SameID {
				state := "live"
				if f.Removed {
					state = "removed"
				}
				fmt.Fprintf(&b, "  %s (%s, last activity %s)\n", f.File, state, when(f.LastActivity))
			}
		}
		b.WriteString("\n")
	} else {
		fmt.Fprintf(&b, "bindery report: archive of %d sessions\n\n", f.Sessions)
	}
	// Session ids print as prefixes unique among the report's sessions
	// (api.ShortIDs), which bindery report --session and show take back.
	var ids []string
	for _, l := range r.Sessions {
		ids = append(ids, l.Session)
	}
	for _, x := range r.Breaks {
		ids = append(ids, x.Session)
	}
	prefixes := api.ShortIDs(ids)
	short := func(id string) string { return prefixes[id] }
	// Each figure is a label and phrases; a row packs its phrases into
	// lines of at most textWidth columns, so nothing wraps in an 80-column
	// terminal however large the figures grow.
	row := func(label string, phrases ...string) { writeRow(&b, label, phrases) }
	q := f.Requests
	row("requests", fmt.Sprintf("%d total: %d turns (%d tool loops)", q.Total, q.Turns, q.ToolLoops),
		fmt.Sprintf("%d errored", q.Errored), fmt.Sprintf("%d aborted", q.Aborted))
	if q.UsageMissing > 0 || q.OffBranch > 0 {
		row("", fmt.Sprintf("%d without full usage", q.UsageMissing), fmt.Sprintf("%d off the current branch (not counted)", q.OffBranch))
	}
	c := f.Cycles
	row("cycles", fmt.Sprintf("%d (%d closed, %d open)", c.Count, c.Closed, c.Open), fmt.Sprintf("length median %d, p90 %d turns", c.Median, c.P90),
		fmt.Sprintf("> 16 turns: %d (%s)", c.Over16, pct(c.Over16, c.Count)), fmt.Sprintf("> 130 turns: %d (%s)", c.Over130, pct(c.Over130, c.Count)),
		fmt.Sprintf("most thinking in one cycle ~%s tok", tok(c.MaxThinking)))
	t := f.Thinking
	row("thinking", fmt.Sprintf("closed cycles %d blocks ~%s tok", t.Closed.Blocks, tok(t.Closed.Tokens)),
		fmt.Sprintf("open cycle %d blocks ~%s tok", t.Open.Blocks, tok(t.Open.Tokens)))
	row("", fmt.Sprintf("in prompts: billed ~%s tok (%.1f%% of prompt)", tok(t.Billed), 100*t.Share), fmt.Sprintf("dropped free ~%s tok", tok(t.Free)))
	row("", fmt.Sprintf("requests by regime: keep-all %d", t.KeepAll), fmt.Sprintf("last-turn-only %d", t.LastTurnOnly), fmt.Sprintf("unknown %d", t.Unknown))
	k := f.Cache
	row("cache", fmt.Sprintf("read %s", tok(k.Read)), fmt.Sprintf("write %s", tok(k.Write)), fmt.Sprintf("uncached %s", tok(k.Input)),
		fmt.Sprintf("output %s", tok(k.Output)), fmt.Sprintf("hit ratio %.1f%%", 100*k.HitRatio))
	row("", fmt.Sprintf("per turn: read %s", tok(int64(k.ReadPerReq))), fmt.Sprintf("write %s", tok(int64(k.WritePerReq))), fmt.Sprintf("uncached %s", tok(int64(k.InputPerReq))))
	tot := []string{money(f.Total) + " total =", "requests " + money(f.Spend.Total)}
	if f.Apart.Requests > 0 {
		tot = append(tot, "+ errored/aborted "+money(f.Apart.Spend.Total))
	}
	if f.Warm.Entries > 0 {
		tot = append(tot, "+ cache warm "+money(f.Warm.Spend.Total))
	}
	if f.OtherUsage.Entries > 0 {
		tot = append(tot, "+ other usage "+money(f.OtherUsage.Spend.Total))
	}
	if f.TotalUnpriced > 0 {
		tot = append(tot, fmt.Sprintf("(%d without a price, not in it)", f.TotalUnpriced))
	}
	row("spend", tot...)
	s := f.Spend
	spend := []string{"requests " + money(s.Total) + " =", "input " + money(s.Input), "+ output " + money(s.Output), "+ cache write " + money(s.CacheWrite),
		"+ cache read " + money(s.CacheRead)}
	if s.Unsplit != 0 {
		spend = append(spend, "+ "+money(s.Unsplit)+" priced by pi as a total only")
	}
	row("", spend...)
	row("", append([]string{fmt.Sprintf("priced by pi %d", s.FromPi), fmt.Sprintf("by table %d", s.FromTable), fmt.Sprintf("unknown price %d", s.Unpriced)}, noPrice(s.UnpricedModels)...)...)
	a := f.Apart
	if a.Requests > 0 {
		row("apart", append([]string{fmt.Sprintf("%d errored/aborted", a.Requests), money(a.Spend.Total)}, noPrice(a.Spend.UnpricedModels)...)...)
		row("", fmt.Sprintf("read %s", tok(a.Read)), fmt.Sprintf("write %s", tok(a.Write)), fmt.Sprintf("uncached %s", tok(a.Input)), fmt.Sprintf("output %s", tok(a.Output)))
	}
	for _, l := range []struct {
		name string
		u    api.UsageLine
	}{{"cache warm", f.Warm}, {"other usage", f.OtherUsage}} {
		if l.u.Entries > 0 {
			what := plural(l.u.Entries, "entry", "entries")
			if len(l.u.Kinds) > 0 {
				what += " (" + strings.Join(l.u.Kinds, ", ") + ")"
			}
			row(l.name, append([]string{what + ": " + money(l.u.Spend.Total)}, noPrice(l.u.Spend.UnpricedModels)...)...)
			row("", fmt.Sprintf("read %s", tok(l.u.Read)), fmt.Sprintf("write %s (1h %s)", tok(l.u.Write), tok(l.u.Write1h)),
				fmt.Sprintf("uncached %s", tok(l.u.Input)), fmt.Sprintf("output %s", tok(l.u.Output)))
		}
	}
	br := f.Breaks
	brk := []string{fmt.Sprintf("%d: %s tok rewritten", br.Count, tok(br.Rewritten)), fmt.Sprintf("cost %s (%s above reading it)", money(br.Cost), money(br.Excess)),
		fmt.Sprintf("avoidable %s (strip, host, unknown)", money(br.Avoidable))}
	if br.Unpriced > 0 {
		brk = append(brk, fmt.Sprintf("%d unpriced", br.Unpriced))
	}
	row("breaks", brk...)
	for _, cause := range api.Causes {
		if ct, ok := br.ByCause[cause]; ok {
			row("", fmt.Sprintf("  %s: %d", cause, ct.Count), fmt.Sprintf("%s tok", tok(ct.Rewritten)), money(ct.Cost))
		}
	}
	d := f.Bindery
	row("bindery", fmt.Sprintf("%d compiles", d.Compiles), fmt.Sprintf("%d stripped blocks ~%s tok", sumInts(d.Strips), tok(d.StrippedTokens)))
	if len(d.Strips) > 0 {
		row("", append([]string{"by reason:"}, reasons(d.Strips)...)...)
	}
	row("", fmt.Sprintf("strip cache cost %s", money(d.CacheCost)), fmt.Sprintf("400s avoided %d (%d refused blocks)", d.RequestsRescued, d.RefusalsAvoided))

	if len(r.Breaks) > 0 {
		if r.Scope == "session" {
			fmt.Fprintf(&b, "\ncache breaks (left: what the request before left cached)\n")
		} else {
			fmt.Fprintf(&b, "\ncache breaks, costliest %d of %d (left: what the request before left)\n", len(r.Breaks), len(r.Breaks)+r.BreaksOmitted)
		}
		var rows [][]string
		if r.Scope == "session" {
			rows = append(rows, []string{"req", "line", "cyc.turn", "left", "read", "rewrote", "cost", "cause"})
		} else {
			rows = append(rows, []string{"session", "req", "cyc.turn", "left", "read", "rewrote", "cost", "cause"})
		}
		for _, x := range r.Breaks {
			first := fmt.Sprint(x.Line)
			if r.Scope != "session" {
				first = short(x.Session)
			}
			cells := []string{fmt.Sprint(x.Request), first}
			if r.Scope != "session" {
				cells = []string{first, fmt.Sprint(x.Request)}
			}
			rows = append(rows, append(cells, fmt.Sprintf("%d.%d", x.Cycle, x.Turn), tok(x.Left), tok(x.ReadAfter), tok(x.Rewritten), optMoney(x.Cost), x.Cause))
		}
		// Too wide (a long id): cyc.turn, then left and read go first.
		b.WriteString(fitTable(rows, 2, textWidth, 2, 3, 4))
	}
	// Sessions that made no request and cost nothing (pi started and quit,
	// or a file deleted before its first reply) are $0.00 rows that say
	// nothing: counted, not listed.
	var listed []api.SessionLine
	for _, l := range r.Sessions {
		if l.Requests > 0 || l.Spend != 0 || l.Unpriced > 0 {
			listed = append(listed, l)
		}
	}
	if r.Scope == "archive" && len(listed) > 0 {
		n := min(10, len(listed))
		fmt.Fprintf(&b, "\ntop %d of %s by spend (a session's spend is its report's total)\n", n, plural(len(listed), "session", "sessions"))
		rows := [][]string{{"session", "model", "reqs", "cycles", "breaks", "hit", "avoid", "spend"}}
		unpriced := false
		for _, l := range listed[:n] {
			sp := money(l.Spend)
			if l.Unpriced > 0 {
				sp += "*"
				unpriced = true
			}
			rows = append(rows, []string{short(l.Session), clip(strings.TrimPrefix(l.Model, "claude-"), 14), fmt.Sprint(l.Requests), fmt.Sprint(l.Cycles),
				fmt.Sprint(l.Breaks), fmt.Sprintf("%.0f%%", 100*l.HitRatio), money(l.Avoidable), sp})
		}
		// Too wide (a long id): cycles, breaks, hit go first.
		b.WriteString(fitTable(rows, 2, textWidth, 3, 4, 5))
		if unpriced {
			b.WriteString("* and requests without a price (bindery report --session ID lists them)\n")
		}
		if k := len(r.Sessions) - len(listed); k > 0 {
			fmt.Fprintf(&b, "(and %s without a request, not listed)\n", plural(k, "session", "sessions"))
		}
	}
	if r.Scope == "archive" && r.Hosts != nil {
		hostsText(&b, r)
	}
	return b.String()
}

// hostsText is the report's section for the conversations of bindery proxy
// and other hosts: their replies' usage as the accepts carried it.
func hostsText(b *strings.Builder, r api.Report) {
	h := r.Hosts
	u := h.Usage
	fmt.Fprintf(b, "\nbindery proxy and other hosts: %s, %s\n", plural(len(h.Conversations), "conversation", "conversations"), plural(u.Entries, "reply", "replies"))
	row := func(label string, phrases ...string) { writeRow(b, label, phrases) }
	hit := 0.0
	if in := u.Input + u.Read + u.Write; in > 0 {
		hit = float64(u.Read) / float64(in)
	}
	row("cache", fmt.Sprintf("read %s", tok(u.Read)), fmt.Sprintf("write %s (1h %s)", tok(u.Write), tok(u.Write1h)), fmt.Sprintf("uncached %s", tok(u.Input)),
		fmt.Sprintf("output %s", tok(u.Output)), fmt.Sprintf("hit ratio %.1f%%", 100*hit))
	sp := u.Spend
	tot := []string{money(h.Total) + " total =", "input " + money(sp.Input), "+ output " + money(sp.Output), "+ cache write " + money(sp.CacheWrite),
		"+ cache read " + money(sp.CacheRead)}
	if h.Unpriced > 0 {
		tot = append(tot, fmt.Sprintf("(%d without a price, not in it)", h.Unpriced))
	}
	row("spend", tot...)
	if len(sp.UnpricedModels) > 0 {
		row("", noPrice(sp.UnpricedModels)...)
	}
	if h.UsageMissing > 0 {
		row("", fmt.Sprintf("%d replies without full usage", h.UsageMissing))
	}
	row("all", money(r.GrandTotal)+" with pi's sessions")
	n := min(10, len(h.Conversations))
	fmt.Fprintf(b, "\ntop %d of %s by spend\n", n, plural(len(h.Conversations), "conversation", "conversations"))
	rows := [][]string{{"conversation", "model", "replies", "hit", "spend"}}
	unpriced := false
	for _, l := range h.Conversations[:n] {
		spend := money(l.Total)
		if l.Unpriced > 0 {
			spend += "*"
			unpriced = true
		}
		model := strings.TrimPrefix(strings.Join(l.Models, ","), "claude-")
		rows = append(rows, []string{clip(l.Conversation, 36), clip(model, 16), fmt.Sprint(l.Usage.Entries), fmt.Sprintf("%.0f%%", 100*l.HitRatio), spend})
	}
	b.WriteString(fitTable(rows, 2, textWidth, 3, 1))
	if unpriced {
		b.WriteString("* and replies without a price\n")
	}
}

// clip keeps the first n bytes of s, marking a cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func pct(n, of int) string {
	if of == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// tok prints a token count compactly: 950, 12.3k, 4.56M, 14.53G, 1.20T.
func tok(n int64) string {
	switch {
	case n < 0:
		return "-" + tok(-n)
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n < 1_000_000_000_000:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	default:
		return fmt.Sprintf("%.2fT", float64(n)/1e12)
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

// noPrice names the models without a price, one phrase each.
func noPrice(ms []string) []string {
	if len(ms) == 0 {
		return nil
	}
	out := []string{"no price for " + ms[0]}
	return append(out, ms[1:]...)
}

// textWidth is the widest line Text writes (an 80-column terminal).
const textWidth = 80

// writeRow writes a label (in a 10-column margin) and its phrases,
// separated by commas, packed into lines of at most textWidth columns; a
// phrase longer than a line gets one of its own.
func writeRow(b *strings.Builder, label string, phrases []string) {
	const margin = 10
	line := fmt.Sprintf("%-*s", margin, label)
	if len(label) >= margin-1 {
		line = label + " " // a long label ("cache warm") still reads apart
	}
	n := 0 // phrases on the line
	for i, p := range phrases {
		sep := ", "
		if n == 0 {
			sep = ""
		} else if strings.HasPrefix(p, "+ ") || strings.HasSuffix(phrases[i-1], "=") || strings.HasSuffix(phrases[i-1], ":") {
			sep = " " // a sum and a list read on without commas
		}
		tail := ","
		if i == len(phrases)-1 {
			tail = ""
		}
		if n > 0 && utf8.RuneCountInString(line+sep+p+tail) > textWidth {
			b.WriteString(strings.TrimRight(line, " ") + strings.TrimSuffix(sep, " ") + "\n")
			line, n, sep = strings.Repeat(" ", margin), 0, ""
		}
		line += sep + p
		n++
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func reasons(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return parts
}
