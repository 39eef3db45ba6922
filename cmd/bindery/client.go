package main

// The client commands: they talk to the daemon only through api.Client.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
)

type clientFlags struct {
	socket string
	json   bool
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
	cmd := newCommand("status", "[--json]", stdout, stderr)
	f := cmd.client()
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
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
	waiting, problems := splitProblems(h.Watcher.Problems)
	switch {
	case h.Watcher.Running && h.Watcher.Error == "" && len(problems) > 0:
		watch = fmt.Sprintf("degraded: %s (below)", plural(len(problems), "problem", "problems"))
	case h.Watcher.Running && h.Watcher.Error == "" && len(waiting) > 0 && h.Watcher.Sessions == 0:
		watch = "running, waiting for pi (below)"
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
		{"sessions", fmt.Sprintf("%d (%d removed), %s", h.Watcher.Sessions, h.Watcher.RemovedSessions, plural(h.Watcher.Files, "file", "files"))},
		{"entries", fmt.Sprintf("%d, %s, %s", h.Database.Entries, plural(int(h.Database.Thinking), "thinking block", "thinking blocks"), plural(int(h.Database.IngestErrors), "ingest error", "ingest errors"))},
		{"ingested", fmt.Sprintf("%s, %s behind", humanBytes(h.Watcher.IngestedBytes), humanBytes(h.Watcher.LagBytes))},
	}
	if !h.Watcher.LastIngest.IsZero() {
		rows = append(rows, [2]string{"last ingest", h.Watcher.LastIngest.Local().Format(time.DateTime)})
	}
	if sh := h.Shared; sh != nil {
		ship := plural(sh.Outbox, "stamp", "stamps") + " to ship"
		if sh.OutboxLagMs > 0 {
			lag := time.Duration(sh.OutboxLagMs) * time.Millisecond
			if lag >= time.Second {
				lag = lag.Round(time.Second) // "oldest 0s" said nothing below it
			}
			ship += fmt.Sprintf(" (oldest %s)", lag)
		}
		rows = append(rows, [2]string{"shared", fmt.Sprintf("%s as %s, %s", sh.Name, sh.Machine, ship)})
		rows = append(rows, [2]string{"read-through", fmt.Sprintf("%s, %s found, %d missed, %s waited",
			plural(int(sh.ReadThroughs), "compile", "compiles"), plural(int(sh.ReadThroughFound), "stamp", "stamps"),
			sh.ReadThroughMisses, (time.Duration(sh.ReadThroughWaitMs) * time.Millisecond).Round(time.Millisecond))})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(waiting) > 0 {
		// Before pi's first session its folder does not exist: bindery
		// watches for it, and that is health (exit 0), not a problem.
		fmt.Fprintln(stdout, "\nwaiting for pi: no session folder yet (pi makes it with its first")
		fmt.Fprintln(stdout, "session; bindery watches for it):")
		for _, p := range waiting {
			fmt.Fprintf(stdout, "  %s\n", p.Path)
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "\nnot followed now (%d):\n", len(problems))
		for _, p := range problems {
			// A path is printed whole, to be copied (on a line of its own
			// when long); the reason is wrapped below it.
			fmt.Fprintf(stdout, "%s\n%s\n", pathLine("  "+p.Kind+"  ", p.Path),
				wrapText(fmt.Sprintf("      %s (since %s)", p.Reason, p.Since.Local().Format(time.DateTime)), 80, ""))
		}
	}
	if n := len(h.Watcher.IngestErrors); n > 0 {
		fmt.Fprintf(stdout, "\nlines skipped (newest %d of %d; bindery show <session> lists a session's):\n", n, h.Database.IngestErrors)
		for _, e := range h.Watcher.IngestErrors {
			fmt.Fprintf(stdout, "  %s:%d (offset %d):\n%s\n", e.File, e.Line, e.Offset,
				wrapText("      "+e.Reason, 80, ""))
		}
	}
	return degradedErr(h)
}

// splitProblems parts the session folders pi has not made yet (waiting:
// listed, not degraded) from what the watcher cannot follow.
func splitProblems(all []api.WatcherProblem) (waiting, problems []api.WatcherProblem) {
	for _, p := range all {
		if p.Kind == "folder-missing" {
			waiting = append(waiting, p)
		} else {
			problems = append(problems, p)
		}
	}
	return waiting, problems
}

// degradedError makes status exit 4: the daemon runs, but something is
// not being followed.
type degradedError struct{ why string }

func (e *degradedError) Error() string { return "degraded: " + e.why }

func degradedErr(h api.Health) error {
	_, problems := splitProblems(h.Watcher.Problems)
	switch {
	case !h.Watcher.Running:
		return &degradedError{"the watcher is stopped: " + h.Watcher.Error}
	case len(problems) > 0:
		return &degradedError{plural(len(problems), "thing is", "things are") + " not followed (see above)"}
	case h.Watcher.Degraded:
		return &degradedError{h.Watcher.Error}
	}
	return nil
}

func sessions(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("sessions", "[--json] [--cwd DIR]", stdout, stderr)
	f := cmd.client()
	var cwd string
	cmd.fs.StringVar(&cwd, "cwd", "", "only the sessions pi ran in DIR or a folder under it (an editor's workspace)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	var err error
	if cwd != "" {
		if cwd, err = filepath.Abs(cwd); err != nil {
			return fmt.Errorf("sessions --cwd: %w", err)
		}
	}
	ctx, cancel := callCtx()
	defer cancel()
	list, err := f.client().SessionsIn(ctx, cwd)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, api.SessionList{Sessions: list})
	}
	if len(list) == 0 {
		if cwd == "" {
			fmt.Fprintln(stdout, "no sessions yet (bindery status shows the folders it watches)")
			proxyLine(ctx, f.client(), stdout)
			return nil
		}
		// Sessions are matched by the folder pi ran in, which may be gone
		// since; say which of the two this is.
		fmt.Fprintf(stdout, "no pi session ran in %s or a folder under it\n", cwd)
		if _, err := os.Stat(cwd); err != nil {
			fmt.Fprintln(stdout, "(that folder does not exist here)")
		}
		return nil
	}
	all := list
	if cwd != "" {
		// Prefixes unique among every session, not only the workspace's:
		// what the table prints must paste back into any command.
		if all, err = f.client().Sessions(ctx); err != nil {
			return err
		}
	}
	if err := printSessions(stdout, list, all, time.Now()); err != nil {
		return err
	}
	// ENGAGED is bindery's word; say what it means under the table.
	_, err = fmt.Fprintln(stdout, "ENGAGED yes: bindery accepted a reply of the session (pi-bindery ran); it\n"+
		"then keeps only the thinking it saw the provider sign, and strips the rest.")
	if cwd == "" {
		proxyLine(ctx, f.client(), stdout)
	}
	return err
}

