package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
		return h.roundTrip(d, api.CompileCall{Conversation: "tail-demo", Branch: fmt.Sprintf("b%d", len(h.messages))}, nil)
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

// TestTailWaitsForDaemon: a tail started with the daemon down waits for it
// (said once), follows it when it starts, and when it stops says so once
// and waits again, backing off, without a resume line naming seq -1 and
// without repeating "not running" every retry (issue 32).
// --no-reconnect still exits 3 at once.
func TestTailWaitsForDaemon(t *testing.T) {
	d := newDaemon(t)
	d.stop(true)

	if _, serr, code := runBin(t, d.bin, "tail", "--no-reconnect", "--socket", d.sock); code != 3 || !strings.Contains(serr, "not running") {
		t.Errorf("tail --no-reconnect with the daemon down: exit %d %s", code, serr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, "tail", "--socket", d.sock)
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
	waitFor(t, "tail to say it waits for the daemon", func() (bool, string) {
		return strings.Contains(text(errOut), "the daemon is not running; waiting for it"), text(errOut)
	})
	time.Sleep(2 * time.Second) // several retries
	select {
	case err := <-done:
		t.Fatalf("tail exited with the daemon down: %v\n%s", err, text(errOut))
	default:
	}
	d.start()
	waitFor(t, "tail to follow the daemon once it starts", func() (bool, string) {
		return strings.Contains(text(errOut), "following the feed live"), text(errOut)
	})
	d.stop(true)
	waitFor(t, "tail to say the daemon stopped, and wait", func() (bool, string) {
		e := text(errOut)
		return strings.Contains(e, "feed ended (the daemon stopped)") && strings.Count(e, "not running; waiting") == 2, e
	})
	time.Sleep(3 * time.Second)
	e := text(errOut)
	if n := strings.Count(e, "not running"); n != 2 || strings.Contains(e, "seq -1") || strings.Contains(e, "since=") {
		t.Errorf("tail's messages over two outages:\n%s", e)
	}
	d.start()
	waitFor(t, "tail to reconnect", func() (bool, string) {
		return strings.Contains(text(errOut), "reconnected; following the feed live"), text(errOut)
	})
	cancel()
	<-done
}

// runBin runs the binary with args and returns stdout, stderr and the exit
// code.
func runBin(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	c := exec.Command(bin, args...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}
