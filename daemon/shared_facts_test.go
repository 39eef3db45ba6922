package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/db/sharedtier"
)

// replica is one machine of a shared tier: its own SQLite and binder, the
// shared PostgreSQL, and a shipper the test runs by hand (no ticker: what
// is shipped when is the test's to say).
type replica struct {
	*bindingEnv
	store *sharedtier.Store
	ship  *shipper
}

func newReplica(t *testing.T, dsn, machine string, wait time.Duration) *replica {
	t.Helper()
	e := newBindingEnv(t, nil)
	s, err := sharedtier.Open(dsn, machine)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := e.db.EnableOutbox(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	r := &replica{bindingEnv: e, store: s, ship: &shipper{wake: make(chan struct{}, 1), store: e.db, shared: s, log: slog.New(slog.DiscardHandler)}}
	e.b = NewBinder(e.j, BinderConfig{Machine: machine})
	e.b.readThrough = &readThrough{store: s, wait: wait, log: slog.New(slog.DiscardHandler)}
	e.b.shared = &sharedFacts{store: s, wait: wait, log: slog.New(slog.DiscardHandler), poke: func() {}}
	return r
}

func (r *replica) compile(t *testing.T, conv string, body []byte) *api.CompileAnswer {
	t.Helper()
	ans, err := r.b.Compile(t.Context(), &api.CompileCall{Conversation: conv, Branch: "main", Request: body, Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

func stripped(ans *api.CompileAnswer) map[string]string {
	out := map[string]string{}
	for _, s := range ans.Strips {
		out[s.Path] = s.Reason
	}
	return out
}

// A compile minted on machine A is accepted on machine B after A stopped
// (its outbox drained at exit): B reads the record from the tier, records
// the accept and its stamps; A's ids carry A's tag, so B never takes one
// for its own; a third machine answers the accept as repeated; and A,
// started again, keeps the block B's accept stamped.
func TestSharedAcceptOfCompileMintedElsewhere(t *testing.T) {
	dsn := pgtest.Database(t)
	a := newReplica(t, dsn, "laptop", 5*time.Second)
	b := newReplica(t, dsn, "devbox", 5*time.Second)
	first := request("x", 0, 10)
	ans := a.compile(t, "x", first)
	if idTag(ans.CompileID) != machineTag("laptop") {
		t.Fatalf("id %s carries no tag of its machine", ans.CompileID)
	}
	a.ship.drain() // A stops cleanly: its outbox ships before it exits

	got, err := b.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-new")})
	if err != nil {
		t.Fatalf("accept on B of a compile made on A: %v", err)
	}
	if !got.Accepted || got.Stamped != 1 || got.Repeated {
		t.Fatalf("accept on B: %+v", got)
	}
	if again, err := b.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-new")}); err != nil || !again.Repeated {
		t.Fatalf("repeated on B: %+v %v", again, err)
	}
	b.ship.drain()
	c := newReplica(t, dsn, "gateway", 5*time.Second)
	if third, err := c.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-new")}); err != nil || !third.Repeated || third.Stamped != 1 {
		t.Fatalf("accept on a third machine of a compile accepted on B: %+v %v", third, err)
	}
	// an id of an unknown machine that the tier does not hold: unknown,
	// and said to be another machine's, not forgotten here
	c.b.shared.wait = 50 * time.Millisecond
	if _, err := c.b.Accept(t.Context(), &api.AcceptCall{CompileID: newCompileID(idReal, 1, machineTag("nowhere"))}); !api.IsCode(err, api.CodeUnknownCompile) || !strings.Contains(err.Error(), "another machine") {
		t.Fatalf("accept of an id of a machine never seen: %v", err)
	}

	// The next turn on A (restarted: a fresh binder on its store) keeps
	// the block B stamped: read through from the tier.
	a.b = NewBinder(a.j, BinderConfig{Machine: "laptop"})
	a.b.readThrough = &readThrough{store: a.store, wait: 5 * time.Second, log: slog.New(slog.DiscardHandler)}
	a.b.shared = &sharedFacts{store: a.store, wait: 5 * time.Second, log: slog.New(slog.DiscardHandler), poke: func() {}}
	next := withReply(t, first, reply("sig-new"))
	if ans := a.compile(t, "x", next); len(ans.Strips) != 0 {
		t.Fatalf("A's next turn strips %v", ans.Strips)
	}
}

// withReply is body with rep appended as the assistant's turn and a user
// turn after it.
func withReply(t *testing.T, body []byte, rep json.RawMessage) []byte {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(rep, &m); err != nil {
		t.Fatal(err)
	}
	req["messages"] = append(req["messages"].([]any), m, map[string]any{"role": "user", "content": "next"})
	out, _ := json.Marshal(req)
	return out
}

// A release decided on replica A races a compile on replica B, the order
// made certain by the tier's lock, not by sleeps:
//   - B compiles while A's accept has recorded the release here but not
//     yet in the tier (A has not answered): B keeps the block (the release
//     is not decided yet);
//   - A's release is in the tier's transaction, its lock held, when B's
//     next compile starts: B's read waits for it and strips the block;
//   - another release held in flight past B's wait: B strips every block
//     of a conversation another machine served (never sends one that may
//     have been released), and nothing of that is recorded.
func TestSharedReleaseRacesCompile(t *testing.T) {
	dsn := pgtest.Database(t)
	a := newReplica(t, dsn, "replica-a", 10*time.Second)
	b := newReplica(t, dsn, "replica-b", 10*time.Second)
	body := request("r", 3, 10)
	stampAll(t, a.bindingEnv, "r", body)
	stampAll(t, b.bindingEnv, "r", body)
	const block1, block2 = "messages.3.content.0", "messages.5.content.0"

	ans := a.compile(t, "r", body)
	if len(ans.Strips) != 0 {
		t.Fatalf("A strips %v", ans.Strips)
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	a.b.shared.beforePush = func() { close(paused); <-resume }
	accepted := make(chan error, 1)
	go func() {
		_, err := a.b.Accept(context.Background(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-r-3"),
			InputTransformations: []api.InputTransformation{{Type: "thinking_dropped", Reason: "prefix_binding_mismatch", Path: block1}}})
		accepted <- err
	}()
	<-paused // recorded on A, not in the tier: A has not answered
	if got := stripped(b.compile(t, "r", body)); got[block1] != "" {
		t.Fatalf("B strips %v before the release is decided", got)
	}

	// A's push proceeds into the tier and stops inside its transaction.
	inTx, commit := make(chan struct{}), make(chan struct{})
	a.store.SetBeforeReleaseCommit(func() { close(inTx); <-commit })
	a.b.shared.beforePush = nil
	close(resume)
	<-inTx
	compiled := make(chan *api.CompileAnswer, 1)
	go func() { compiled <- b.compile(t, "r", body) }()
	for pgtest.AdvisoryWaiters(t, dsn) == 0 {
		time.Sleep(time.Millisecond) // B is not yet at the lock: poll the lock table, not a guess
	}
	close(commit)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	a.store.SetBeforeReleaseCommit(nil)
	got := stripped(<-compiled)
	if got[block1] != "released" {
		t.Fatalf("B's compile after A's release started: strips %v, want %s released", got, block1)
	}
	if got := stripped(b.compile(t, "r", body)); got[block1] != "released" {
		t.Fatalf("B's next compile: %v", got)
	}

	// Past the wait: a release held in flight on A, B waits 50ms then
	// strips every block, recording nothing.
	ans = a.compile(t, "r", body)
	hold, done := make(chan struct{}), make(chan struct{})
	a.store.SetBeforeReleaseCommit(func() { close(hold); <-done })
	go func() {
		_, err := a.b.Release(context.Background(), &api.ReleaseCall{Conversation: "r", CompileID: ans.CompileID, Path: block2})
		accepted <- err
	}()
	<-hold
	b.b.shared.wait = 50 * time.Millisecond
	got = stripped(b.compile(t, "r", body))
	close(done)
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	a.store.SetBeforeReleaseCommit(nil)
	if len(got) != 3 {
		t.Fatalf("B past the wait strips %v, want all three blocks", got)
	}
	b.b.shared.wait = 10 * time.Second
	got = stripped(b.compile(t, "r", body))
	if got[block2] != "released" || got["messages.1.content.0"] == "released" {
		t.Fatalf("B with the tier back: %v", got)
	}
}

// An accept that answered is in the tier, before any shipping: replica B
// serves a turn (the conversation is engaged there), replica A the next,
// accepts its reply and is killed at once (its shipper never runs, its
// outbox is lost with it), and B's next compile keeps both replies'
// blocks, A's stamp read through.
func TestSharedAcknowledgedAcceptIsInTheTier(t *testing.T) {
	dsn := pgtest.Database(t)
	a := newReplica(t, dsn, "replica-a", 5*time.Second)
	b := newReplica(t, dsn, "replica-b", 5*time.Second)
	first := request("x", 0, 10)
	ans := b.compile(t, "x", first)
	if got, err := b.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-b")}); err != nil || got.Stamped != 1 {
		t.Fatalf("accept on B: %+v %v", got, err)
	}
	b.ship.drain()
	second := withReply(t, first, reply("sig-b"))
	ans = a.compile(t, "x", second)
	if len(ans.Strips) != 0 {
		t.Fatalf("A's compile strips %v", stripped(ans))
	}
	got, err := a.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-a")})
	if err != nil || got.Stamped != 1 {
		t.Fatalf("accept on A: %+v %v", got, err)
	}
	// A is gone: nothing of its outbox ships.
	third := withReply(t, second, reply("sig-a"))
	if ans := b.compile(t, "x", third); len(ans.Strips) != 0 || ans.ThinkingKept != 2 {
		t.Fatalf("B's compile after A acknowledged the accept: kept %d, stripped %v", ans.ThinkingKept, stripped(ans))
	}
}

// An accept does not pay the wait on every call while the tier is away:
// after one write the tier did not answer in time (a server that takes
// the connection and says nothing), the next accepts' stamps are left to
// the outbox, and the tier is not asked again until the pause has passed.
func TestPushStampsPausesWhileTheTierIsAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			defer c.Close() // held open, never answered
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	s, err := sharedtier.Open(fmt.Sprintf("host=127.0.0.1 port=%d user=bindery dbname=team sslmode=disable", port), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &Binder{shared: &sharedFacts{store: s, wait: 100 * time.Millisecond, log: slog.New(slog.DiscardHandler), poke: func() {}}}
	rows := []db.StampRow{{Stamp: binding.Stamp{Key: binding.SignatureKey("s"), Model: "claude-opus-5-5"}, Source: "accept", Conversation: "c", Branch: "b"}}
	b.pushStamps(t.Context(), "c", rows)
	if n := dials.Load(); n == 0 {
		t.Fatal("the first accept did not try the tier")
	}
	first := dials.Load()
	for range 5 {
		b.pushStamps(t.Context(), "c", rows)
	}
	if n := dials.Load(); n != first {
		t.Fatalf("%d more connections to a tier that just failed: each accept waited on it", n-first)
	}
	b.shared.stampsPaused.Store(0) // the pause has passed
	b.pushStamps(t.Context(), "c", rows)
	if dials.Load() == first {
		t.Fatal("past the pause, an accept did not try the tier again")
	}
}

// A request whose newest block no machine stamped (a reply never
// accepted) waits for its stamp once: the same request retried does not
// wait again.
func TestNewestBlockWaitedForOnce(t *testing.T) {
	dsn := pgtest.Database(t)
	a := newReplica(t, dsn, "laptop", time.Second)
	body := withReply(t, request("x", 0, 10), reply("sig-never-accepted"))
	a.compile(t, "x", body)
	a.compile(t, "x", body)
	a.compile(t, "x", body)
	if n := a.b.readThrough.tally.polls.Load(); n != 1 {
		t.Fatalf("the newest block was waited for %d times; want once", n)
	}
}
