package main

// The proxy's end-to-end harness: a real `bindery serve`, a real `bindery
// proxy` process in front of a test upstream that plays the provider by
// its documented rules (proxy/upstreamtest), and hosts that talk to the
// proxy over HTTP as the clients do.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding/judgetest"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// testAPIKey is the credential the tests' clients send: it must never be
// found in a log, the database or an event.
const testAPIKey = "sk-ant-api03-NEVER-LOG-ME-0123456789abcdef"

type proxyE2E struct {
	*e2e
	daemon *daemonProc
	up     *upstreamtest.Upstream
	proxy  *exec.Cmd
	addr   string // http://127.0.0.1:PORT
	// metrics is the proxy's metrics URL when started with --metrics
	metrics string
	log     *lockedWriter
	done    chan error
}

// newProxyE2E starts the daemon, the test upstream and the proxy.
func newProxyE2E(t *testing.T, proxyArgs ...string) *proxyE2E {
	t.Helper()
	return newProxyE2EWith(t, nil, proxyArgs...)
}

// newProxyE2EWith is newProxyE2E with prep run on the test's folders
// before the daemon starts (a price file in the state folder, say).
func newProxyE2EWith(t *testing.T, prep func(e *e2e), proxyArgs ...string) *proxyE2E {
	t.Helper()
	e := newE2E(t)
	if prep != nil {
		prep(e)
	}
	pe := &proxyE2E{e2e: e, daemon: e.serve()}
	up, err := upstreamtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	pe.up = up
	pe.startProxy(proxyArgs...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", pe.proxyLog())
			out := pe.feed()
			t.Logf("event feed:\n%s", out)
		}
	})
	return pe
}

// startProxy runs `bindery proxy` on a free loopback port and reads the
// address it prints.
func (pe *proxyE2E) startProxy(args ...string) { pe.startProxyTB(pe.t, args...) }

func (pe *proxyE2E) startProxyTB(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(pe.bin, append([]string{"proxy", "--listen", "127.0.0.1:0", "--upstream", pe.up.URL}, args...)...)
	cmd.Env = pe.env
	pe.log = &lockedWriter{w: &bytes.Buffer{}}
	cmd.Stderr = pe.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pe.proxy, pe.done = cmd, make(chan error, 1)
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("bindery proxy printed no address: %v\n%s", err, pe.proxyLog())
	}
	if slices.Contains(args, "--metrics") {
		// "  metrics: http://ADDR/metrics" follows the clients' lines.
		for pe.metrics == "" {
			l, err := br.ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				t.Fatalf("bindery proxy printed no metrics address: %v\n%s", err, pe.proxyLog())
			}
			if u, ok := strings.CutPrefix(strings.TrimSpace(l), "metrics: "); ok {
				pe.metrics = u
			}
		}
	}
	go func() { io.Copy(io.Discard, br); pe.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-pe.done
		}
	})
	f := strings.Fields(line)
	for _, w := range f {
		if strings.HasPrefix(w, "http://127.0.0.1:") && pe.addr == "" {
			pe.addr = strings.TrimSuffix(w, ",") // the first: the proxy's own
		}
	}
	if pe.addr == "" {
		t.Fatalf("no address in %q", line)
	}
}

func (pe *proxyE2E) proxyLog() string { return pe.log.String() }

// String is what was written so far.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// apiHost is a client of the Messages API keeping one conversation as plain
// JSON values, the way an agent does: every reply appended as it came.
type apiHost struct {
	t       testing.TB
	base    string
	header  http.Header
	top     map[string]any
	msgs    []any
	sent    [][]byte // every body sent, in order
	answers []int    // every status the host got
}

func newAPIHost(t testing.TB, base string, model string) *apiHost {
	h := &apiHost{t: t, base: base, header: http.Header{}, top: map[string]any{
		"model":      model,
		"max_tokens": 32000,
		"system":     []any{map[string]any{"type": "text", "text": "You are a careful coding agent."}},
		"tools": []any{
			map[string]any{"name": "read", "description": "Read a file.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
		},
		"thinking": map[string]any{"type": "adaptive"},
		"stream":   true,
	}}
	h.header.Set("x-api-key", testAPIKey)
	h.header.Set("anthropic-version", "2023-06-01")
	h.header.Set("Content-Type", "application/json")
	h.header.Set("User-Agent", "bindery-test-host/1")
	return h
}

func (h *apiHost) user(text string) {
	h.msgs = append(h.msgs, map[string]any{"role": "user", "content": text})
}

func (h *apiHost) toolResult(id, text string) {
	h.msgs = append(h.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": text}}})
}

func (h *apiHost) body() []byte {
	top := make(map[string]any, len(h.top)+1)
	for k, v := range h.top {
		top[k] = v
	}
	top["messages"] = h.msgs
	b, err := json.Marshal(top)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// post sends the conversation and returns the status and the answer's
// bytes, without touching the conversation.
func (h *apiHost) post(body []byte) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.base+"/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = h.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST /v1/messages: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("reading the answer: %v", err)
	}
	h.sent = append(h.sent, body)
	h.answers = append(h.answers, resp.StatusCode)
	return resp.StatusCode, b, resp.Header
}

// turn sends the conversation, requires a 200, and appends the reply,
// assembled from the event stream (or the JSON answer) as an SDK does.
func (h *apiHost) turn() map[string]any {
	h.t.Helper()
	status, b, hdr := h.post(h.body())
	if status != 200 {
		h.t.Fatalf("turn %d: status %d: %s", len(h.sent), status, b)
	}
	var msg map[string]any
	if strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		var err error
		if msg, err = assembleSSE(b); err != nil {
			h.t.Fatalf("turn %d: %v\n%s", len(h.sent), err, b)
		}
	} else if err := json.Unmarshal(b, &msg); err != nil {
		h.t.Fatal(err)
	}
	h.msgs = append(h.msgs, map[string]any{"role": "assistant", "content": msg["content"]})
	return msg
}