// proxyLine names, under pi's sessions, the conversations bindery proxy
// (or another host) compiled, which `bindery conversations` lists. A
// daemon too old to list them says nothing.
func proxyLine(ctx context.Context, c *api.Client, w io.Writer) {
	convs, err := c.Conversations(ctx)
	if err != nil || len(convs) == 0 {
		return
	}
	n := fmt.Sprintf("%d conversations", len(convs))
	if len(convs) == 1 {
		n = "1 conversation"
	}
	fmt.Fprintf(w, "and %s from bindery proxy or other hosts: bindery conversations\n", n)
}

// printSessions is the sessions table, fitted to width(w): ids as unique
// prefixes, cwd clipped from the left, the leaf only when there is room.
func printSessions(w io.Writer, list, all []api.Session, now time.Time) error {
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	short := api.ShortIDs(ids)
	cols := width(w)
	rows := [][]string{{"SESSION", "ACTIVE", "ENTRIES", "THINK", "ENGAGED", "CWD"}}
	withLeaf := cols >= 100
	if withLeaf {
		rows[0] = []string{"SESSION", "ACTIVE", "ENTRIES", "THINK", "ENGAGED", "LEAF", "CWD"}
	}
	home, _ := os.UserHomeDir()
	for _, s := range list {
		id := short[s.ID]
		if s.Removed {
			id += " (removed)"
		}
		cwd := s.Cwd
		if home != "" && (cwd == home || strings.HasPrefix(cwd, home+"/")) {
			cwd = "~" + cwd[len(home):]
		}
		r := []string{id, whenShort(s.LastActivity, now), fmt.Sprint(s.Entries), fmt.Sprint(s.ThinkingBlocks), yesNo(s.Engaged)}
		if withLeaf {
			r = append(r, s.Leaf)
		}
		rows = append(rows, append(r, cwd))
	}
	// Every column but the last as wide as its widest cell; the last (cwd)
	// gets what is left, and at least 12 columns.
	n := len(rows[0])
	widths := make([]int, n)
	for _, r := range rows {
		for i, c := range r[:n-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	used := 0
	for _, wd := range widths[:n-1] {
		used += wd + 2
	}
	// A long id (a prefix that must run long to be unique) leaves the cwd
	// too little room: THINK, then ENTRIES, give theirs (--json has them).
	for _, col := range []int{3, 2} {
		if cols-used >= 12 {
			break
		}
		used -= widths[col] + 2
		widths[col] = -1
	}
	last := max(12, cols-used)
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r[:n-1] {
			if widths[i] < 0 {
				continue // dropped for room
			}
			pad := widths[i] - utf8.RuneCountInString(c)
			if i >= 2 && i <= 3 { // counts right-aligned
				b.WriteString(strings.Repeat(" ", pad) + c + "  ")
			} else {
				b.WriteString(c + strings.Repeat(" ", pad) + "  ")
			}
		}
		b.WriteString(clipLeft(r[n-1], last))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// whenShort is a timestamp in the fewest columns that stay unambiguous:
// the time today, the day and time this year, else the date.
func whenShort(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	t, now = t.Local(), now.Local()
	switch {
	case t.Year() == now.Year() && t.YearDay() == now.YearDay():
		return t.Format("15:04")
	case t.Year() == now.Year():
		return t.Format("Jan 02 15:04")
	}
	return t.Format("2006-01-02")
}

func show(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("show", "[--json] <session or conversation>", stdout, stderr)
	f := cmd.client()
	rest, err := cmd.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if strings.TrimSpace(rest[0]) == "" {
		return cmd.fail("the session id is empty: name one (bindery sessions lists them)")
	}
	ctx, cancel := callCtx()
	defer cancel()
	if rest[0], err = resolveSession(ctx, f.client(), rest[0]); err != nil {
		return err
	}
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
	ids := shortIDs{c: f.client()}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, r := range [][2]string{
		{"session", ids.of(ctx, d.ID)},
		{"file", d.File},
		{"cwd", d.Cwd},
		{"version", fmt.Sprint(d.Version)},
		{"entries", fmt.Sprint(d.Entries)},
		{"thinking", plural(d.ThinkingBlocks, "block", "blocks")},
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
			fmt.Fprintln(stdout, wrapText(fmt.Sprintf("  line %d (offset %d): %s", e.Line, e.Offset, e.Reason), 80, "    "))
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
	fmt.Fprintf(stdout, "\n%s:\n", plural(len(d.Branches), "branch", "branches"))
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEAF\tENTRIES\tACTIVE\tCONDENSE FRONTIER")
	for i, b := range d.Branches {
		leaf := b.Leaf
		if b.Current {
			leaf += " *"
		}
		front := "-"
		if i < len(d.Frontier) && d.Frontier[i].Condense != nil {
			front = d.Frontier[i].Condense.Entry
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", leaf, b.Entries, whenShort(b.LastActivity, time.Now()), front)
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

// pathLine is label then path on one line when they fit 80 columns, else
// the path on a line of its own below the label: a path is never cut, so
// it can be copied, and is the one thing allowed past 80 columns.
func pathLine(label, path string) string {
	if utf8.RuneCountInString(label+path) <= 80 {
		return label + path
	}
	return strings.TrimRight(label, " ") + "\n    " + path
}
