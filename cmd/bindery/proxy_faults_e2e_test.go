package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding/judgetest"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// accepts counts the accept events in the feed.
func (pe *proxyE2E) accepts() int { return strings.Count(pe.feed(), `"type":"accept"`) }

// apiErrorOf reads an error answer in the API's shape.
func apiErrorOf(t *testing.T, b []byte) (typ, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type == "" {
		t.Fatalf("not an error in the API's shape: %s", b)
	}
	return e.Error.Type, e.Error.Message
}

// TestProxyStreamFaults: a stream the upstream cuts, one that carries an
// error event, one that stalls past --idle-timeout, and a 200 that is not
// an event stream each reach the client as they are (a stall ends with an
// error event of the proxy's), and none is accepted.
func TestProxyStreamFaults(t *testing.T) {
	pe := newProxyE2E(t, "--idle-timeout", "300ms")
	for _, c := range []struct {
		fault upstreamtest.Fault
		want  string // in the answer the client reads
	}{
		{upstreamtest.FaultCut, "content_block_stop"},
		{upstreamtest.FaultErrorEvent, "overloaded_error"},
		{upstreamtest.FaultStall, "sent nothing for 300ms"},
		{upstreamtest.FaultNotSSE, "gateway says hello"},
	} {
		fault := c.fault
		pe.up.SetFault(func(int, []byte) upstreamtest.Fault { return fault })
		before := pe.accepts()
		h := newAPIHost(t, pe.addr, "claude-opus-5-5")
		h.user(fmt.Sprintf("fault %d", fault))
		status, body, _ := h.post(h.body())
		if status != 200 || !strings.Contains(string(body), c.want) {
			t.Errorf("fault %d: status %d, answer %.300q; want 200 with %q", fault, status, body, c.want)
		}
		if _, err := assembleSSE(body); err == nil {
			t.Errorf("fault %d: the client read a whole reply", fault)
		}
		if got := pe.accepts(); got != before {
			t.Errorf("fault %d: %d accepts recorded for a reply that never completed", fault, got-before)
		}
	}
	// The proxy still serves: the next request is answered and accepted.
	pe.up.SetFault(nil)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.user("after the faults")
	h.turn()
	waitFor(t, "the accept of a whole reply", func() (bool, string) {
		n := pe.accepts()
		return n == 1, fmt.Sprintf("%d accepts", n)
	})
}

// TestProxyCallerGoesAway: a client that leaves mid-stream cancels the
// upstream request, and nothing is accepted.
func TestProxyCallerGoesAway(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetStream(false, 100*time.Millisecond) // a reply of 9 events: 0.8 s
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.user("a long answer")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, pe.addr+"/v1/messages", bytes.NewReader(h.body()))
	req.Header = h.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel() // the client goes away after its first bytes
	resp.Body.Close()
	time.Sleep(2 * time.Second) // the rest of the reply would have come by now
	if n := pe.accepts(); n != 0 {
		t.Errorf("%d accepts for a reply the client never read", n)
	}
}

// TestProxyFailsOpen: with the daemon killed, requests go upstream as the
// client sent them and succeed; the proxy says so once; when the daemon is
// back, requests are compiled again.
func TestProxyFailsOpen(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetReply(toolLoop(1))
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.cycle("before the crash")
	pe.daemon.cmd.Process.Signal(syscall.SIGKILL)
	<-pe.daemon.done
	h.cycle("while bindery is down")
	h.cycle("still down")
	got := pe.up.Messages()
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d: %d", i, r.Status)
		}
	}
	// Requests made while it is down reach the upstream byte for byte.
	for i := 2; i < len(h.sent); i++ {
		if !bytes.Equal(got[i].Body, h.sent[i]) {
			t.Errorf("request %d was changed with bindery down", i)
		}
	}
	if n := strings.Count(pe.proxyLog(), "did not answer"); n != 1 {
		t.Errorf("the proxy said %d times that bindery is down, want once:\n%s", n, pe.proxyLog())
	}
	pe.daemon = pe.serve()
	waitFor(t, "the proxy to notice bindery is back", func() (bool, string) {
		return strings.Contains(pe.proxyLog(), "answers again"), pe.proxyLog()
	})
	h.cycle("back")
	// Two compiles before the crash, none while down, two after.
	if n := strings.Count(pe.feed(), `"type":"compile"`); n != 4 {
		t.Errorf("%d compiles, want 4 (2 before the crash, 2 after bindery is back)", n)
	}
}

