package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/proxy/upstreamtest"
)

// newReplica starts one gateway replica: `bindery serve` joined to the
// shared tier as machine name, and `bindery proxy` with its metrics, in
// front of the team's upstream.
func newReplica(t *testing.T, dsn, name string, up *upstreamtest.Upstream) *proxyE2E {
	t.Helper()
	e := newE2E(t)
	e.env = append(e.env, "BINDERY_SHARED="+dsn, "BINDERY_MACHINE="+name)
	pe := &proxyE2E{e2e: e, daemon: e.serve(), up: up}
	pe.startProxy("--metrics", "127.0.0.1:0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s: proxy log:\n%s", name, pe.proxyLog())
			t.Logf("%s: daemon log:\n%s", name, pe.daemon.cmd.Stderr.(*lockedWriter).String())
		}
	})
	return pe
}

// roundRobin is the team's balancer: each request to the next replica in
// turn, streamed through as it arrives.
func roundRobin(t *testing.T, replicas ...*proxyE2E) (string, *atomic.Int64) {
	var n atomic.Int64
	var hops []*httputil.ReverseProxy
	for _, r := range replicas {
		u, err := url.Parse(r.addr)
		if err != nil {
			t.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.FlushInterval = -1
		hops = append(hops, rp)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops[int(n.Add(1)-1)%len(hops)].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestGatewayRoundRobin: two replicas (each a `bindery proxy` and its own
// `bindery serve`, on one PostgreSQL) behind a round-robin balancer give
// the host what one proxy gives: a tool loop whose history a pruner edits
// midway, each request on the other replica from the last, gets no
// refusal, and every request carries exactly the blocks the provider can
// read. Each replica learns the other's replies from the shared tier
// (read-through), and its metrics say so.
func TestGatewayRoundRobin(t *testing.T) {
	dsn := pgtest.Database(t) + " password=" + sharedPassword
	up, err := upstreamtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	up.SetReply(toolLoop(2))
	up.SetStream(true, 0)
	a := newReplica(t, dsn, "replica-a", up)
	b := newReplica(t, dsn, "replica-b", up)
	lb, served := roundRobin(t, a, b)

	h := newAPIHost(t, lb, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "5b7e0c1d-0000-4000-8000-gatewayrr")
	h.cycle("fix the parser")
	h.cycle("now the tests")
	h.clearOldestToolResult()
	h.cycle("and the docs")
	h.cycle("ship it")

	if int(served.Load()) != len(h.sent) {
		t.Fatalf("the balancer served %d requests for the host's %d", served.Load(), len(h.sent))
	}
	got := up.Messages()
	if len(got) != len(h.sent) {
		t.Fatalf("upstream answered %d requests for the host's %d (a refusal retried inside a replica is one more)", len(got), len(h.sent))
	}
	stripped := 0
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d (replica %c): upstream answered %d: %s", i, 'a'+i%2, r.Status, r.Refused)
		}
		valid, total := a.valid(h.sent[i])
		if read := len(r.Result.Read()); read != valid {
			t.Errorf("request %d (replica %c): the provider read %d blocks; %d of the host's %d were valid", i, 'a'+i%2, read, valid, total)
		}
		if string(r.Body) != string(h.sent[i]) {
			stripped++
		}
	}
	if stripped == 0 {
		t.Error("nothing stripped: the edit should strip the turns after it")
	}
	for i, s := range h.answers {
		if s != 200 {
			t.Errorf("the host got %d on request %d", s, i)
		}
	}
	for _, r := range []*proxyE2E{a, b} {
		var m map[string]float64
		var text string
		waitFor(t, "the replica's outbox shipped", func() (bool, string) {
			m, text = r.scrape()
			return m["bindery_shared_outbox_rows"] == 0 && m["bindery_daemon_up"] == 1, text
		})
		if m["bindery_shared_read_throughs_total"] == 0 || m["bindery_shared_read_through_stamps_total"] == 0 {
			t.Errorf("a replica read nothing through from the other:\n%s", text)
		}
		if m["bindery_shared_read_through_misses_total"] != 0 || m["bindery_shared_outbox_lag_seconds"] != 0 {
			t.Errorf("misses or lag:\n%s", text)
		}
		r.checkNoCredential(sharedPassword)
	}
}
