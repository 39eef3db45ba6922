package main

import (
	"io"
	"os"
	"strconv"
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
