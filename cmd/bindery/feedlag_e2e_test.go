package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/my-pi/bindery/api"
)

// A websocket subscriber that falls behind is dropped with a readable
// close (1008, "subscriber fell behind: N events buffered; resume with
// ?since=SEQ"), resumes from that seq with no gap, and `bindery tail`
// prints the reason and resumes by itself.
func TestFeedLagE2E(t *testing.T) {
	d := newDaemon(t, "--feed-buffer", "4", "--feed-stall", "5m")
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	body := h.body(h.system)
	conv := strings.Repeat("c", 200) // bigger events fill the socket sooner
	drops := func() int { return strings.Count(d.log(), "a subscriber fell behind and is dropped") }
	// lag compiles until the daemon has dropped n subscribers.
	lag := func(n int) {
		t.Helper()
		for i := 0; drops() < n; i++ {
			if i == 50_000 {
				t.Fatalf("50000 compiles and the subscriber that reads nothing was not dropped")
			}
			if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Request: body, Return: api.ReturnPlan}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The Go client: subscribes, reads nothing while events pile up.
	st, err := d.client.Events(ctxT(t), api.EventsOptions{HasSince: true, Since: 0})
	if err != nil {
		t.Fatal(err)
	}
	lag(1)
	var got int
	var closeErr error
	for {
		if _, err := st.Next(ctxT(t)); err != nil {
			closeErr = err
			break
		}
		got++
	}
	var ce websocket.CloseError
	if !errors.As(closeErr, &ce) || ce.Code != websocket.StatusPolicyViolation {
		t.Fatalf("after %d events the feed ended with %v, want a 1008 close", got, closeErr)
	}
	want := fmt.Sprintf("subscriber fell behind: 4 events buffered; resume with ?since=%d", st.Last)
	if ce.Reason != want {
		t.Fatalf("close reason %q, want %q", ce.Reason, want)
	}
	again, err := d.client.Events(ctxT(t), api.EventsOptions{HasSince: true, Since: st.Last})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := again.Next(ctxT(t)); err != nil || e.Seq != st.Last+1 {
		t.Fatalf("resumed after seq %d: %+v %v, want seq %d", st.Last, e, err, st.Last+1)
	}
	again.Close()

	// bindery tail: its stdout is not read, so it stops reading the feed.
	cmd := exec.Command(d.bin, "tail", "--since", "0", "--json")
	cmd.Env = append(os.Environ(), "BINDERY_SOCKET="+d.sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr strings.Builder
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	lag(2)
	// Now read: tail prints the backlog, the reason, and resumes.
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	said := func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(stderr.String(), "feed ended (subscriber fell behind: 4 events buffered; resume with ?since="), stderr.String()
	}
	seen := map[int64]bool{}
	record := func(l string) {
		var e api.Event
		if err := jsonUnmarshal(l, &e); err != nil {
			t.Fatalf("tail --json line %q: %v", l, err)
		}
		seen[e.Seq] = true
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for ok := false; !ok; {
		select {
		case l, open := <-lines:
			if !open {
				_, s := said()
				t.Fatalf("tail's output ended; stderr:\n%s", s)
			}
			record(l)
		case <-tick.C:
			ok, _ = said()
		case <-deadline:
			_, s := said()
			t.Fatalf("tail did not report the close reason within 60 s; stderr:\n%s", s)
		}
	}
	if _, s := said(); !strings.Contains(s, "resuming after seq") {
		t.Fatalf("tail did not say it resumes: %s", s)
	}
	// After resuming, tail goes on to the last event with no gap.
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "last", Request: body, Return: api.ReturnPlan}); err != nil {
		t.Fatal(err)
	}
	oldest, last := int64(0), int64(0)
	for last == 0 {
		select {
		case l, open := <-lines:
			if !open {
				t.Fatal("tail's output ended before the last event")
			}
			record(l)
			var e api.Event
			jsonUnmarshal(l, &e)
			if e.Conversation == "last" {
				last = e.Seq
			}
		case <-deadline:
			t.Fatal("tail did not print the event made after it resumed within 60 s")
		}
	}
	for s := range seen {
		if oldest == 0 || s < oldest {
			oldest = s
		}
	}
	for s := oldest; s <= last; s++ {
		if !seen[s] {
			t.Fatalf("tail missed seq %d (saw %d..%d)", s, oldest, last)
		}
	}
	_, s := said()
	t.Logf("tail: %d events, stderr: %s", len(seen), strings.TrimSpace(s))
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
