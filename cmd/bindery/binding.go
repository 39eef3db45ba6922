package main

// The binding commands: compile, accept, release, tail, and the binding
// half of show. Like every client command they use only api.Client.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/my-pi/bindery/api"
)

func compileCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("compile", "--conversation ID [--branch B] --file request.json [--plan] [--dry-run] [--out FILE]", stdout, stderr)
	fs, f := cmd.fs, cmd.client()
	conv := fs.String("conversation", "", "the conversation (a pi session id, or any id the host chooses)")
	branch := fs.String("branch", "", "the branch (pi: the leaf entry id the request was built on)")
	file := fs.String("file", "", "the Anthropic Messages request body ('-' for stdin)")
	plan := fs.Bool("plan", false, "answer only the plan, not the rewritten request")
	dry := fs.Bool("dry-run", false, "decide and report, record nothing (its accept is refused)")
	sessionFile := fs.String("session-file", "", "the pi session file, so bindery follows it")
	parent := fs.String("parent", "", "a new conversation or branch made from CONVERSATION[/BRANCH]")
	out := fs.String("out", "", "write the rewritten request to this file")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.require("conversation", "file"); err != nil {
		return err
	}
	body, err := readInput(*file)
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return fmt.Errorf("%s is not valid JSON", *file)
	}
	call := &api.CompileCall{Conversation: *conv, Branch: *branch, SessionFile: *sessionFile, DryRun: *dry, Request: body}
	if *plan {
		call.Return = api.ReturnPlan
	}
	if *parent != "" {
		pc, pb, _ := strings.Cut(*parent, "/")
		call.Parent = &api.BranchRef{Conversation: pc, Branch: pb}
	}
	ctx, cancel := callCtx()
	defer cancel()
	ans, err := f.client().Compile(ctx, call)
	if err != nil {
		return err
	}
	if *out != "" && ans.Request != nil {
		if err := os.WriteFile(*out, ans.Request, 0o600); err != nil {
			return err
		}
	}
	if f.json {
		return printJSON(stdout, ans)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "compile\t%s\n", ans.CompileID)
	if !ans.Bound {
		why := "no messages array"
		if ans.NotMessages != "" {
			why = ans.NotMessages
		}
		fmt.Fprintf(tw, "bound\tno (not an Anthropic Messages request: %s; passed back untouched, nothing recorded)\n", why)
	}
	fmt.Fprintf(tw, "engaged\t%s\n", yesNo(ans.Engaged))
	if ans.DryRun {
		fmt.Fprintf(tw, "dry run\tyes (nothing recorded; it cannot be accepted)\n")
	}
	fmt.Fprintf(tw, "stripped\t%s\n", plural(ans.ThinkingStripped, "thinking block", "thinking blocks"))
	cache := ans.Cache.Cause
	if ans.Cache.FirstChange != "" {
		cache = ans.Cache.FirstChange + " (" + ans.Cache.Cause + ")"
	}
	fmt.Fprintf(tw, "cache first change\t%s\n", cache)
	if *out != "" && ans.Request != nil {
		fmt.Fprintf(tw, "rewritten request\t%s (%d bytes)\n", *out, len(ans.Request))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(ans.Strips) > 0 {
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\n  PATH\tREASON\tTOKENS\t")
		for _, s := range ans.Strips {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t\n", s.Path, s.Reason, s.Tokens)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, m := range ans.DroppedMessages {
		fmt.Fprintf(stdout, "  dropped %s (emptied by the strip)\n", m)
	}
	return nil
}

func acceptCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("accept", "--compile ID [--reply FILE] [--transformations FILE] [--usage FILE]", stdout, stderr)
	fs, f := cmd.fs, cmd.client()
	id := fs.String("compile", "", "the compile id the request was sent with")
	reply := fs.String("reply", "", "the reply (assistant message in the provider's shape: Messages or Bedrock Converse), JSON")
	trs := fs.String("transformations", "", "the response's input_transformations, a JSON array")
	usage := fs.String("usage", "", "the response's usage object, JSON")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.require("compile"); err != nil {
		return err
	}
	call := &api.AcceptCall{CompileID: *id}
	if *reply != "" {
		b, err := readJSONFile(*reply)
		if err != nil {
			return err
		}
		// A whole provider response is accepted as it is: the daemon reads
		// its reply and its input_transformations (binding.ParseReply,
		// binding.InputTransformationsOf); its usage is taken here.
		var resp struct {
			Usage json.RawMessage `json:"usage"`
		}
		if *usage == "" && json.Unmarshal(b, &resp) == nil {
			call.Usage = resp.Usage
		}
		call.Reply = b
	}
	if *trs != "" {
		b, err := readJSONFile(*trs)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &call.InputTransformations); err != nil {
			return fmt.Errorf("%s: want a JSON array of input_transformations: %w", *trs, err)
		}
	}
	if *usage != "" {
		b, err := readJSONFile(*usage)
		if err != nil {
			return err
		}
		call.Usage = b
	}
	ctx, cancel := callCtx()
	defer cancel()
	ans, err := f.client().Accept(ctx, call)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, ans)
	}
	if ans.Repeated {
		fmt.Fprintf(stdout, "already accepted: %d stamped, %d released (nothing recorded twice)\n", ans.Stamped, ans.Released)
		return nil
	}
	fmt.Fprintf(stdout, "accepted: %d stamped, %d released\n", ans.Stamped, ans.Released)
	return nil
}

func releaseCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("release", "--conversation ID (--compile ID --path messages.N.content.M | --signature SIG)", stdout, stderr)
	fs, f := cmd.fs, cmd.client()
	conv := fs.String("conversation", "", "the conversation")
	branch := fs.String("branch", "", "the branch (informational; the compile's branch is used)")
	id := fs.String("compile", "", "the compile whose request the provider refused")
	path := fs.String("path", "", "the path the provider's 400 named, in the request as sent")
	sig := fs.String("signature", "", "release this block (its signature, or redacted data) on every branch")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.require("conversation"); err != nil {
		return err
	}
	if *sig == "" && (*id == "" || *path == "") {
		return cmd.fail("name the block: --compile and --path, or --signature")
	}
	ctx, cancel := callCtx()
	defer cancel()
	ans, err := f.client().Release(ctx, &api.ReleaseCall{Conversation: *conv, Branch: *branch, CompileID: *id, Path: *path, Signature: *sig})
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, ans)
	}
	fmt.Fprintf(stdout, "released %s\n", plural(ans.Released, "thinking block", "thinking blocks"))
	return nil
}

func tailCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("tail", "[--conversation ID] [--since SEQ] [--json] [--no-reconnect]", stdout, stderr)
	fs, f := cmd.fs, cmd.client()
	conv := fs.String("conversation", "", "only this conversation's events")
	since := fs.Int64("since", -1, "first replay the events after this seq (0: everything the log keeps)")
	once := fs.Bool("no-reconnect", false, "exit when the daemon is down or ends the feed, instead of\nwaiting for it (exit 3 when it is not running)")
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	if err := cmd.emptyFlag("conversation"); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := f.client()
	if *conv != "" {
		// A session's unique prefix names it here too; with the daemon
		// down the id is taken as typed (tail waits for the daemon).
		rctx, cancel := callCtx()
		full, err := resolveSession(rctx, client, *conv)
		cancel()
		if _, down := errors.AsType[*api.NotRunningError](err); err != nil && !down {
			return err
		} else if err == nil {
			*conv = full
		}
	}
	opt := api.EventsOptions{Conversation: *conv, Since: *since, HasSince: *since >= 0}
	// Like tail -F: a daemon that is down, at start or later, is waited
	// for, said once per outage, with a backoff up to 10s between tries
	// (--no-reconnect exits instead: editors restart it themselves).
	const firstBackoff, maxBackoff = 250 * time.Millisecond, 10 * time.Second
	backoff := firstBackoff
	ids := shortIDs{c: client}
	ev := eventPrinter{short: func(id string) string {
		ctx, cancel := callCtx()
		defer cancel()
		return ids.of(ctx, id)
	}}
	connected, waiting := false, false
	for {
		st, err := client.Events(ctx, opt)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if *once {
				return err
			}
			if !waiting {
				if _, down := errors.AsType[*api.NotRunningError](err); down {
					fmt.Fprintln(stderr, "bindery: the daemon is not running; waiting for it (Ctrl-C ends)")
				} else {
					fmt.Fprintf(stderr, "bindery: %v; retrying\n", err)
				}
				waiting = true
			}
		} else {
			backoff = firstBackoff
			// Say that the feed is followed (and again after each
			// reconnect): a quiet feed otherwise shows nothing at all.
			switch {
			case connected && opt.HasSince:
				fmt.Fprintf(stderr, "bindery: reconnected; resuming after seq %d\n", opt.Since)
			case connected:
				fmt.Fprintln(stderr, "bindery: reconnected; following the feed live")
			case opt.HasSince:
				fmt.Fprintf(stderr, "bindery: following the feed: the events after seq %d, then live\n", opt.Since)
			default:
				fmt.Fprintln(stderr, "bindery: following the feed live (Ctrl-C ends it)")
			}
			connected, waiting = true, false
			for {
				e, err := st.Next(ctx)
				if err != nil {
					if ctx.Err() != nil {
						st.Close()
						return nil
					}
					reason := err.Error()
					fe, ended := errors.AsType[*api.FeedEndedError](err)
					if ended {
						reason = fe.Reason
					}
					if *once {
						return fmt.Errorf("feed ended: %s", reason)
					}
					if ended && strings.Contains(reason, "shutting down") {
						// The daemon's own words name a seq for a client
						// that kept none; this one says where it resumes.
						reason = "the daemon stopped"
					}
					if st.Last >= 0 {
						fmt.Fprintf(stderr, "bindery: feed ended (%s); resuming after seq %d\n", reason, st.Last)
					} else {
						fmt.Fprintf(stderr, "bindery: feed ended (%s)\n", reason)
					}
					break
				}
				if err := ev.print(stdout, e, f.json); err != nil {
					return err
				}
			}
			// Resume after the last event printed; with none printed yet
			// there is no seq to resume from, and the feed goes on live.
			if st.Last >= 0 {
				opt.Since, opt.HasSince = st.Last, true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// showConversation prints the binding state of a conversation (pi or not);
// show calls it after a session's own state, or alone for a conversation
// that is not a pi session. found is false when bindery does not know it.
func showConversation(ctx context.Context, c *api.Client, id string, stdout io.Writer, asJSON bool) (found bool, err error) {
	st, err := c.Conversation(ctx, id)
	if api.IsCode(err, api.CodeUnknownConversation) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if asJSON {
		return true, printJSON(stdout, st)
	}
	name := (&shortIDs{c: c}).of(ctx, id)
	fmt.Fprintf(stdout, "\nbinding state of %s:\n", name)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  engaged\t%s\n", yesNo(st.Engaged))
	if st.Parent != nil {
		fmt.Fprintf(tw, "  parent\t%s/%s\n", st.Parent.Conversation, st.Parent.Branch)
	}
	if st.SessionFile != "" {
		fmt.Fprintf(tw, "  session file\t%s\n", st.SessionFile)
		if why := fileNotFollowed(ctx, c, st.SessionFile); why != "" {
			fmt.Fprintf(tw, "  not followed\t%s\n", why)
		}
	}
	fmt.Fprintf(tw, "  stamps\t%d (%d linked to session entries)\n", st.Stamps, st.StampsLinked)
	fmt.Fprintf(tw, "  releases\t%d\n", len(st.Releases))
	fmt.Fprintf(tw, "  compiles remembered\t%d\n", st.Compiles)
	if st.SessionFile == "" && !st.SessionTree {
		if err := showHostFigures(ctx, c, tw, id); err != nil {
			return true, err
		}
	}
	if err := tw.Flush(); err != nil {
		return true, err
	}
	if st.SessionTree {
		return true, showTreeBranches(stdout, st)
	}
	// The PARENT column only when a branch has a parent: bindery proxy's
	// branch names and compile ids left it no room in 80 columns.
	forked := false
	for _, b := range st.Branches {
		forked = forked || b.Parent != nil
	}
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	head := "  BRANCH\tOWNER\tACCEPTED\tPENDING\tSTAMPS\tRELEASES"
	if forked {
		head += "\tPARENT"
	}
	fmt.Fprintln(tw, head)
	for _, b := range st.Branches {
		name, owner, parent := b.Branch, b.Owner, "-"
		if name == "" {
			name = "(default)"
		}
		if owner == "" {
			owner = "-"
		}
		if b.Parent != nil {
			parent = b.Parent.Conversation + "/" + b.Parent.Branch
		}
		row := fmt.Sprintf("  %s\t%s\t%d\t%d\t%d\t%d", name, owner, b.Accepted, b.Unaccepted, b.Stamps, b.Releases)
		if forked {
			row += "\t" + parent
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return true, err
	}
	return true, showReleases(stdout, st)
}

// showTreeBranches prints a pi session's branches: its tree's leaves, each
// with the compiles made on its path (design/binding.md: a pi branch is
// identified by its path). Leaves compiles named that the file does not
// show yet follow; the per-leaf bookkeeping is only in --json.
func showTreeBranches(stdout io.Writer, st *api.ConversationState) error {
	fmt.Fprintf(stdout, "\n  %s (session tree leaves; %s compiled at):\n", plural(len(st.Branches), "branch", "branches"), plural(len(st.CompileLeaves), "leaf", "leaves"))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEAF\tENTRIES\tOWNER\tACCEPTED\tPENDING\tSTAMPS\tRELEASES")
	for _, b := range st.Branches {
		leaf, owner, entries := b.Branch, b.Owner, fmt.Sprint(b.Entries)
		switch {
		case b.Current:
			leaf += " *"
		case b.NotInTree:
			leaf += " †"
			entries = "-"
		}
		if leaf == "" {
			leaf = "(default)"
		}
		if owner == "" {
			owner = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\n", leaf, entries, owner, b.Accepted, b.Unaccepted, b.Stamps, b.Releases)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "  (* current leaf, † not in the file yet; PENDING: compiles not accepted;")
	fmt.Fprintln(stdout, "  a branch counts every compile made on its path)")
	return showReleases(stdout, st)
}

func showReleases(stdout io.Writer, st *api.ConversationState) error {
	if len(st.Releases) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RELEASED BLOCK\tBRANCH\tREASON\tCOMPILE\tTIME\t")
		for _, r := range st.Releases {
			fmt.Fprintf(tw, "  %.16s\t%s\t%s\t%s\t%s\t\n", r.Block, r.Branch, r.Reason, r.CompileID, when(r.Time))
		}
		return tw.Flush()
	}
	return nil
}

func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

func readJSONFile(name string) ([]byte, error) {
	b, err := readInput(name)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s is not valid JSON", name)
	}
	return b, nil
}

// showHostFigures adds, for a conversation no session file names (bindery
// proxy's client:session, a script's own id), which client and session it
// is and what its replies' usage said: the same summary `bindery
// conversations` lists, so the two never disagree. A conversation past
// that list's bound shows its binding state alone.
func showHostFigures(ctx context.Context, c *api.Client, tw io.Writer, id string) error {
	list, err := c.Conversations(ctx)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", id, err)
	}
	for _, s := range list {
		if s.Conversation != id {
			continue
		}
		if s.Client != "" {
			fmt.Fprintf(tw, "  client\t%s\n", s.Client)
			session := "(none: the client sent no session hint)"
			if _, hint, ok := strings.Cut(id, ":"); ok && hint != "" {
				session = hint
			}
			fmt.Fprintf(tw, "  session\t%s\n", session)
		}
		fmt.Fprintf(tw, "  retries\t%d (releases after a provider refusal)\n", s.Retries)
		hit := 0.0
		if in := s.Input + s.CacheRead + s.CacheWrite; in > 0 {
			hit = 100 * float64(s.CacheRead) / float64(in)
		}
		fmt.Fprintf(tw, "  replies\t%d with usage, cache hit %.0f%%\n", s.Replies, hit)
		fmt.Fprintf(tw, "  tokens\tuncached %s · output %s · cache read %s · write %s\n",
			tok(s.Input), tok(s.Output), tok(s.CacheRead), tok(s.CacheWrite))
		return nil
	}
	return nil
}
