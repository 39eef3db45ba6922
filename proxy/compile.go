package proxy

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
)

// compiled is what the daemon decided for one request.
type compiled struct {
	id   ident
	ans  *api.CompileAnswer
	sent spliced // the body to send: the client's, with the plan spliced in
	dry  bool
	org  string // the answer's anthropic-organization-id (learnAccount)
}

// compile asks the daemon for the request's plan and splices it into the
// client's bytes. nil, nil: the request goes upstream as the client sent
// it (the daemon is down, slow or failing: fail open; or the body is not
// one bindery binds). An *apiError is the client's fault (the body is not
// JSON) and is answered as such.
func (p *Proxy) compile(ctx context.Context, id ident, body []byte, els []span, arr span, dry bool) (*compiled, error) {
	if p.health.isDown() {
		p.metrics.failOpen.WithLabelValues("daemon_down").Inc()
		return nil, nil
	}
	key := baseKey(id)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CompileTimeout)
	defer cancel()
	if !dry {
		// The history's last reply is stamped by its accept before this
		// request is decided (attribution by prefix would stamp it too; the
		// accept carries the provider's transformations).
		select {
		case <-p.bases.acceptDone(key):
		case <-ctx.Done():
		}
	}
	// The daemon is shown string content as a text block (shape.go); the
	// plan's paths fit the client's body as they fit that form.
	wraps, err := stringContents(body, els)
	if err != nil {
		return nil, nil // not a body the daemon could read either: send it on
	}
	began := time.Now()
	call := &api.CompileCall{Conversation: id.conversation, Branch: id.branch, Account: id.account, DryRun: dry, Return: api.ReturnPlan}
	var ans *api.CompileAnswer
	var from *base // the base this request extends whole (bases.put)
	by := "full"
	if bs := p.bases.get(key); bs != nil && !dry {
		if n, digest := bs.shared(body, els); n > 0 {
			if n == len(bs.ends) {
				from = bs
			}
			byRef := *call
			byRef.Base = &api.CompileBase{CompileID: bs.compileID, Messages: n, Digest: digest}
			byRef.Request = withMessages(body, arr, els, n, wraps)
			ans, err = p.client.Compile(ctx, &byRef)
			by = "reference"
			if e, ok := errors.AsType[*api.Error](err); ok && (e.Code == api.CodeBaseUnknown || e.Code == api.CodeBaseMismatch) {
				p.log.Debug("proxy: compile by reference refused; compiling in full", "conversation", id.conversation, "branch", id.branch, "code", e.Code)
				ans, err, by = nil, nil, "refused"
			}
		}
	}
	if ans == nil && err == nil {
		t := time.Now()
		call.Request = shownBody(body, wraps)
		// The copy is the proxy's own work, not the compile's: it stays
		// out of the compile's time (bindery_proxy_compile_seconds).
		began = began.Add(time.Since(t))
		ans, err = p.client.Compile(ctx, call)
	}
	if err != nil {
		if parent.Err() != nil {
			return nil, parent.Err() // the client went away: nothing failed
		}
		p.compileFailed(id, err)
		return nil, nil
	}
	p.metrics.compile.Observe(time.Since(began).Seconds())
	p.metrics.compiles.WithLabelValues(by).Inc()
	p.health.up()
	cuts, err := planCuts(body, arr, els, ans.Strips, ans.DroppedMessages)
	if err != nil {
		// A plan that does not fit the body is the daemon's fault: send the
		// client's request as it was.
		p.log.Warn("proxy: the compile's plan does not fit the request; sending it unchanged", "conversation", id.conversation, "compile", ans.CompileID, "err", err)
		p.metrics.failOpen.WithLabelValues("plan_mismatch").Inc()
		p.bases.drop(key)
		return nil, nil
	}
	if !dry {
		if ans.Bound && ans.CompileID != "" {
			p.bases.putSent(key, ans.CompileID, body, els, wraps, from, sentAs{body: body, cuts: cuts})
		} else {
			p.bases.drop(key)
		}
	}
	if !dry {
		p.metrics.stripped.Add(float64(ans.ThinkingStripped))
		p.metrics.kept.Add(float64(ans.ThinkingKept))
	}
	if len(ans.Strips) > 0 {
		p.log.Info("proxy: thinking stripped", "conversation", id.conversation, "branch", id.branch, "compile", ans.CompileID, "stripped", ans.ThinkingStripped, "kept", ans.ThinkingKept)
	}
	return &compiled{id: id, ans: ans, sent: splice(body, cuts), dry: dry}, nil
}

// compileFailed decides what a failed compile means: the daemon down or
// slow turns every request straight upstream until a probe finds it back;
// an answer that refuses this request (over a bound, a body it cannot
// read) sends this one unchanged.
func (p *Proxy) compileFailed(id ident, err error) {
	if e, ok := errors.AsType[*api.Error](err); ok && e.Status/100 == 4 {
		p.metrics.failOpen.WithLabelValues("daemon_refused").Inc()
		p.log.Warn("proxy: bindery refused the compile; sending the request unchanged", "conversation", id.conversation, "code", e.Code, "err", e.Message)
		return
	}
	p.metrics.failOpen.WithLabelValues("daemon_down").Inc()
	p.health.down(err)
}

// health is the daemon's state as the proxy sees it. After a failure the
// proxy stops asking: every request goes upstream unchanged, at once, and
// one probe a ProbeInterval asks the daemon's health until it answers. It
// says so once each way.
type health struct {
	p       *Proxy
	mu      sync.Mutex
	isOff   bool
	probing bool
}

func (h *health) isDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isOff
}

func (h *health) down(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.isOff {
		h.isOff = true
		h.p.log.Warn("proxy: bindery did not answer; requests go upstream as the clients send them until it does", "err", err)
	}
	if !h.probing {
		h.probing = true
		go h.probe()
	}
}

func (h *health) up() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isOff {
		h.isOff = false
		h.p.log.Info("proxy: bindery answers again; requests are compiled")
	}
}

func (h *health) probe() {
	t := time.NewTicker(h.p.cfg.ProbeInterval)
	defer t.Stop()
	for range t.C {
		ctx, cancel := context.WithTimeout(context.Background(), h.p.cfg.ProbeInterval)
		_, err := h.p.client.Health(ctx)
		cancel()
		if err == nil {
			h.mu.Lock()
			h.probing = false
			h.mu.Unlock()
			h.up()
			return
		}
	}
}

// logAttr is a compile's attributes for the log.
func (c *compiled) logAttr() slog.Attr {
	return slog.Group("compile", "id", c.ans.CompileID, "conversation", c.id.conversation, "branch", c.id.branch)
}
