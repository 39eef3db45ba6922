package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/my-pi/bindery/api"
)

// A binding refusal (400, "The block is bound to a different
// conversation", naming messages.N.content.M) is decided before the
// provider streams a byte, so the proxy can still mend it: it releases the
// named block (the daemon releases it and every later thinking block of
// the request: design/binding.md, "Provider truth beats inference"),
// compiles again and sends the result, once per request, never in a loop
// (opencode #39291). The client then gets the answer, not the 400 that
// makes Claude Code strip every block it holds for good. If the retry is
// refused too, the client gets that refusal's own body, unchanged. A
// client that asked for prefix_mismatch_behavior "error" gets its 400 (the
// block is still released: the provider said it is refused). A tampered
// signature ("Invalid `signature`" without the binding sentence) is a
// different error, never retried.

// maxErrorBody bounds a 400's body read to look for a binding refusal.
const maxErrorBody = 1 << 20

// refusalPath matches the path a binding refusal names.
var refusalPath = regexp.MustCompile(`messages\.\d+\.content\.\d+`)

// bindingRefusal returns the path a binding refusal names, or "".
func bindingRefusal(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, "bound to a different conversation") {
		return ""
	}
	return refusalPath.FindString(e.Error.Message)
}

// asksError reports whether the client set
// thinking.block_binding.prefix_mismatch_behavior to "error".
func asksError(body []byte) bool {
	th, ok, err := topMember(body, "thinking")
	if err != nil || !ok || body[th.start] != '{' {
		return false
	}
	bb, ok, err := member(body, th, "block_binding")
	if err != nil || !ok || body[bb.start] != '{' {
		return false
	}
	v, ok, err := member(body, bb, "prefix_mismatch_behavior")
	return err == nil && ok && string(body[v.start:v.end]) == `"error"`
}

// refused handles a 400 to a compiled request: a binding refusal is
// released and, unless the client asked for "error", retried once; any
// other 400 (and a refusal it cannot mend) goes to the client as the
// upstream sent it. It returns the answer to give the client and the
// compile it answers (nil resp: the retry's upstream never answered).
func (p *Proxy) refused(ctx context.Context, r *http.Request, resp *http.Response, c *compiled, body []byte, els []span, arr span) (*http.Response, *compiled) {
	errBody, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(errBody))
	if err != nil {
		return resp, nil
	}
	path := bindingRefusal(errBody)
	if path == "" {
		return resp, nil
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	ra, rerr := p.client.Release(rctx, &api.ReleaseCall{Conversation: c.id.conversation, Branch: c.id.branch, CompileID: c.ans.CompileID, Path: path})
	cancel()
	if rerr != nil {
		p.metrics.retries.WithLabelValues("failed").Inc()
		p.log.Warn("proxy: the provider refused a thinking block; releasing it failed, so the refusal goes to the client", c.logAttr(), "path", path, "err", rerr)
		return resp, nil
	}
	if asksError(body) {
		p.metrics.retries.WithLabelValues("strict").Inc()
		p.log.Info("proxy: the provider refused a thinking block; released it; the client asked for \"error\", so it gets the 400", c.logAttr(), "path", path, "released", ra.Released)
		return resp, nil
	}
	p.bases.drop(baseKey(c.id))
	again, err := p.compile(ctx, c.id, body, els, arr, false)
	if err != nil || again == nil {
		p.metrics.retries.WithLabelValues("failed").Inc()
		p.log.Warn("proxy: the provider refused a thinking block; released it, but the recompile failed, so the refusal goes to the client", c.logAttr(), "path", path)
		return resp, nil
	}
	p.log.Info("proxy: the provider refused a thinking block; released it and every later one, retrying once", c.logAttr(), "path", path, "released", ra.Released, "retry", again.ans.CompileID, "stripped", again.ans.ThinkingStripped)
	retry, err := p.send(ctx, r, &again.sent)
	if err != nil {
		p.metrics.retries.WithLabelValues("failed").Inc()
		if ctx.Err() == nil {
			p.log.Warn("proxy: the retry did not reach the upstream", again.logAttr(), "err", redactURL(err))
		}
		return nil, nil
	}
	if retry.StatusCode == http.StatusBadRequest {
		p.metrics.retries.WithLabelValues("refused_again").Inc()
		p.log.Warn("proxy: the retry was refused too; its answer goes to the client unchanged", again.logAttr())
	} else {
		p.metrics.retries.WithLabelValues("answered").Inc()
	}
	return retry, again
}

// acceptCall is the daemon's accept call.
type acceptCall = api.AcceptCall

// acceptLater accepts a reply in the background: the client has its
// answer and never waits on bindery after it. The history's next compile
// waits for it (bases.acceptDone), and Wait for every one at shutdown.
func (p *Proxy) acceptLater(c *compiled, build func() (*acceptCall, error)) {
	done := p.bases.acceptStarted(baseKey(c.id))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer done()
		call, err := build()
		if err != nil {
			p.metrics.accepts.WithLabelValues("unread").Inc()
			p.log.Warn("proxy: the reply could not be read; not accepted", c.logAttr(), "err", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.CallTimeout)
		defer cancel()
		p.learnAccount(ctx, c)
		a, err := p.client.Accept(ctx, call)
		if err != nil {
			p.metrics.accepts.WithLabelValues("failed").Inc()
			p.log.Warn("proxy: accept failed", c.logAttr(), "err", err)
			return
		}
		p.metrics.accepts.WithLabelValues("ok").Inc()
		p.log.Debug("proxy: accepted", c.logAttr(), "stamped", a.Stamped, "released", a.Released)
	}()
}
