package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// reportCmd is `bindery report [--session ID] [--json] [--chart FILE.svg|.html] [--chart-x request|time]`:
// the cache and thinking economics (design/economics.md) from GET
// /v1/report, as a table, as JSON, and as a chart: the archive's spend
// per day, or one session's cache per request.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("report", "[--session ID] [--json] [--chart FILE.svg|FILE.html] [--chart-x request|time]", stdout, stderr)
	f := cmd.client()
	fs := cmd.fs
	var session, chart, chartX string
	fs.StringVar(&session, "session", "", "report one pi session (its id, or a unique prefix of it) instead of the whole archive")
	fs.StringVar(&chart, "chart", "", "also write a chart to FILE.svg or FILE.html: the archive's spend per day by kind\n(avoidable spend marked), or with --session that session's cache read and\nwrite per request (compactions, strips and breaks by cause marked)")
	fs.StringVar(&chartX, "chart-x", "request", "the session chart's x axis: request (its number on the branch) or time\n(idle gaps show as gaps)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.emptyFlag("session"); err != nil {
		return err
	}
	asJSON := f.json
	ext := strings.ToLower(filepath.Ext(chart))
	if chart != "" && ext != ".svg" && ext != ".html" && ext != ".htm" {
		return cmd.fail("--chart %s: the file must end in .svg or .html", chart)
	}
	if chartX != "request" && chartX != "time" {
		return cmd.fail("--chart-x %s: want request or time", chartX)
	}
	c := f.client()
	defer c.Close()
	ctx, cancel := callCtx()
	defer cancel()

	if session != "" {
		var err error
		if session, err = resolveSession(ctx, c, session); err != nil {
			return err
		}
	}
	rep, err := c.Report(ctx, session)
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		if rep.Scope == "session" {
			// The header names the session as every table does.
			ids := shortIDs{c: c}
			rep.Session = ids.of(ctx, rep.Session)
		}
		fmt.Fprint(stdout, reportText(rep))
	}
	if chart == "" {
		return nil
	}
	var svg []byte
	var what, title string
	if rep.Scope == "session" {
		svg = sessionSVG(rep, chartX == "time")
		what = fmt.Sprintf("session %s (%s)", rep.Session, plural(len(rep.Requests), "request", "requests"))
		title = "bindery report: session " + rep.Session
	} else {
		svg = archiveSVG(rep)
		what = fmt.Sprintf("the archive (%s, %s)", plural(rep.Figures.Sessions, "session", "sessions"), plural(len(rep.Figures.Days), "day", "days"))
		title = "bindery report: archive"
	}
	data := svg
	if ext != ".svg" {
		data = htmlPage(title, svg, reportText(rep))
	}
	if err := os.WriteFile(chart, data, 0o644); err != nil {
		return fmt.Errorf("report: write chart: %w", err)
	}
	fmt.Fprintf(stderr, "chart of %s written to %s\n", what, chart)
	return nil
}
