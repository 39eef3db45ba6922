package main

// End to end: every bound on what a client sends answers its own error
// (README "Limits"), and signals and the socket path are handled as
// documented. A real `bindery serve` process on a real socket.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// log is the daemon's current log.
func (d *bindDaemon) log() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, fmt.Sprintf("log%d", d.logs-1)))
	return string(b)
}

// rssKiB is the daemon's resident set (VmRSS), for the report's figures.
func (d *bindDaemon) rssKiB() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

func dirSize(t testing.TB, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// postErr posts body and returns the status and the decoded error.
func postErr(t testing.TB, sock, path string, body []byte) (int, api.Error) {
	t.Helper()
	status, answer := postBody(t, sock, path, body)
	var eb struct {
		Error api.Error `json:"error"`
	}
	json.Unmarshal(answer, &eb)
	return status, eb.Error
}

func TestInputLimitsE2E(t *testing.T) {
	d := newDaemon(t, "--max-messages", "1000")
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	body := h.body(h.system)
	mb := strings.Repeat("x", 1<<20)
	call := func(m map[string]any) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, path string
		body       []byte
		field      string
		flag       string
	}{
		{"conversation", "/v1/compile", call(map[string]any{"conversation": mb, "request": json.RawMessage(body)}), `"conversation"`, "--max-id"},
		{"branch", "/v1/compile", call(map[string]any{"conversation": "c", "branch": mb, "request": json.RawMessage(body)}), `"branch"`, "--max-id"},
		{"parent", "/v1/compile", call(map[string]any{"conversation": "c", "parent": map[string]any{"conversation": mb}, "request": json.RawMessage(body)}), `"parent.conversation"`, "--max-id"},
		{"sessionFile", "/v1/compile", call(map[string]any{"conversation": "c", "sessionFile": "/" + strings.Repeat("d/", 3000), "request": json.RawMessage(body)}), `"sessionFile"`, "--max-path"},
		{"compileId", "/v1/accept", call(map[string]any{"compileId": mb}), `"compileId"`, "--max-id"},
		{"release conversation", "/v1/release", call(map[string]any{"conversation": mb, "signature": "s"}), `"conversation"`, "--max-id"},
		{"signature", "/v1/release", call(map[string]any{"conversation": "c", "signature": strings.Repeat(mb, 1)}), `"signature"`, "--max-signature"},
	} {
		st, e := postErr(t, d.sock, tc.path, tc.body)
		if st != http.StatusBadRequest || e.Code != api.CodeLimitExceeded || !strings.Contains(e.Message, tc.field) || !strings.Contains(e.Message, tc.flag) {
			t.Errorf("%s of 1 MB: %d %s %q, want 400 limit_exceeded naming %s and %s", tc.name, st, e.Code, e.Message, tc.field, tc.flag)
		}
	}
	if _, err := d.client.Conversation(ctxT(t), strings.Repeat("y", 300)); !api.IsCode(err, api.CodeLimitExceeded) {
		t.Errorf("GET /v1/conversations/<300 bytes>: %v", err)
	}
	if _, err := d.client.Events(ctxT(t), api.EventsOptions{Conversation: strings.Repeat("y", 300)}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("events ?conversation=<300 bytes>: %v, want a 400", err)
	}

	// The attack of issue 13: 200 compiles with 1 MB conversation and
	// branch ids. Every one is refused before anything is kept.
	stateBefore := dirSize(t, filepath.Join(d.dir, "state"))
	big := call(map[string]any{"conversation": mb, "branch": mb, "request": json.RawMessage(body)})
	for range 200 {
		if st, e := postErr(t, d.sock, "/v1/compile", big); st != http.StatusBadRequest {
			t.Fatalf("1 MB ids: %d %+v", st, e)
		}
	}
	grew := dirSize(t, filepath.Join(d.dir, "state")) - stateBefore
	t.Logf("after 200 compiles with 1 MB ids: state folder grew %d bytes, daemon RSS %d KiB", grew, d.rssKiB())
	if grew > 1<<20 {
		t.Errorf("the state folder grew by %d bytes on refused calls", grew)
	}

	// --max-messages: the bound is taken, one more is refused naming it.
	msgs := func(n int) []byte {
		m := make([]any, n)
		for i := range m {
			m[i] = map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprintf("message %d", i)}
		}
		b, _ := json.Marshal(map[string]any{"model": h.model, "max_tokens": 10, "messages": m})
		return b
	}
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "many", Request: msgs(1000), Return: api.ReturnPlan}); err != nil {
		t.Errorf("1000 messages at --max-messages 1000: %v", err)
	}
	_, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "many", Request: msgs(1001), Return: api.ReturnPlan})
	if e, ok := err.(*api.Error); !ok || e.Code != api.CodeLimitExceeded || e.Status != 400 || !strings.Contains(e.Message, "1000") || !strings.Contains(e.Message, "--max-messages") {
		t.Errorf("1001 messages at --max-messages 1000: %v", err)
	}

	// A release naming a signature bindery never saw records nothing and
	// says so; one it kept is released.
	rel, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: "c", Signature: strings.Repeat("z", 4096)})
	if err != nil || rel.Released != 0 || rel.Reason == "" {
		t.Errorf("release of an unknown signature: %+v %v, want released 0 with a reason", rel, err)
	}
	real, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "c", Request: body})
	if err != nil {
		t.Fatal(err)
	}
	res := h.send(real.Request, h.reply(false))
	if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: real.CompileID, Reply: res.Reply}); err != nil {
		t.Fatal(err)
	}
	var sig string
	var rep struct {
		Content []struct{ Type, Signature string } `json:"content"`
	}
	json.Unmarshal(res.Reply, &rep)
	for _, b := range rep.Content {
		if b.Type == "thinking" {
			sig = b.Signature
		}
	}
	if rel, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: "c", Signature: sig}); err != nil || rel.Released != 1 || rel.Reason != "" {
		t.Errorf("release of a stamped signature: %+v %v, want released 1", rel, err)
	}
	if st, err := d.client.Conversation(ctxT(t), "c"); err != nil || len(st.Releases) != 1 {
		t.Errorf("releases recorded: %+v %v, want only the known one", st, err)
	}
}

