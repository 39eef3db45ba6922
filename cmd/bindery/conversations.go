package main

import (
	"fmt"
	"io"
	"time"

	"github.com/my-pi/bindery/api"
)

// conversations lists what bindery proxy (or any host that names its own
// conversations) compiled: pi's sessions are `bindery sessions`. Each
// conversation takes two lines, its whole id first (ids such as
// claude-code:<uuid> run to 48 characters and must paste back into `show`
// and `tail --conversation`), so the list fits 80 columns.
func conversationsCmd(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("conversations", "[--json]", stdout, stderr)
	f := cmd.client()
	if _, err := cmd.parse(args, 0, 0); err != nil {
		return err
	}
	ctx, cancel := callCtx()
	defer cancel()
	list, err := f.client().Conversations(ctx)
	if err != nil {
		return err
	}
	if f.json {
		if list == nil {
			list = []api.ConversationSummary{}
		}
		return printJSON(stdout, api.ConversationList{Conversations: list})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no conversations yet (bindery proxy's appear here; pi's: bindery sessions)")
		return nil
	}
	printConversations(stdout, list, time.Now())
	return nil
}

func printConversations(w io.Writer, list []api.ConversationSummary, now time.Time) {
	plural := func(n int, one string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		if one == "history" {
			return fmt.Sprintf("%d histories", n)
		}
		return fmt.Sprintf("%d %ss", n, one)
	}
	for _, c := range list {
		fmt.Fprintln(w, c.Conversation)
		engaged := ""
		if !c.Engaged {
			engaged = " · not engaged"
		}
		fmt.Fprintf(w, "    %s · %s · %d accepted · %s · %s%s\n", whenShort(c.LastActivity, now), plural(c.Branches, "history"),
			c.Accepted, plural(c.Stamps, "stamp"), plural(c.Releases, "release"), engaged)
	}
}
