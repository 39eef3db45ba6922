package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/my-pi/bindery/daemon/report"
)

// reportCmd is `bindery report [--session ID] [--json] [--chart FILE.svg|.html]`:
// the cache and thinking economics (design/economics.md) from GET
// /v1/report, as a table, as JSON, and as a chart of one session.
func reportCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("report", "[--session ID] [--json] [--chart FILE.svg|FILE.html]", stdout, stderr)
	f := cmd.client()
	fs := cmd.fs
	var session, chart string
	fs.StringVar(&session, "session", "", "report one pi session (its id, or a unique prefix of it) instead of the whole archive")
	fs.StringVar(&chart, "chart", "", "also write a chart of cache read/write per request to FILE.svg or FILE.html\n(the --session given, else the live session with the latest last activity;\na tie goes to the session whose file bindery ingested last)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	asJSON := f.json
	ext := strings.ToLower(filepath.Ext(chart))
	if chart != "" && ext != ".svg" && ext != ".html" && ext != ".htm" {
		return cmd.fail("--chart %s: the file must end in .svg or .html", chart)
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
	var raw json.RawMessage
	if err := c.Report(ctx, session, &raw); err != nil {
		return err
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("report: decode answer: %w", err)
	}
	if asJSON {
		var out bytes.Buffer
		if err := json.Indent(&out, raw, "", "  "); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		out.WriteByte('\n')
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return err
		}
	} else {
		fmt.Fprint(stdout, report.Text(rep))
	}
	if chart == "" {
		return nil
	}
	if rep.Scope != "session" {
		id := rep.Latest
		if id == "" {
			return errors.New("report: --chart: no live session to chart (name a removed one with --session)")
		}
		var one report.Report
		if err := c.Report(ctx, id, &one); err != nil {
			return err
		}
		rep = one
	}
	var data []byte
	if ext == ".svg" {
		data = report.SVG(rep)
	} else {
		data = report.HTML(rep)
	}
	if err := os.WriteFile(chart, data, 0o644); err != nil {
		return fmt.Errorf("report: write chart: %w", err)
	}
	fmt.Fprintf(stderr, "chart of session %s (%s) written to %s\n", rep.Session, plural(len(rep.Requests), "request", "requests"), chart)
	return nil
}
