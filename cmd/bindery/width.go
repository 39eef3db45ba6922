package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// width is how many columns the CLI's text may use on w: the terminal's
// width when w is one that is wider than 80, else 80 ($COLUMNS overrides
// both), so nothing wraps in an 80-column terminal or a pager.
func width(w io.Writer) int {
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
		return c
	}
	if f, ok := w.(*os.File); ok {
		if n := terminalWidth(f); n > 80 {
			return n
		}
	}
	return 80
}

// clipLeft keeps the end of s within n columns, marking the cut with "…"
// (a path's last folders say most).
func clipLeft(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return "…" + string(r[len(r)-(n-1):])
}

// fitTable lays rows out (the first is the header) with tabwriter as the
// tables always were (right-aligned, pad spaces apart) and, while a line
// is wider than cols, drops a column: the drop indices say which, least
// telling first. The id column is never in drop, so what is printed can
// still be pasted back; cols is width(w).
func fitTable(rows [][]string, pad, cols int, drop ...int) string {
	gone := map[int]bool{}
	for {
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, pad, ' ', tabwriter.AlignRight)
		for _, r := range rows {
			for i, c := range r {
				if !gone[i] {
					tw.Write([]byte(c + "\t"))
				}
			}
			tw.Write([]byte("\n"))
		}
		tw.Flush()
		out := b.String()
		if len(drop) == 0 || maxLineWidth(out) <= cols {
			return out
		}
		gone[drop[0]], drop = true, drop[1:]
	}
}

// maxLineWidth is the widest line of s, in columns (runes).
func maxLineWidth(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}

// wrapText breaks each line of s longer than n columns at spaces, the
// continuation indented by indent: help and error messages then fit an
// 80-column terminal whatever their length. A word longer than the line
// (a path) stays whole.
func wrapText(s string, n int, indent string) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteString("\n")
		}
		lead := line[:len(line)-len(strings.TrimLeft(line, " "))]
		cont := lead + indent
		cur := ""
		for _, w := range strings.Fields(line) {
			switch {
			case cur == "":
				cur = lead + w
			case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > n:
				b.WriteString(cur + "\n")
				cur = cont + w
			default:
				cur += " " + w
			}
		}
		b.WriteString(cur)
	}
	return b.String()
}