// A body trickled byte by byte is cut with 408 body_timeout once it falls
// below the minimum rate after the grace; the daemon serves on.
func TestSlowBodyE2E(t *testing.T) {
	d := newDaemon(t, "--body-grace", "1s", "--min-body-rate", "1KiB")
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/compile HTTP/1.1\r\nHost: bindery\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	// Keep trickling a byte at a time until the daemon answers (it must:
	// without the bound it never did).
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("reading the answer to a trickled body: %v", err)
			close(answered)
			return
		}
		answered <- resp
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case resp, ok := <-answered:
			if !ok {
				return
			}
			var eb struct{ Error api.Error }
			json.NewDecoder(resp.Body).Decode(&eb)
			if resp.StatusCode != http.StatusRequestTimeout || eb.Error.Code != api.CodeBodyTimeout || !strings.Contains(eb.Error.Message, "--min-body-rate") {
				t.Fatalf("trickled body: %d %+v, want 408 body_timeout naming --min-body-rate", resp.StatusCode, eb.Error)
			}
			if _, err := d.client.Health(ctxT(t)); err != nil {
				t.Fatalf("health after a cut body: %v", err)
			}
			return
		case <-tick.C:
			c.Write([]byte(" "))
		case <-deadline:
			t.Fatal("a body trickled at 5 bytes/s was not cut within 60 s (--body-grace 1s, --min-body-rate 1KiB)")
		}
	}
}

// SIGHUP (a closing terminal, systemctl reload) is logged and ignored.
func TestSighupE2E(t *testing.T) {
	d := newDaemon(t)
	// one at a time: pending signals of one kind coalesce
	for i := 1; i <= 3; i++ {
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("the daemon to log SIGHUP number %d", i), func() (bool, string) {
			select {
			case err := <-d.done:
				d.cmd = nil
				t.Fatalf("the daemon exited on SIGHUP: %v", err)
			default:
			}
			n := strings.Count(d.log(), "SIGHUP ignored")
			return n == i, fmt.Sprintf("%d SIGHUPs logged", n)
		})
	}
	select {
	case err := <-d.done:
		d.cmd = nil
		t.Fatalf("the daemon exited on SIGHUP: %v", err)
	default:
	}
	if _, err := d.client.Health(ctxT(t)); err != nil {
		t.Fatalf("health after SIGHUP: %v", err)
	}
}

// On shutdown the daemon removes its own socket, never a file a user put
// at the socket's path.
func TestShutdownKeepsForeignFileAtSocketPath(t *testing.T) {
	d := newDaemon(t)
	if err := os.Remove(d.sock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.sock, []byte("my notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.stop(true)
	if b, err := os.ReadFile(d.sock); err != nil || string(b) != "my notes" {
		t.Fatalf("the file at the socket path after shutdown: %q %v", b, err)
	}
	if !strings.Contains(d.log(), "no longer the socket this daemon created") {
		t.Errorf("the daemon did not say why it left the path alone; log:\n%s", d.log())
	}
	os.Remove(d.sock)
	// and its own socket it does remove
	d.start()
	d.stop(true)
	if _, err := os.Lstat(d.sock); !os.IsNotExist(err) {
		t.Errorf("own socket after shutdown: %v", err)
	}
}
