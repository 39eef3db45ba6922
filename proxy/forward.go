package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api/jsonscan"
)

// hopHeaders are a connection's, not a request's: never forwarded
// (RFC 9110, 7.6.1), nor Accept-Encoding, which the proxy's transport
// negotiates itself so it can read the answer it tees, nor Content-Length,
// which is the body's as sent.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// messages serves POST /v1/messages (count: /v1/messages/count_tokens):
// compile, forward, stream, accept; a binding refusal is released and
// retried once before the client sees a byte.
func (p *Proxy) messages(w http.ResponseWriter, r *http.Request, count bool) {
	select {
	case p.slots <- struct{}{}:
		p.metrics.inFlight.Inc()
		defer func() { <-p.slots; p.metrics.inFlight.Dec() }()
	default:
		p.metrics.overloads.Inc()
		writeAPIError(w, &apiError{status: 529, typ: "overloaded_error", retry: true,
			msg: fmt.Sprintf("bindery proxy: %d requests in flight, its bound (--max-streams); retry shortly", p.cfg.MaxStreams)})
		return
	}
	body, aerr := p.readBody(r)
	if aerr != nil {
		writeAPIError(w, aerr)
		return
	}
	ctx := r.Context()
	var c *compiled
	var ahead *speculation
	rb, err := readRequestBody(body)
	arr, els := rb.arr, rb.els
	if err != nil {
		if !jsonscan.Valid(body) {
			writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
				msg: "bindery proxy: the request body is not valid JSON"})
			return
		}
		// Valid JSON the proxy does not read (no messages array, or more
		// of them than the API takes): the upstream answers it.
	} else {
		id := identify(r.Header, body, rb, &p.keys)
		id.account = p.account(ctx, r.Header, rb.userID)
		if !count {
			ahead = p.speculate(ctx, r, baseKey(id), body)
		}
		c, err = p.compile(ctx, id, body, els, arr, count)
		if err != nil {
			if ahead != nil {
				ahead.abandon()
			}
			return // the client went away
		}
	}
	send := whole(body)
	if c != nil {
		send = c.sent
	}
	var resp *http.Response
	sentAhead := false
	if ahead != nil {
		resp, err, sentAhead = ahead.finish(send)
		outcome := "abandoned"
		if sentAhead {
			outcome = "completed"
		}
		p.metrics.ahead.WithLabelValues(outcome).Inc()
	}
	if !sentAhead {
		resp, err = p.send(ctx, r, &send)
	}
	if err != nil {
		p.upstreamFailed(w, ctx, err)
		return
	}
	if c != nil && !c.dry && resp.StatusCode == http.StatusBadRequest {
		resp, c = p.refused(ctx, r, resp, c, body, els, arr)
		if resp == nil {
			writeAPIError(w, &apiError{status: http.StatusBadGateway, typ: "api_error", retry: true,
				msg: "bindery proxy: the upstream could not be reached for the retry"})
			return
		}
	}
	defer resp.Body.Close()
	if c != nil {
		c.org = resp.Header.Get("Anthropic-Organization-Id")
	}
	p.answer(ctx, w, resp, c)
}

// readBody reads the client's body within MaxBody.
func (p *Proxy) readBody(r *http.Request) ([]byte, *apiError) {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, typ: "request_too_large",
		msg: fmt.Sprintf("bindery proxy: the request body is over %d bytes (--max-body)", p.cfg.MaxBody)}
	if r.ContentLength > p.cfg.MaxBody {
		return nil, tooLarge
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, p.cfg.MaxBody+1))
	if n > p.cfg.MaxBody {
		return nil, tooLarge
	}
	if err != nil {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: "bindery proxy: reading the request body: " + err.Error()}
	}
	if buf.Len() == 0 {
		return nil, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: "bindery proxy: the request body is empty"}
	}
	return buf.Bytes(), nil
}

// send forwards the request upstream with the client's headers (its
// credentials among them, untouched) and the given body (nil: the
// client's, as it arrives).
func (p *Proxy) send(ctx context.Context, r *http.Request, body *spliced) (*http.Response, error) {
	var rd io.Reader
	length := r.ContentLength
	if body != nil {
		rd, length = body.reader(), int64(body.Len())
	} else if r.Body != nil {
		rd = r.Body
	}
	out, err := p.upstreamRequest(ctx, r, rd, length)
	if err != nil {
		return nil, err
	}
	if body != nil {
		// The transport sends a request again on a fresh connection when
		// the idle one it chose was closed under it, if it can read the
		// body again.
		b := *body
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.reader()), nil }
	}
	return p.hc.Do(out)
}

