// Package upstreamtest is a test upstream for bindery proxy: an Anthropic
// Messages API on loopback that plays the provider by its documented
// binding rules (binding/judgetest, written from the research alone: the
// prefix check, the run rule, the latest assistant message, drop_block and
// its input_transformations, the model check), streams its answers as the
// provider's server-sent events, and records what it was sent. It is the
// only thing faked in the proxy's tests: the clients, the daemon and the
// proxy are real. Test-only, as judgetest is.
package upstreamtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/my-pi/bindery/binding/judgetest"
)

// BindingBeta is the header value that makes the provider report drops.
const BindingBeta = "thinking-binding-controls-2026-08-01"

// Request is one request the upstream received.
type Request struct {
	Path    string
	Query   string
	Header  http.Header
	Body    []byte
	Status  int
	Result  judgetest.Result // the judge's verdict (Messages requests)
	Refused string           // the error message of a refusal
	Usage   Usage            // what the answer's usage said (a 200 Messages answer)
}

// Usage is the usage an answer reports: deterministic figures of the
// request (its number and size), in the documented shape (message_start
// carries input and cache counts, message_delta the output).
type Usage struct {
	Input, Output, CacheRead, CacheWrite5m, CacheWrite1h int64
}

// Fault makes the upstream misbehave on a request.
type Fault int

const (
	FaultNone       Fault = iota
	FaultCut              // the connection closes after the first block
	FaultErrorEvent       // an overloaded error event after the first block
	FaultStall            // the stream stops after the first block and never ends
	FaultNotSSE           // a 200 with an HTML body for a streamed request
	Fault500              // a 500 api_error
)

// Upstream is the test provider.
type Upstream struct {
	Judge *judgetest.Judge
	URL   string // http://127.0.0.1:PORT

	reply func(n int, body []byte) []judgetest.ReplyBlock
	fault func(n int, body []byte) Fault
	pings bool
	delay time.Duration
	delta int // bytes of text a delta carries (0: the text in two halves)
	// accounts maps a credential to the account it authenticates
	// (SetAccounts); a credential not in it is its own account.
	accounts map[string]string

	srv *http.Server
	ln  net.Listener

	mu         sync.Mutex
	n          int
	incomplete int // bodies cut short of their length
	requests   []Request
	stalls     chan struct{}
}

// Start runs an upstream on 127.0.0.1 under the documented reading, as a
// new account (Opus 5.5 and Fable 5.1 enforce the prefix check), reading
// string content as one text block (judgetest.Options.StringIsTextBlock).
func Start() (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{Judge: judgetest.New(judgetest.Options{Reading: judgetest.Documented(), NewAccount: true, StringIsTextBlock: true}), ln: ln,
		URL: "http://" + ln.Addr().String(), stalls: make(chan struct{})}
	u.srv = &http.Server{Handler: u}
	go u.srv.Serve(ln)
	return u, nil
}

// Close stops the upstream (and every stalled stream).
func (u *Upstream) Close() {
	u.mu.Lock()
	select {
	case <-u.stalls:
	default:
		close(u.stalls)
	}
	u.mu.Unlock()
	u.srv.Close()
}

// SetAccounts says which account each credential (an x-api-key, or a
// Bearer token) authenticates; a credential not named is an account of
// its own. Sonnet 5.5 and Haiku 5.5 blocks are read only in the account
// that minted them (judgetest.Call.Account).
func (u *Upstream) SetAccounts(m map[string]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.accounts = m
}