// TestProxyBounds: the proxy's own refusals are in the API's error shape,
// each naming its bound: an oversized body, malformed JSON, and more
// requests in flight than --max-streams; a non-loopback address is refused
// at start.
func TestProxyBounds(t *testing.T) {
	pe := newProxyE2E(t, "--max-body", "4096", "--max-streams", "2")
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.user(strings.Repeat("x", 5000))
	status, body, hdr := h.post(h.body())
	if typ, msg := apiErrorOf(t, body); status != 413 || typ != "request_too_large" || !strings.Contains(msg, "--max-body") {
		t.Errorf("oversized: %d %s", status, body)
	}
	if hdr.Get("X-Should-Retry") != "false" {
		t.Errorf("oversized: x-should-retry %q", hdr.Get("X-Should-Retry"))
	}
	status, body, _ = h.post([]byte(`{"model":"claude-opus-5-5","messages":[{"role":"user","content":"hi"}`))
	if typ, _ := apiErrorOf(t, body); status != 400 || typ != "invalid_request_error" {
		t.Errorf("malformed: %d %s", status, body)
	}
	if n := len(pe.up.Requests()); n != 0 {
		t.Errorf("%d bad requests reached the upstream", n)
	}
	// Two streams held open (the upstream stalls), the third is refused.
	pe.up.SetFault(func(int, []byte) upstreamtest.Fault { return upstreamtest.FaultStall })
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	small := newAPIHost(t, pe.addr, "claude-opus-5-5")
	small.user("hold")
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, pe.addr+"/v1/messages", bytes.NewReader(small.body()))
			req.Header = small.header.Clone()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, "two streams in flight", func() (bool, string) {
		n := len(pe.up.Messages())
		return n == 2, fmt.Sprintf("%d", n)
	})
	status, body, _ = small.post(small.body())
	if typ, msg := apiErrorOf(t, body); status != 529 || typ != "overloaded_error" || !strings.Contains(msg, "--max-streams") {
		t.Errorf("over --max-streams: %d %s", status, body)
	}
	cancel()
	wg.Wait()

	_, stderr, code := pe.run("proxy", "--listen", "0.0.0.0:0", "--upstream", pe.up.URL)
	if code == 0 || !strings.Contains(stderr, "not a loopback address") {
		t.Errorf("a proxy on 0.0.0.0 started (exit %d): %s", code, stderr)
	}
}

// TestProxyTooManyMessages: a request with more messages than the
// Messages API takes (100,000) goes upstream byte for byte, uncompiled,
// and the client gets the upstream's answer (the proxy stops reading it
// at the bound: TestReadRequestBody).
func TestProxyTooManyMessages(t *testing.T) {
	pe := newProxyE2E(t)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	body := []byte(`{"model":"claude-opus-5-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}` +
		strings.Repeat(`,{"role":"user","content":"hi"}`, api.ProviderMaxMessages) + `]}`)
	status, _, _ := h.post(body)
	got := pe.up.Requests()
	if len(got) != 1 || !bytes.Equal(got[0].Body, body) {
		t.Fatalf("the upstream got %d requests; want the one, as sent", len(got))
	}
	if status != got[0].Status {
		t.Errorf("the client got %d, the upstream answered %d", status, got[0].Status)
	}
	if n := strings.Count(pe.feed(), `"type":"compile"`); n != 0 {
		t.Errorf("%d compiles of a request over the API's bound", n)
	}
}

