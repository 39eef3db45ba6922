package main

// The client commands: they talk to the daemon only through api.Client.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/my-pi/bindery/api"
)

type clientFlags struct {
	socket string
	json   bool
}

func parseClient(name string, args []string, stderr io.Writer, positional string) (*clientFlags, []string, error) {
	fs := flag.NewFlagSet("bindery "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f clientFlags
	fs.StringVar(&f.socket, "socket", "", "the daemon's socket (env BINDERY_SOCKET; default $XDG_RUNTIME_DIR/bindery/bindery.sock)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bindery %s [--json] [--socket PATH]%s\n", name, positional)
		fs.PrintDefaults()
	}
	// Flags may come after the positional argument too.
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return &f, rest, nil
}

func (f *clientFlags) client() *api.Client { return api.NewClient(f.socket) }

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func status(args []string, stdout, stderr io.Writer) error {
	f, rest, err := parseClient("status", args, stderr, "")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("status takes no arguments (got %q)", rest)
	}
	ctx, cancel := callCtx()
	defer cancel()
	h, err := f.client().Health(ctx)
	if err != nil {
		return err
	}
	if f.json {
		if err := printJSON(stdout, h); err != nil {
			return err
		}
		return degradedErr(h)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	watch := "running"
	if !h.Watcher.Running {
		watch = "stopped: " + h.Watcher.Error
	} else if h.Watcher.Error != "" {
		watch = "degraded: " + h.Watcher.Error
	}
	if h.Watcher.Running && h.Watcher.Error == "" && len(h.Watcher.Problems) > 0 {
		watch = fmt.Sprintf("degraded: %d problems (below)", len(h.Watcher.Problems))
	}
	if !h.Watcher.InitialScan {
		watch += " (first scan in progress)"
	}
	rows := [][2]string{
		{"bindery", fmt.Sprintf("%s, pid %d, up %s", h.Version, h.PID, (time.Duration(h.UptimeSeconds) * time.Second).String())},
		{"socket", h.Socket},
		{"database", fmt.Sprintf("%s (schema v%d, %s)", h.Database.Path, h.Database.SchemaVersion, humanBytes(h.Database.SizeBytes))},
		{"watching", strings.Join(h.Watcher.Directories, ", ")},
		{"watcher", watch},
		{"sessions", fmt.Sprintf("%d (%d removed), %d files", h.Watcher.Sessions, h.Watcher.RemovedSessions, h.Watcher.Files)},
		{"entries", fmt.Sprintf("%d, %d thinking blocks, %d ingest errors", h.Database.Entries, h.Database.Thinking, h.Database.IngestErrors)},
		{"ingested", fmt.Sprintf("%s, %s behind", humanBytes(h.Watcher.IngestedBytes), humanBytes(h.Watcher.LagBytes))},
	}
	if !h.Watcher.LastIngest.IsZero() {
		rows = append(rows, [2]string{"last ingest", h.Watcher.LastIngest.Local().Format(time.DateTime)})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(h.Watcher.Problems) > 0 {
		fmt.Fprintf(stdout, "\nnot followed now (%d):\n", len(h.Watcher.Problems))
		for _, p := range h.Watcher.Problems {
			fmt.Fprintf(stdout, "  %s  %s\n      %s (since %s)\n", p.Kind, p.Path, p.Reason, p.Since.Local().Format(time.DateTime))
		}
	}
	if n := len(h.Watcher.IngestErrors); n > 0 {
		fmt.Fprintf(stdout, "\nlines skipped (newest %d of %d; bindery show <session> lists a session's):\n", n, h.Database.IngestErrors)
		for _, e := range h.Watcher.IngestErrors {
			fmt.Fprintf(stdout, "  %s:%d (offset %d): %s\n", e.File, e.Line, e.Offset, e.Reason)
		}
	}
	return degradedErr(h)
}

// degradedError makes status exit 4: the daemon runs, but something is
// not being followed.
type degradedError struct{ why string }

func (e *degradedError) Error() string { return "degraded: " + e.why }

func degradedErr(h api.Health) error {
	switch {
	case !h.Watcher.Running:
		return &degradedError{"the watcher is stopped: " + h.Watcher.Error}
	case len(h.Watcher.Problems) > 0:
		return &degradedError{fmt.Sprintf("%d things are not followed (see above)", len(h.Watcher.Problems))}
	case h.Watcher.Degraded:
		return &degradedError{h.Watcher.Error}
	}
	return nil
}

func sessions(args []string, stdout, stderr io.Writer) error {
	f, rest, err := parseClient("sessions", args, stderr, "")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("sessions takes no arguments (got %q)", rest)
	}
	ctx, cancel := callCtx()
	defer cancel()
	list, err := f.client().Sessions(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, api.SessionList{Sessions: list})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no sessions yet")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tLAST ACTIVITY\tENTRIES\tTHINKING\tLEAF\tENGAGED\tCWD\t")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", s.ID, when(s.LastActivity), s.Entries, s.ThinkingBlocks,
			s.Leaf, yesNo(s.Engaged), s.Cwd)
	}
	return tw.Flush()
}