// OrganizationID is the anthropic-organization-id the upstream answers
// for an account: a uuid-like id made from it, never the credential.
func OrganizationID(account string) string {
	sum := sha256.Sum256([]byte("upstreamtest/organization\x00" + account))
	h := hex.EncodeToString(sum[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// account is the account a request is authenticated as: by its x-api-key,
// else its Bearer token, as the provider authenticates it.
func (u *Upstream) account(h http.Header) string {
	cred := h.Get("X-Api-Key")
	if cred == "" {
		cred = strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if a, ok := u.accounts[cred]; ok {
		return a
	}
	return cred
}

// SetReply chooses the reply's blocks for a request (n counts Messages
// requests from 1); nil: one thinking block and a text block.
func (u *Upstream) SetReply(f func(n int, body []byte) []judgetest.ReplyBlock) {
	u.mu.Lock()
	u.reply = f
	u.mu.Unlock()
}

// SetFault chooses a fault for a request (nil: none).
func (u *Upstream) SetFault(f func(n int, body []byte) Fault) {
	u.mu.Lock()
	u.fault = f
	u.mu.Unlock()
}

// SetStream sets pings between events (the provider pings; the proxy must
// pass them) and a delay before each event after the first.
func (u *Upstream) SetStream(pings bool, delay time.Duration) {
	u.mu.Lock()
	u.pings, u.delay = pings, delay
	u.mu.Unlock()
}

// SetDeltaSize makes each text and thinking delta carry n bytes (0: two
// halves), for a long stream of many events.
func (u *Upstream) SetDeltaSize(n int) {
	u.mu.Lock()
	u.delta = n
	u.mu.Unlock()
}

// Requests returns what the upstream received, in order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.requests...)
}

// Incomplete is how many requests' bodies ended short of their length:
// read by no one, answered by nothing.
func (u *Upstream) Incomplete() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.incomplete
}

// Messages returns the POST /v1/messages requests received.
func (u *Upstream) Messages() []Request {
	var out []Request
	for _, r := range u.Requests() {
		if r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

func (u *Upstream) record(r Request) {
	u.mu.Lock()
	u.requests = append(u.requests, r)
	u.mu.Unlock()
}

// ServeHTTP answers as the provider does.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// A body cut short of its length (the client abandoned it) is no
		// request: a server never reads it, and nothing is answered.
		u.mu.Lock()
		u.incomplete++
		u.mu.Unlock()
		return
	}
	rec := Request{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	w.Header().Set("request-id", fmt.Sprintf("req_test_%d", time.Now().UnixNano()))
	// Every answer of the Anthropic API names the organization of the
	// credential used (its API overview, "Response headers").
	w.Header().Set("anthropic-organization-id", OrganizationID(u.account(r.Header)))
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		rec.Status = 200
		u.record(rec)
		writeJSON(w, 200, map[string]any{"data": []any{map[string]any{"type": "model", "id": "claude-opus-5-5", "display_name": "Claude Opus 5.5"}}, "has_more": false})
		return
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && r.URL.Path == "/"):
		rec.Status = 200
		u.record(rec)
		w.WriteHeader(200)
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		if u.judged(w, &rec, u.Judge.Judge(judgetest.Call{Body: body, Beta: hasBeta(r.Header), Account: u.account(r.Header)})) {
			writeJSON(w, 200, map[string]any{"input_tokens": len(body) / 4})
		}
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		rec.Status = 404
		u.record(rec)
		writeError(w, 404, "not found: "+r.URL.Path)
		return
	}
	u.mu.Lock()
	u.n++
	n := u.n
	replyOf, faultOf, pings, delay, delta := u.reply, u.fault, u.pings, u.delay, u.delta
	u.mu.Unlock()
	var fault Fault
	if faultOf != nil {
		fault = faultOf(n, body)
	}
	if fault == Fault500 {
		rec.Status = 500
		u.record(rec)
		writeJSON(w, 500, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": "Internal server error"}})
		return
	}
	blocks := []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprintf("thinking %d", n)}, {Type: "text", Text: fmt.Sprintf("reply %d", n)}}
	if replyOf != nil {
		blocks = replyOf(n, body)
	}
	var head struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Thinking struct {
			Display string `json:"display"`
		} `json:"thinking"`
	}
	json.Unmarshal(body, &head)
	if head.Thinking.Display == "omitted" {
		for i := range blocks {
			if blocks[i].Type == "thinking" {
				blocks[i].Text = ""
			}
		}
	}
	res := u.Judge.Answer(judgetest.Call{Body: body, Beta: hasBeta(r.Header), Account: u.account(r.Header)}, blocks)
	var msg struct {
		Content []map[string]any `json:"content"`
	}
	if res.Status == 200 {
		if err := json.Unmarshal(res.Reply, &msg); err != nil {
			writeError(w, 500, "test upstream: reply: "+err.Error())
			return
		}
		rec.Usage = Usage{Input: 3 + int64(n), Output: 10 * int64(len(msg.Content)), CacheRead: int64(len(body) / 4),
			CacheWrite5m: 90 * int64(n), CacheWrite1h: 10 * int64(n)}
	}
	if !u.judged(w, &rec, res) {
		return
	}
	stop := "end_turn"
	for _, b := range msg.Content {
		if b["type"] == "tool_use" {
			stop = "tool_use"
		}
	}
	ru := rec.Usage
	usage := map[string]any{"input_tokens": ru.Input, "output_tokens": 1, "cache_read_input_tokens": ru.CacheRead,
		"cache_creation_input_tokens": ru.CacheWrite5m + ru.CacheWrite1h,
		"cache_creation":              map[string]any{"ephemeral_5m_input_tokens": ru.CacheWrite5m, "ephemeral_1h_input_tokens": ru.CacheWrite1h}}
	message := map[string]any{"id": fmt.Sprintf("msg_test_%d", n), "type": "message", "role": "assistant", "model": head.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}
	if res.Transformations != nil {
		message["input_transformations"] = res.Transformations
	}
	if !head.Stream {
		message["content"] = msg.Content
		message["stop_reason"] = stop
		usage["output_tokens"] = ru.Output
		writeJSON(w, 200, message)
		return
	}
	if fault == FaultNotSSE {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(200)
		io.WriteString(w, "<html><body>gateway says hello</body></html>")
		return
	}
	u.streamReply(w, message, msg.Content, stop, fault, pings, delay, delta)
}

