package main

import (
	"fmt"
	"io"
	"strings"
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
		if stem, ok := strings.CutSuffix(one, "y"); ok {
			return fmt.Sprintf("%d %sies", n, stem) // history, reply, retry
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
		if c.Replies > 0 || c.Retries > 0 {
			// The cache figures of the replies (bindery report prices them).
			hit := 0.0
			if in := c.Input + c.CacheRead + c.CacheWrite; in > 0 {
				hit = 100 * float64(c.CacheRead) / float64(in)
			}
			fmt.Fprintf(w, "    %s · read %s · write %s · uncached %s · hit %.0f%% · %s\n", plural(c.Replies, "reply"),
				tok(c.CacheRead), tok(c.CacheWrite), tok(c.Input), hit, plural(c.Retries, "retry"))
		}
	}
}
