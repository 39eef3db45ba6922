package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
)

// reportCmd is `bindery report [--session ID | --shared [--since D] [--until D]] [--json] [--chart FILE.svg|.html] [--chart-x request|time]`:
// the cache and thinking economics (design/economics.md) from GET
// /v1/report, as a table, as JSON, and as a chart: the archive's spend
// per day, or one session's cache per request.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("report", "[--session ID | --shared [--since DAY] [--until DAY]] [--json] [--chart FILE.svg|FILE.html] [--chart-x request|time]", stdout, stderr)
	f := cmd.client()
	fs := cmd.fs
	var session, chart, chartX, since, until string
	var shared bool
	fs.BoolVar(&shared, "shared", false, "the team's report: every machine joined to the daemon's shared tier (bindery serve --shared),\nper machine, person, client, model and day; the chart stacks each day's spend by machine")
	fs.StringVar(&since, "since", "", "with --shared: from this UTC day on (YYYY-MM-DD)")
	fs.StringVar(&until, "until", "", "with --shared: up to this UTC day (YYYY-MM-DD)")
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
	if !shared && (since != "" || until != "") {
		return cmd.fail("--since and --until go with --shared")
	}
	if shared && session != "" {
		return cmd.fail("--shared reports the team, --session one session: name one")
	}
	for _, d := range []struct{ flag, v string }{{"since", since}, {"until", until}} {
		if _, err := time.Parse(time.DateOnly, d.v); d.v != "" && (err != nil || len(d.v) != len(time.DateOnly)) {
			return cmd.fail("--%s %.40q: want a UTC day, YYYY-MM-DD", d.flag, d.v)
		}
	}
	c := f.client()
	defer c.Close()
	ctx, cancel := callCtx()
	defer cancel()

	if shared {
		rep, err := c.TeamReport(ctx, api.TeamQuery{Since: since, Until: until})
		if err != nil {
			return err
		}
		if asJSON {
			if err := printJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			fmt.Fprint(stdout, teamText(rep))
		}
		if chart == "" {
			return nil
		}
		data := teamSVG(rep)
		if ext != ".svg" {
			data = htmlPage("bindery report: the team", data, teamText(rep))
		}
		if err := os.WriteFile(chart, data, 0o644); err != nil {
			return fmt.Errorf("report: write chart: %w", err)
		}
		fmt.Fprintf(stderr, "chart of the team (%s, %s) written to %s\n", plural(len(rep.Machines), "machine", "machines"), plural(len(rep.Days), "day", "days"), chart)
		return nil
	}

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
