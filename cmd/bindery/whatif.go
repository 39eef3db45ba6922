package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
)

// whatifTimeout bounds a whatif call.
const whatifTimeout = 5 * time.Minute

// whatifCmd is `bindery whatif [--session ID] [--keep N] [--json]
// [--chart FILE.svg|.html]`: the user's own sessions (or one) replayed
// under thinking policies, from GET /v1/whatif (README, "bindery
// whatif").
func whatifCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("whatif", "[--session ID] [--keep N] [--json] [--chart FILE.svg|FILE.html]", stdout, stderr)
	f := cmd.client()
	fs := cmd.fs
	var session, chart string
	var keep int
	fs.StringVar(&session, "session", "", "replay one pi session (its id, or a unique prefix of it) instead of the whole archive")
	fs.IntVar(&keep, "keep", api.DefaultKeepLast, "N of the keep-last policy: the thinking of the last N assistant turns is kept\n(pi-condense's old keepLastTurns)")
	fs.StringVar(&chart, "chart", "", "also write a chart of each policy's spend, cache write and thinking read\nto FILE.svg or FILE.html")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.emptyFlag("session"); err != nil {
		return err
	}
	if keep < 1 || keep > api.MaxKeepLast {
		return cmd.fail("--keep %d: want a whole number of turns from 1 to %d", keep, api.MaxKeepLast)
	}
	ext := strings.ToLower(filepath.Ext(chart))
	if chart != "" && ext != ".svg" && ext != ".html" && ext != ".htm" {
		return cmd.fail("--chart %s: the file must end in .svg or .html", chart)
	}
	c := f.client()
	defer c.Close()
	// A replay is computed on demand, every session afresh (linear in
	// each session's requests times its thinking blocks): more time than
	// the other calls' 30 seconds.
	ctx, cancel := context.WithTimeout(context.Background(), whatifTimeout)
	defer cancel()
	if session != "" {
		var err error
		if session, err = resolveSession(ctx, c, session); err != nil {
			return err
		}
	}
	w, err := c.WhatIf(ctx, api.WhatIfQuery{Session: session, Keep: keep})
	if err != nil {
		return err
	}
	if f.json {
		if err := printJSON(stdout, w); err != nil {
			return err
		}
	} else {
		// Session ids as every table prints them.
		ids := shortIDs{c: c}
		for i := range w.Sessions {
			w.Sessions[i].Session = ids.of(ctx, w.Sessions[i].Session)
		}
		fmt.Fprint(stdout, whatifText(w))
	}
	if chart == "" {
		return nil
	}
	data := whatifSVG(w)
	if ext != ".svg" {
		data = htmlPage("bindery whatif", data, whatifText(w))
	}
	if err := os.WriteFile(chart, data, 0o644); err != nil {
		return fmt.Errorf("whatif: write chart: %w", err)
	}
	fmt.Fprintf(stderr, "chart of %s written to %s\n", plural(len(w.Sessions), "session", "sessions"), chart)
	return nil
}