// assembleSSE builds the message from a whole event stream: the test's own
// reading of the streaming format, independent of the proxy's.
func assembleSSE(b []byte) (map[string]any, error) {
	var msg map[string]any
	var blocks []map[string]any
	partial := map[int]string{}
	stopped := false
	for _, ev := range strings.Split(string(b), "\n\n") {
		var data string
		for _, l := range strings.Split(ev, "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				data = d
			}
		}
		if data == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return nil, err
		}
		idx := -1
		if f, ok := e["index"].(float64); ok {
			idx = int(f)
		}
		switch e["type"] {
		case "message_start":
			msg = e["message"].(map[string]any)
		case "content_block_start":
			blocks = append(blocks, e["content_block"].(map[string]any))
		case "content_block_delta":
			d := e["delta"].(map[string]any)
			bl := blocks[idx]
			switch d["type"] {
			case "text_delta":
				bl["text"] = bl["text"].(string) + d["text"].(string)
			case "thinking_delta":
				bl["thinking"] = bl["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				bl["signature"] = d["signature"]
			case "input_json_delta":
				partial[idx] += d["partial_json"].(string)
			}
		case "content_block_stop":
			if p, ok := partial[idx]; ok {
				var in any
				if err := json.Unmarshal([]byte(p), &in); err != nil {
					return nil, err
				}
				blocks[idx]["input"] = in
			}
		case "message_stop":
			stopped = true
		case "error":
			return nil, fmt.Errorf("error event: %s", data)
		}
	}
	if !stopped || msg == nil {
		return nil, fmt.Errorf("the stream has no message_stop")
	}
	content := make([]any, len(blocks))
	for i, bl := range blocks {
		content[i] = bl
	}
	msg["content"] = content
	return msg, nil
}

// toolLoop makes the upstream answer a user message with a thinking block
// and a tool call, each tool result with another until `calls` results
// follow the last user text, then a thinking block and text.
func toolLoop(calls int) func(n int, body []byte) []judgetest.ReplyBlock {
	return func(n int, body []byte) []judgetest.ReplyBlock {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		results := 0
		for i := len(req.Messages) - 1; i >= 0; i-- {
			m := req.Messages[i]
			if m.Role != "user" {
				continue
			}
			blocks, _ := m.Content.([]any)
			isResult := len(blocks) > 0
			for _, b := range blocks {
				if o, _ := b.(map[string]any); o == nil || o["type"] != "tool_result" {
					isResult = false
				}
			}
			if !isResult {
				break
			}
			results++
		}
		if results < calls {
			return []judgetest.ReplyBlock{
				{Type: "thinking", Text: fmt.Sprintf("I should read file %d", n)},
				{Type: "tool_use", ID: fmt.Sprintf("toolu_%03d", n), Name: "read", Input: map[string]any{"path": fmt.Sprintf("f%d.go", n)}},
			}
		}
		return []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprintf("done after %d", n)}, {Type: "text", Text: fmt.Sprintf("answer %d", n)}}
	}
}

// lastToolID is the id of the tool_use in the host's last message.
func (h *apiHost) lastToolID() string {
	m := h.msgs[len(h.msgs)-1].(map[string]any)
	for _, b := range m["content"].([]any) {
		if o := b.(map[string]any); o["type"] == "tool_use" {
			return o["id"].(string)
		}
	}
	return ""
}

// facts is the judge's individual verdicts on a body's thinking blocks.
func (pe *proxyE2E) valid(body []byte) (valid, total int) {
	pe.t.Helper()
	fs, err := pe.up.Judge.Facts(body)
	if err != nil {
		pe.t.Fatal(err)
	}
	for _, f := range fs {
		if f.Valid() {
			valid++
		}
	}
	return valid, len(fs)
}

// feed is the event log so far, one JSON event a line, read from the
// daemon's feed until it has been quiet a moment.
func (pe *proxyE2E) feed() string {
	pe.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := api.NewClient(pe.sock)
	defer c.Close()
	s, err := c.Events(ctx, api.EventsOptions{Since: 0, HasSince: true})
	if err != nil {
		pe.t.Fatalf("events: %v", err)
	}
	defer s.Close()
	var out strings.Builder
	for {
		ectx, ecancel := context.WithTimeout(ctx, 300*time.Millisecond)
		e, err := s.Next(ectx)
		ecancel()
		if err != nil {
			return out.String()
		}
		out.Write(e.Raw)
		out.WriteByte('\n')
	}
}