func show(args []string, stdout, stderr io.Writer) error {
	f, rest, err := parseClient("show", args, stderr, " <session>")
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" {
		fmt.Fprintln(stderr, "Usage: bindery show [--json] [--socket PATH] <session>")
		return errUsage
	}
	ctx, cancel := callCtx()
	defer cancel()
	d, err := f.client().Session(ctx, rest[0])
	if err != nil {
		if api.IsCode(err, api.CodeNotFound) {
			// not a pi session: perhaps another host's conversation
			if found, err := showConversation(ctx, f.client(), rest[0], stdout, f.json); found || err != nil {
				return err
			}
			if why := whyNoSession(ctx, f.client(), rest[0]); why != "" {
				return fmt.Errorf("no session %q: %s", rest[0], why)
			}
			return fmt.Errorf("no session or conversation %q (bindery sessions lists the sessions)", rest[0])
		}
		return err
	}
	if f.json {
		return printJSON(stdout, d)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, r := range [][2]string{
		{"session", d.ID},
		{"file", d.File},
		{"cwd", d.Cwd},
		{"version", fmt.Sprint(d.Version)},
		{"entries", fmt.Sprint(d.Entries)},
		{"thinking", fmt.Sprintf("%d blocks", d.ThinkingBlocks)},
		{"leaf", d.Leaf},
		{"last activity", when(d.LastActivity)},
		{"engaged", yesNo(d.Engaged)},
		{"stamps", fmt.Sprint(d.Stamps)},
		{"releases", fmt.Sprint(d.Releases)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if d.ParentSession != "" {
		fmt.Fprintf(tw, "parent\t%s\n", d.ParentSession)
	}
	if d.Removed {
		fmt.Fprintf(tw, "removed\tyes (the file is gone; what bindery learned is kept)\n")
	}
	if p := d.Problem; p != nil {
		fmt.Fprintf(tw, "not followed\t%s: %s (since %s)\n", p.Kind, p.Reason, p.Since.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.IngestErrors) > 0 {
		fmt.Fprintf(stdout, "\nlines skipped (%d):\n", len(d.IngestErrors))
		for _, e := range d.IngestErrors {
			fmt.Fprintf(stdout, "  line %d (offset %d): %s\n", e.Line, e.Offset, e.Reason)
		}
	}
	if len(d.SameID) > 1 {
		fmt.Fprintf(stdout, "\n%d files carry this session id; shown: the first (live, latest activity):\n", len(d.SameID))
		for _, f := range d.SameID {
			state := "live"
			if f.Removed {
				state = "removed"
			}
			fmt.Fprintf(stdout, "  %s (%s, last activity %s)\n", f.File, state, when(f.LastActivity))
		}
	}
	fmt.Fprintf(stdout, "\n%d branches:\n", len(d.Branches))
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEAF\tENTRIES\tLAST ACTIVITY\tCONDENSE FRONTIER\t")
	for i, b := range d.Branches {
		leaf := b.Leaf
		if b.Current {
			leaf += " *"
		}
		front := "-"
		if i < len(d.Frontier) && d.Frontier[i].Condense != nil {
			front = d.Frontier[i].Condense.Entry
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t\n", leaf, b.Entries, when(b.LastActivity), front)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "(* current leaf)")
	_, err = showConversation(ctx, f.client(), rest[0], stdout, false) // binding.go
	return err
}

func when(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.Local().Format("2006-01-02 15:04")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// whyNoSession explains a session bindery does not know when the watcher
// has a problem with a file named for it (pi names a session's file
// <time>_<id>.jsonl): it cannot be read, it is a FIFO, its first line has
// no end. "" when there is no such file.
func whyNoSession(ctx context.Context, c *api.Client, id string) string {
	h, err := c.Health(ctx)
	if err != nil {
		return ""
	}
	for _, p := range h.Watcher.Problems {
		if base := filepath.Base(p.Path); base == id+".jsonl" || strings.HasSuffix(base, "_"+id+".jsonl") {
			return fmt.Sprintf("its file %s is not followed (%s): %s", p.Path, p.Kind, p.Reason)
		}
	}
	return ""
}

// fileNotFollowed is the watcher's problem with path ("" when none): why a
// conversation whose compiles named it has no session entries.
func fileNotFollowed(ctx context.Context, c *api.Client, path string) string {
	h, err := c.Health(ctx)
	if err != nil {
		return ""
	}
	for _, p := range h.Watcher.Problems {
		if p.Path == path {
			return fmt.Sprintf("%s: %s", p.Kind, p.Reason)
		}
	}
	return ""
}