// TestProxyOtherPaths: GET /v1/models passes through, and count_tokens is
// compiled as a dry run (no compile recorded) and forwarded.
func TestProxyOtherPaths(t *testing.T) {
	pe := newProxyE2E(t)
	req, _ := http.NewRequest(http.MethodGet, pe.addr+"/v1/models", nil)
	req.Header.Set("x-api-key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "claude-opus-5-5") {
		t.Errorf("GET /v1/models: %d %s", resp.StatusCode, b)
	}
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.user("count me")
	req, _ = http.NewRequest(http.MethodPost, pe.addr+"/v1/messages/count_tokens", bytes.NewReader(h.body()))
	req.Header = h.header.Clone()
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "input_tokens") {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	if out := pe.feed(); strings.Contains(out, `"type":"compile"`) {
		t.Errorf("count_tokens recorded a compile:\n%s", out)
	}
	var last upstreamtest.Request
	for _, r := range pe.up.Requests() {
		last = r
	}
	if last.Path != "/v1/messages/count_tokens" || !bytes.Equal(last.Body, h.body()) {
		t.Errorf("count_tokens did not reach the upstream as sent: %s", last.Path)
	}
}

// TestProxyManyStreams: hundreds of concurrent streams through one proxy
// each get their whole reply, and each is accepted.
func TestProxyManyStreams(t *testing.T) {
	pe := newProxyE2E(t)
	pe.up.SetStream(true, 0)
	pe.up.SetReply(func(n int, body []byte) []judgetest.ReplyBlock {
		return []judgetest.ReplyBlock{{Type: "thinking", Text: "t"}, {Type: "text", Text: "ok"}}
	})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := newAPIHost(t, pe.addr, "claude-opus-5-5")
			h.header.Set("X-Session-Id", fmt.Sprintf("ses_%03d", i))
			h.user(fmt.Sprintf("stream %d", i))
			req, _ := http.NewRequest(http.MethodPost, pe.addr+"/v1/messages", bytes.NewReader(h.body()))
			req.Header = h.header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if _, err := assembleSSE(b); err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("stream %d: %d %v", i, resp.StatusCode, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitFor(t, "every reply accepted", func() (bool, string) {
		got := pe.accepts()
		return got == n, fmt.Sprintf("%d of %d", got, n)
	})
}

// TestProxyBadSettings: a variable or flag that does not parse is refused
// at start, naming it.
func TestProxyBadSettings(t *testing.T) {
	e := newE2E(t)
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"BINDERY_COMPILE_TIMEOUT=soon", nil, "BINDERY_COMPILE_TIMEOUT"},
		{"BINDERY_MAX_STREAMS=-3", nil, "BINDERY_MAX_STREAMS"},
		{"", []string{"--idle-timeout", "0s"}, "--idle-timeout"},
		{"", []string{"--upstream", "ftp://example.invalid"}, "not an http(s) URL"},
		{"", []string{"--upstream", "https://user:pw@example.invalid"}, "carries a user or password"},
		{"", []string{"--upstream", "ftp://user:pw@example.invalid"}, "not an http(s) URL"},
		{"", []string{"--upstream", "http://user:pw@[::1"}, "does not parse"},
	} {
		cmd := exec.Command(e.bin, append([]string{"proxy", "--listen", "127.0.0.1:0"}, c.args...)...)
		cmd.Env = append(append([]string{}, e.env...), c.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s %v: %v\n%s", c.env, c.args, err, out)
		}
		if strings.Contains(string(out), "pw@") {
			t.Errorf("%v: the upstream's password was shown: %s", c.args, out)
		}
	}
}

// TestProxyNotStreamed: a request without stream gets the JSON answer, and
// its reply is accepted: the next turn replays its block, read.
func TestProxyNotStreamed(t *testing.T) {
	pe := newProxyE2E(t)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	h.top["stream"] = false
	h.user("one")
	h.turn()
	h.user("two")
	h.turn()
	got := pe.up.Messages()
	if len(got) != 2 || len(got[1].Result.Read()) != 1 {
		t.Fatalf("the second turn read %v blocks", len(got[len(got)-1].Result.Read()))
	}
	waitFor(t, "both replies accepted", func() (bool, string) {
		n := pe.accepts()
		return n == 2, fmt.Sprintf("%d", n)
	})
}