// streamReply writes the reply as the provider's event stream.
func (u *Upstream) streamReply(w http.ResponseWriter, message map[string]any, content []map[string]any, stop string, fault Fault, pings bool, delay time.Duration, delta int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	first := true
	send := func(typ string, data any) {
		if !first && delay > 0 {
			time.Sleep(delay)
		}
		first = false
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		fl.Flush()
		if pings {
			io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
			fl.Flush()
		}
	}
	halves := func(s string) []string {
		if delta <= 0 {
			return halves(s)
		}
		return pieces(s, delta)
	}
	send("message_start", map[string]any{"type": "message_start", "message": message})
	for i, b := range content {
		switch b["type"] {
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			text, _ := b["thinking"].(string)
			for _, part := range halves(text) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
			}
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		case "redacted_thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b})
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			text, _ := b["text"].(string)
			for _, part := range halves(text) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			for _, part := range halves(string(in)) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		if i == 0 {
			switch fault {
			case FaultCut:
				panic(http.ErrAbortHandler) // the connection closes mid-stream
			case FaultErrorEvent:
				send("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
				return
			case FaultStall:
				<-u.stalls
				return
			}
		}
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10 * len(content)}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// judged records the judge's verdict on a request and answers a refusal
// as the provider does; it reports whether the request was accepted.
func (u *Upstream) judged(w http.ResponseWriter, rec *Request, res judgetest.Result) bool {
	rec.Result, rec.Status = res, res.Status
	if res.Refused() {
		rec.Refused = res.Error
	}
	u.record(*rec)
	if res.Refused() {
		writeError(w, res.Status, res.Error)
		return false
	}
	return true
}

// halves splits s in two (one part when short), as a stream's deltas do.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	h := len(s) / 2
	for h > 0 && !isBoundary(s, h) {
		h--
	}
	return []string{s[:h], s[h:]}
}

// pieces splits s into parts of about n bytes, on rune boundaries.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		h := n
		for h > 0 && !isBoundary(s, h) {
			h--
		}
		if h == 0 {
			h = n
		}
		out = append(out, s[:h])
		s = s[h:]
	}
	return append(out, s)
}

func isBoundary(s string, i int) bool { return i == len(s) || s[i]&0xC0 != 0x80 }

func hasBeta(h http.Header) bool {
	for _, v := range h.Values("anthropic-beta") {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == BindingBeta {
				return true
			}
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	if status == 404 {
		typ = "not_found_error"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
