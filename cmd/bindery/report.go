package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
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
	fs := flag.NewFlagSet("bindery report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var socket, session, chart string
	var asJSON bool
	fs.StringVar(&socket, "socket", "", "the daemon's socket (env BINDERY_SOCKET; default $XDG_RUNTIME_DIR/bindery/bindery.sock)")
	fs.StringVar(&session, "session", "", "report one pi session (id) instead of the whole archive")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON (daemon/report.Report)")
	fs.StringVar(&chart, "chart", "", "also write a chart of cache read/write per request to FILE.svg or FILE.html\n(the --session given, else the live session with the latest last activity;\na tie goes to the session whose file bindery ingested last)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bindery report [--session ID] [--json] [--chart FILE.svg|FILE.html] [--socket PATH]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bindery report: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	ext := strings.ToLower(filepath.Ext(chart))
	if chart != "" && ext != ".svg" && ext != ".html" && ext != ".htm" {
		fmt.Fprintf(stderr, "bindery report: --chart %s: the file must end in .svg or .html\n", chart)
		return errUsage
	}
	f := &clientFlags{socket: socket}
	c := f.client()
	defer c.Close()
	ctx, cancel := callCtx()
	defer cancel()

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
	fmt.Fprintf(stderr, "chart of session %s (%d requests) written to %s\n", rep.Session, len(rep.Requests), chart)
	return nil
}
