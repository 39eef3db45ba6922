package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/my-pi/bindery/binding/judgetest"
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

// newGateway starts the team's upstream (streaming) and two replicas on
// one fresh PostgreSQL database.
func newGateway(t *testing.T) (up *upstreamtest.Upstream, a, b *proxyE2E) {
	t.Helper()
	dsn := pgtest.Database(t) + " password=" + sharedPassword
	up, err := upstreamtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	up.SetStream(true, 0)
	return up, newReplica(t, dsn, "replica-a", up), newReplica(t, dsn, "replica-b", up)
}

// balancer is the team's: each request to the next live replica in turn,
// streamed through as it arrives.
type balancer struct {
	URL    string
	served atomic.Int64
	mu     sync.Mutex
	next   int
	down   []bool
	hops   []*httputil.ReverseProxy
}

func roundRobin(t *testing.T, replicas ...*proxyE2E) *balancer {
	lb := &balancer{down: make([]bool, len(replicas))}
	for _, r := range replicas {
		u, err := url.Parse(r.addr)
		if err != nil {
			t.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.FlushInterval = -1
		lb.hops = append(lb.hops, rp)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lb.served.Add(1)
		lb.hops[lb.pick()].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	lb.URL = srv.URL
	return lb
}

// pick is the next live replica.
func (lb *balancer) pick() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for {
		i := lb.next % len(lb.hops)
		lb.next++
		if !lb.down[i] {
			return i
		}
	}
}

// peek is the replica the next request goes to.
func (lb *balancer) peek() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for n := lb.next; ; n++ {
		if i := n % len(lb.hops); !lb.down[i] {
			return i
		}
	}
}

func (lb *balancer) markDown(i int) {
	lb.mu.Lock()
	lb.down[i] = true
	lb.mu.Unlock()
}

// TestGatewayRoundRobin: two replicas (each a `bindery proxy` and its own
// `bindery serve`, on one PostgreSQL) behind a round-robin balancer give
// the host what one proxy gives: a tool loop whose history a pruner edits
// midway, each request on the other replica from the last, gets no
// refusal, and every request carries exactly the blocks the provider can
// read. Each replica learns the other's replies from the shared tier
// (read-through), and its metrics say so.
func TestGatewayRoundRobin(t *testing.T) {
	up, a, b := newGateway(t)
	up.SetReply(toolLoop(2))
	lb := roundRobin(t, a, b)

	h := newAPIHost(t, lb.URL, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "5b7e0c1d-0000-4000-8000-gatewayrr")
	h.cycle("fix the parser")
	h.cycle("now the tests")
	h.clearOldestToolResult()
	h.cycle("and the docs")
	h.cycle("ship it")

	if int(lb.served.Load()) != len(h.sent) {
		t.Fatalf("the balancer served %d requests for the host's %d", lb.served.Load(), len(h.sent))
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

// TestGatewayReplicaKilledMidStream: a replica (its proxy and its daemon)
// killed while it streams an answer loses nothing acknowledged: the
// host's cut request goes again to the other replica, which keeps every
// block of the replies the killed one accepted (each accept wrote its
// stamps to the tier before it answered), and the conversation goes on
// with the provider's maximum read on every request.
func TestGatewayReplicaKilledMidStream(t *testing.T) {
	up, a, b := newGateway(t)
	up.SetReply(toolLoop(2))
	replicas := []*proxyE2E{a, b}
	lb := roundRobin(t, replicas...)
	h := newAPIHost(t, lb.URL, "claude-opus-5-5")
	h.header.Set("X-Claude-Code-Session-Id", "5b7e0c1d-0000-4000-8000-gatewaykill")
	h.cycle("fix the parser")
	h.user("now the tests")

	// The next request's replica is killed once its answer has begun.
	victim := lb.peek()
	v := replicas[victim]
	before := len(up.Messages())
	up.SetStream(true, 200*time.Millisecond)
	req, _ := http.NewRequest(http.MethodPost, lb.URL+"/v1/messages?beta=true", bytes.NewReader(h.body()))
	req.Header = h.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("the answer did not begin: %v", err)
	}
	v.proxy.Process.Kill()
	v.daemon.cmd.Process.Kill()
	<-v.done
	<-v.daemon.done
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && bytes.Contains(rest, []byte("message_stop")) {
		t.Fatal("the stream was not cut: the test proves nothing")
	}
	lb.markDown(victim)
	up.SetStream(true, 0)

	// The host asks again; the other replica answers, and goes on.
	h.cycle("now the tests, again")
	h.cycle("ship it")
	got := up.Messages()[before+1:] // past the request that was cut
	sent := h.sent[len(h.sent)-len(got):]
	if len(got) == 0 {
		t.Fatal("nothing after the kill")
	}
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d after the kill: upstream answered %d: %s", i, r.Status, r.Refused)
		}
		valid, total := replicas[1-victim].valid(sent[i])
		if read := len(r.Result.Read()); read != valid || valid < 2 {
			t.Errorf("request %d after the kill: the provider read %d blocks; %d of the host's %d were valid", i, read, valid, total)
		}
	}
	for i, s := range h.answers {
		if s != 200 {
			t.Errorf("the host got %d on request %d", s, i)
		}
	}
}

// TestGatewayAccountsTeamWide: Sonnet 5.5 blocks are read only in the
// account that minted them, and replicas behind round-robin fingerprint
// credentials under the team's one salt: a block minted under one key on
// one replica is never sent under another organization's key by the
// other, each request carries the provider's maximum for its account, and
// back on the first key its blocks are read again, whichever replica
// serves it. (Under a salt per machine, a stamp read from another replica
// came without its account and its block went out under the other key.)
func TestGatewayAccountsTeamWide(t *testing.T) {
	up, a, b := newGateway(t)
	lb := roundRobin(t, a, b)
	h := newAPIHost(t, lb.URL, "claude-sonnet-5-5")
	keys := []string{testAPIKey, testAPIKey, otherAPIKey, otherAPIKey, testAPIKey, testAPIKey, testAPIKey}
	for i, key := range keys {
		h.header.Set("x-api-key", key)
		h.user("question " + string(rune('a'+i)))
		h.turn()
	}
	got := up.Messages()
	if len(got) != len(keys) {
		t.Fatalf("upstream got %d requests for %d turns", len(got), len(keys))
	}
	wantRead := []int{0, 1, 0, 1, 2, 3, 4}
	for i, r := range got {
		if r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Refused)
		}
		for _, v := range r.Result.Blocks {
			if v.Fate == judgetest.FateDroppedAccount {
				t.Errorf("request %d (replica %c): a block minted under another key was sent (%s)", i, 'a'+i%2, v.Path)
			}
		}
		max, err := up.Judge.MaxAs(keys[i], h.sent[i])
		if err != nil {
			t.Fatal(err)
		}
		if read := len(r.Result.Read()); read != max || read != wantRead[i] {
			t.Errorf("request %d (replica %c): the provider read %d blocks; the most it could read is %d, want %d", i, 'a'+i%2, read, max, wantRead[i])
		}
	}
	for _, r := range []*proxyE2E{a, b} {
		r.checkNoCredential(otherAPIKey, sharedPassword)
	}
}
