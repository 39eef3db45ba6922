package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
)

// TestTailText: `bindery tail` prints one line an event within 80
// columns, says it is following the feed before any event arrives, names a
// conversation once when the feed moves to it, and says so when it
// reconnects after the daemon restarted, resuming where it was.
func TestTailText(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	compile := func(text string) *api.CompileAnswer {
		t.Helper()
		h.messages = append(h.messages, map[string]any{"role": "user", "content": text})
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "tail-demo", Branch: fmt.Sprintf("b%d", len(h.messages)), Request: h.body(h.system)})
		if err != nil {
			t.Fatal(err)
		}
		res := h.send(ans.Request, h.reply(false))
		if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply}); err != nil {
			t.Fatal(err)
		}
		var msg map[string]any
		if err := json.Unmarshal(res.Reply, &msg); err != nil {
			t.Fatal(err)
		}
		h.messages = append(h.messages, msg)
		return ans
	}
	first := compile("hello")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, "tail", "--since", "0", "--socket", d.sock)
	cmd.Env = append(os.Environ(), "COLUMNS=")
	out := &lockedWriter{w: new(bytes.Buffer)}
	errOut := &lockedWriter{w: new(bytes.Buffer)}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	text := func(l *lockedWriter) string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.w.String()
	}
	waitFor(t, "tail to say it follows the feed and replay the first compile", func() (bool, string) {
		o, e := text(out), text(errOut)
		return strings.Contains(e, "following the feed: the events after seq 0, then live") &&
			strings.Contains(o, "── tail-demo\n") && strings.Contains(o, first.CompileID+" kept 0 stripped 0"), e + o
	})

	d.restart(0)
	second := compile("more")
	waitFor(t, "tail to reconnect and show the compile made after the restart", func() (bool, string) {
		o, e := text(out), text(errOut)
		return strings.Contains(e, "reconnected; resuming after seq") && strings.Contains(o, second.CompileID+" kept 1 stripped 0"), e + o
	})
	cancel()
	<-done
	o := text(out)
	if strings.Count(o, "── tail-demo\n") != 1 {
		t.Errorf("the conversation is named %d times, want once:\n%s", strings.Count(o, "── tail-demo\n"), o)
	}
	for _, l := range strings.Split(strings.TrimSpace(o), "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a tail line of %d columns: %q", n, l)
		}
		if strings.Contains(l, "accept ") && !strings.Contains(l, "stamped 1 released 0") {
			t.Errorf("accept line: %q", l)
		}
	}
}