// upstreamRequest is the client's request addressed upstream, with its
// headers but the connection's own, and the given body of the given length.
func (p *Proxy) upstreamRequest(ctx context.Context, r *http.Request, rd io.Reader, length int64) (*http.Request, error) {
	u := *p.upstream
	u.Path = p.upstream.Path + r.URL.Path
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	for _, f := range r.Header.Values("Connection") {
		for _, h := range strings.Split(f, ",") {
			out.Header.Del(strings.TrimSpace(h))
		}
	}
	out.Header.Del("Accept-Encoding")
	out.Header.Del("Content-Length")
	out.ContentLength = length
	return out, nil
}

// upstreamFailed answers a request the upstream never answered.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // the client went away
	}
	p.log.Warn("proxy: the upstream did not answer", "upstream", p.upstream.Host, "err", redactURL(err))
	status, typ := http.StatusBadGateway, "api_error"
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
		status, typ = http.StatusGatewayTimeout, "timeout_error"
	}
	writeAPIError(w, &apiError{status: status, typ: typ, retry: true,
		msg: "bindery proxy: the upstream did not answer: " + redactURL(err)})
}

// redactURL is an error's text with no URL query (the client's, which may
// hold anything) in it.
func redactURL(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '?'); i >= 0 {
		if j := strings.IndexAny(s[i:], "\": "); j >= 0 {
			return s[:i] + s[i+j:]
		}
		return s[:i]
	}
	return s
}

// answer copies the upstream's answer to the client and, for a compiled
// request answered in full, accepts the reply.
func (p *Proxy) answer(ctx context.Context, w http.ResponseWriter, resp *http.Response, c *compiled) {
	copyHeader(w.Header(), resp.Header)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	accepting := c != nil && !c.dry && c.ans.Bound && c.ans.CompileID != "" && resp.StatusCode == http.StatusOK
	switch {
	case accepting && mt == "text/event-stream":
		w.WriteHeader(resp.StatusCode)
		rp := newReply(p.cfg.MaxReply)
		err := p.stream(ctx, w, resp.Body, rp)
		switch {
		case err != nil:
			p.log.Info("proxy: the stream did not complete; nothing accepted", c.logAttr(), "why", err.Error())
		case !rp.complete():
			why := "the stream ended before message_stop"
			if rp.failed != nil {
				why = rp.failed.Error()
			}
			p.log.Info("proxy: reply not accepted", c.logAttr(), "why", why)
		default:
			p.acceptLater(c, func() (*acceptCall, error) { return rp.accept(c.ans.CompileID) })
		}
	case accepting && mt == "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, int64(p.cfg.MaxReply)+1))
		if err != nil {
			if ctx.Err() == nil {
				writeAPIError(w, &apiError{status: http.StatusBadGateway, typ: "api_error", retry: true, msg: "bindery proxy: reading the upstream's answer: " + err.Error()})
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(resp.StatusCode)
		if _, err := w.Write(b); err != nil {
			return
		}
		if len(b) > p.cfg.MaxReply {
			p.log.Info("proxy: reply over --max-reply; not accepted", c.logAttr())
			return
		}
		p.acceptLater(c, func() (*acceptCall, error) { return &acceptCall{CompileID: c.ans.CompileID, Reply: b}, nil })
	default:
		w.WriteHeader(resp.StatusCode)
		if mt == "text/event-stream" {
			p.stream(ctx, w, resp.Body, nil)
			return
		}
		io.Copy(flushWriter{w}, resp.Body)
	}
}

// copyHeader copies an answer's headers but the connection's own.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	dst.Del("Content-Length") // the transport may have decoded the body
}

// pass forwards any other request (GET /v1/models, HEAD /, ...) as it is.
func (p *Proxy) pass(w http.ResponseWriter, r *http.Request) {
	resp, err := p.send(r.Context(), r, nil)
	if err != nil {
		p.upstreamFailed(w, r.Context(), err)
		return
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	io.Copy(flushWriter{w}, resp.Body)
}

// flushWriter flushes after every write, so nothing waits in a buffer.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = http.NewResponseController(f.w).Flush()
	}
	return n, err
}
