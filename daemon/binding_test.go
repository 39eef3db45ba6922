package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// bindingEnv is a Binder on a real database, served on a real socket the
// way the daemon serves it.
type bindingEnv struct {
	db     *db.DB
	hub    *api.Hub
	j      *Journal
	b      *Binder
	sock   string
	client *api.Client
}

func newBindingEnv(tb testing.TB, extraRoutes func(mux *http.ServeMux)) *bindingEnv {
	tb.Helper()
	dir, err := os.MkdirTemp("", "bd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	store, err := db.Open(context.Background(), filepath.Join(dir, "b.db"), db.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	e := &bindingEnv{db: store, hub: api.NewHub(0, nil), sock: filepath.Join(dir, "s")}
	e.j = &Journal{DB: store, Hub: e.hub}
	e.b = NewBinder(e.j, BinderConfig{})
	srv := &api.Server{Binder: e.b, Events: &api.EventFeed{Hub: e.hub, Log: EventLog{DB: store}}, UID: os.Getuid(), Version: "test"}
	var h http.Handler = srv.Handler()
	if extraRoutes != nil {
		mux := http.NewServeMux()
		extraRoutes(mux)
		mux.Handle("/", h)
		h = mux
	}
	ln, err := net.Listen("unix", e.sock)
	if err != nil {
		tb.Fatal(err)
	}
	hs := &http.Server{Handler: h, ConnContext: peerContext, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	e.client = api.NewClient(e.sock)
	tb.Cleanup(func() {
		e.hub.Close()
		hs.Close()
		e.client.Close()
		store.Close()
	})
	return e
}

// request is a Messages body of n turns; each assistant turn has one
// thinking block signed sig-<conv>-<i>, and user turns carry pad bytes.
func request(conv string, n, pad int) []byte {
	var msgs []any
	text := strings.Repeat("x", pad)
	for i := 0; i < n; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d %s", i, text)})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "let me think " + text[:min(pad, 200)], "signature": fmt.Sprintf("sig-%s-%d", conv, i)},
			map[string]any{"type": "text", "text": fmt.Sprintf("answer %d %s", i, text)},
		}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "go on"})
	b, _ := json.Marshal(map[string]any{"model": "claude-fable-5-2", "max_tokens": 1024, "system": "be brief",
		"messages": msgs, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
	return b
}

// stampAll engages conv and stamps every thinking block of body with the
// prefix it has in body, so a compile keeps them all (the steady state of
// a conversation bindery has followed from its start).
func stampAll(tb testing.TB, e *bindingEnv, conv string, body []byte) {
	tb.Helper()
	req, err := binding.ParseRequest(body)
	if err != nil {
		tb.Fatal(err)
	}
	var rows []db.StampRow
	var pred binding.Digest
	for _, m := range req.Messages {
		for _, bl := range m.Blocks {
			if bl.Kind != binding.KindThinking {
				continue
			}
			rows = append(rows, db.StampRow{Stamp: binding.Stamp{Key: bl.Key, Seed: req.Seed, Chain: bl.Chain, Pred: pred, Model: req.Model},
				Source: "accept", Conversation: conv, CreatedMs: 1})
			pred = bl.Key
		}
	}
	err = e.j.Write(context.Background(), func(ctx context.Context, tx *db.Tx, _ Emit) error {
		if err := tx.UpsertConversation(ctx, db.ConversationRow{ID: conv, EngagedCompile: "setup", EngagedMs: 1, CreatedMs: 1}); err != nil {
			return err
		}
		_, err := tx.InsertStamps(ctx, rows)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func reply(sig string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":%q},{"type":"text","text":"ok"}]}`, sig))
}

// Concurrent compiles and accepts on many conversations and on one: no
// torn state, every accept recorded once, events in seq order.
func TestBinderConcurrent(t *testing.T) {
	e := newBindingEnv(t, nil)
	feed, err := e.client.Events(t.Context(), api.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	waitFor(t, "the feed to subscribe", func() (bool, string) {
		n := e.hub.Subscribers()
		return n > 0, fmt.Sprintf("%d subscribers", n)
	})
	var seenMu sync.Mutex
	var seen []int64
	go func() {
		for {
			ev, err := feed.Next(context.Background())
			if err != nil {
				return // the feed is closed at the end of the test
			}
			seenMu.Lock()
			seen = append(seen, ev.Seq)
			seenMu.Unlock()
		}
	}()
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := fmt.Sprintf("conv-%d", w%3) // several workers share a conversation
			for i := 0; i < rounds; i++ {
				ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: conv, Branch: fmt.Sprint("b", w), Request: request(conv, 2, 10), Return: api.ReturnRequest})
				if err != nil {
					errs <- err
					return
				}
				if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply(fmt.Sprintf("r-%d-%d", w, i))}); err != nil {
					errs <- err
					return
				}
				// a concurrent repeat of the same accept records nothing twice
				again, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID})
				if err != nil || !again.Repeated {
					errs <- fmt.Errorf("repeat: %+v %v", again, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for c := 0; c < 3; c++ {
		st, err := e.b.Conversation(t.Context(), fmt.Sprintf("conv-%d", c))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range st.Branches {
			total += b.Accepted
		}
	}
	if total != workers*rounds {
		t.Fatalf("%d accepts recorded, want %d", total, workers*rounds)
	}
	// a fresh Binder on the same database (a restart) sees the same state
	b2 := NewBinder(e.j, BinderConfig{})
	st, err := b2.Conversation(t.Context(), "conv-0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Stamps == 0 || !st.Engaged {
		t.Fatalf("reloaded state: %+v", st)
	}
	// the feed saw every committed event, live, in seq order
	_, newest, _ := e.db.EventBounds(t.Context())
	waitFor(t, fmt.Sprintf("the feed to deliver every event up to seq %d", newest), func() (bool, string) {
		seenMu.Lock()
		defer seenMu.Unlock()
		return int64(len(seen)) >= newest, fmt.Sprintf("%d events delivered", len(seen))
	})
	seenMu.Lock()
	defer seenMu.Unlock()
	for i, seq := range seen {
		if seq != int64(i+1) {
			t.Fatalf("feed event %d has seq %d", i, seq)
		}
	}
	if int64(len(seen)) != newest {
		t.Fatalf("feed saw %d events, log has %d", len(seen), newest)
	}
}

// BenchmarkCompileRoundTrip1MB: a 1 MB request, every thinking block
// stamped and kept, over the socket, against an echo endpoint on the same
// server (reads the body, writes it back) and json.Valid over the body.
func BenchmarkCompileRoundTrip1MB(b *testing.B) {
	e := newBindingEnv(b, func(mux *http.ServeMux) {
		mux.HandleFunc("POST /bench/echo", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
	})
	body := request("big", 250, 1800)
	stampAll(b, e, "big", body)
	call, _ := json.Marshal(map[string]any{"conversation": "big", "request": json.RawMessage(body)})
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", e.sock)
	}}}
	post := func(b *testing.B, path string, payload []byte) []byte {
		resp, err := hc.Post("http://bindery"+path, "application/json", strings.NewReader(string(payload)))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d %.300s", path, resp.StatusCode, out)
		}
		return out
	}
	// sanity: everything is kept
	var ans api.CompileAnswer
	if err := json.Unmarshal(post(b, "/v1/compile", call), &ans); err != nil || ans.ThinkingStripped != 0 || !ans.Engaged {
		b.Fatalf("setup compile: stripped %d engaged %v %v (%+v)", ans.ThinkingStripped, ans.Engaged, err, ans.Strips[:min(3, len(ans.Strips))])
	}
	b.Logf("request %d bytes, call %d bytes, %d thinking blocks", len(body), len(call), 250)
	b.Run("compile", func(b *testing.B) {
		b.SetBytes(int64(len(call)))
		for b.Loop() {
			post(b, "/v1/compile", call)
		}
	})
	// Without the conversation's parse memo: every message canonicalized
	// and hashed again, as on a conversation's first compile.
	b.Run("compile-fresh", func(b *testing.B) {
		b.SetBytes(int64(len(call)))
		for b.Loop() {
			e.b.memos.mu.Lock()
			clear(e.b.memos.slots)
			e.b.memos.mu.Unlock()
			post(b, "/v1/compile", call)
		}
	})
	b.Run("compile-plan", func(b *testing.B) {
		plan, _ := json.Marshal(map[string]any{"conversation": "big", "return": "plan", "request": json.RawMessage(body)})
		b.SetBytes(int64(len(plan)))
		for b.Loop() {
			post(b, "/v1/compile", plan)
		}
	})
	// By reference (bases.go): each compile names the one before it and
	// sends the last two messages; the plan comes back. SetBytes is the
	// whole request's, so MB/s compares with compile-plan.
	b.Run("compile-by-reference", func(b *testing.B) {
		msgs := messagesOf(b, body)
		n := len(msgs) - 2
		digest := digestOf(msgs[:n])
		tail := bodyWithModel(body, msgs[n:])
		var prev api.CompileAnswer
		first, _ := json.Marshal(map[string]any{"conversation": "big-ref", "return": "plan", "request": json.RawMessage(body)})
		if err := json.Unmarshal(post(b, "/v1/compile", first), &prev); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(plan(body))))
		var sent int
		for b.Loop() {
			c, _ := json.Marshal(map[string]any{"conversation": "big-ref", "return": "plan", "request": tail,
				"base": map[string]any{"compileId": prev.CompileID, "messages": n, "digest": digest}})
			sent = len(c)
			if err := json.Unmarshal(post(b, "/v1/compile", c), &prev); err != nil || prev.ThinkingKept != 250 {
				b.Fatalf("by reference: kept %d, %v", prev.ThinkingKept, err)
			}
		}
		b.ReportMetric(float64(sent), "sent-B")
	})
	b.Run("echo", func(b *testing.B) {
		b.SetBytes(int64(len(call)))
		for b.Loop() {
			post(b, "/bench/echo", call)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(call)))
		for b.Loop() {
			if !json.Valid(call) {
				b.Fatal("invalid")
			}
		}
	})
}

// plan is a return=plan compile call of body, as bytes.
func plan(body []byte) []byte {
	b, _ := json.Marshal(map[string]any{"conversation": "big", "return": "plan", "request": json.RawMessage(body)})
	return b
}

// bodyWithModel is body with its messages replaced.
func bodyWithModel(body []byte, msgs []json.RawMessage) json.RawMessage {
	var v map[string]json.RawMessage
	json.Unmarshal(body, &v)
	m, _ := json.Marshal(msgs)
	v["messages"] = m
	out, _ := json.Marshal(v)
	return out
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// BenchmarkAccept: compile then accept (durable, fsynced) over the socket,
// on one conversation and on 16 at once; the accept's latency is measured.
func BenchmarkAccept(b *testing.B) {
	for _, convs := range []int{1, 16} {
		b.Run(fmt.Sprintf("conversations=%d", convs), func(b *testing.B) {
			e := newBindingEnv(b, nil)
			bodies := make([][]byte, convs)
			for i := range bodies {
				bodies[i] = request(fmt.Sprint("acc", i), 3, 100)
			}
			var mu sync.Mutex
			var lat []time.Duration
			var n sync.WaitGroup
			per := b.N/convs + 1
			b.ResetTimer()
			start := time.Now()
			for c := 0; c < convs; c++ {
				n.Add(1)
				go func() {
					defer n.Done()
					conv := fmt.Sprint("acc", c)
					for i := 0; i < per; i++ {
						ans, err := e.client.Compile(context.Background(), &api.CompileCall{Conversation: conv, Request: bodies[c], Return: api.ReturnPlan})
						if err != nil {
							b.Error(err)
							return
						}
						t0 := time.Now()
						if _, err := e.client.Accept(context.Background(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply(fmt.Sprintf("a-%d-%d", c, i))}); err != nil {
							b.Error(err)
							return
						}
						d := time.Since(t0)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			n.Wait()
			wall := time.Since(start)
			b.StopTimer()
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(len(lat))/wall.Seconds(), "accepts/s")
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkEventDelivery: from an accept's call to its event at a
// websocket client.
func BenchmarkEventDelivery(b *testing.B) {
	e := newBindingEnv(b, nil)
	body := request("ev", 2, 50)
	st, err := e.client.Events(context.Background(), api.EventsOptions{Conversation: "ev"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for e.hub.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ans, err := e.client.Compile(context.Background(), &api.CompileCall{Conversation: "ev", Request: body, Return: api.ReturnPlan})
		if err != nil {
			b.Fatal(err)
		}
		for { // drain the compile's events
			ev, err := st.Next(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == api.EventCompile {
				break
			}
		}
		b.StartTimer()
		t0 := time.Now()
		go e.client.Accept(context.Background(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply(fmt.Sprint("ev-", i))})
		for {
			ev, err := st.Next(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == api.EventAccept {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}

// Concurrent journal writes share transactions; a call that fails undoes
// only its own rows and events, and the feed's seqs stay gapless.
func TestJournalGroupCommit(t *testing.T) {
	e := newBindingEnv(t, nil)
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.j.Write(t.Context(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
				if err := tx.UpsertConversation(ctx, db.ConversationRow{ID: fmt.Sprint("g", i), CreatedMs: 1}); err != nil {
					return err
				}
				if err := emit(api.EventRelease, fmt.Sprint("g", i), map[string]int{"i": i}); err != nil {
					return err
				}
				if i%5 == 0 {
					return fmt.Errorf("call %d fails", i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		st, lerr := e.db.LoadConversation(t.Context(), fmt.Sprint("g", i))
		if lerr != nil {
			t.Fatal(lerr)
		}
		if (err == nil) != (i%5 != 0) || st.Found != (err == nil) {
			t.Fatalf("call %d: err %v, stored %v", i, err, st.Found)
		}
		if err == nil {
			ok++
		}
	}
	evs, _, err := e.db.EventsSince(t.Context(), 0, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != ok {
		t.Fatalf("%d events for %d successful calls", len(evs), ok)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a failed call left a gap", i, ev.Seq)
		}
	}
}

// Accepted compiles on ever new branches (pi's leaves) stay bounded, and
// the in-memory mirror agrees with what a restart reloads.
func TestBinderAcceptedRetention(t *testing.T) {
	e := newBindingEnv(t, nil)
	e.b = NewBinder(e.j, BinderConfig{Compiles: binding.Retention{PerBranch: 32, PerConversation: 64, AcceptedRecords: 40, Tombstones: 50}})
	body := request("ret", 1, 10)
	var ids []string
	for i := 0; i < 120; i++ {
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "ret", Branch: fmt.Sprint("leaf", i), Request: body, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ans.CompileID)
	}
	count := func(b *Binder) (compiles, records int) {
		c, err := b.lock(t.Context(), "ret")
		if err != nil {
			t.Fatal(err)
		}
		defer c.mu.Unlock()
		for _, e := range c.compiles {
			compiles++
			if e.rec != nil {
				records++
			}
		}
		return
	}
	mc, mr := count(e.b)
	rc, rr := count(NewBinder(e.j, BinderConfig{}))
	if mc != rc || mr != rr {
		t.Fatalf("memory has %d compiles / %d records, the database %d / %d", mc, mr, rc, rr)
	}
	if mc > 50+50/8+1 || mr > 40+40/8+1 || mc < 50 || mr < 40 {
		t.Fatalf("%d compiles, %d records: not bounded as configured", mc, mr)
	}
	// the newest are all remembered with their records; a repeated accept
	// of a recent one answers 200, of a forgotten one 404
	if again, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ids[len(ids)-1]}); err != nil || !again.Repeated {
		t.Fatalf("recent repeat: %+v %v", again, err)
	}
	if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ids[0]}); !api.IsCode(err, api.CodeCompileForgotten) {
		t.Fatalf("repeat of a compile beyond the tombstones: %v, want compile_forgotten", err)
	}
	// an id this database never made (its seq is beyond the last) is
	// unknown, not forgotten; so is one without a seq
	for _, id := range []string{newCompileID(idReal, 1<<40, ""), "c_abcdefghijklmnop"} {
		if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: id}); !api.IsCode(err, api.CodeUnknownCompile) {
			t.Fatalf("accept of %s, never made here: %v, want unknown_compile", id, err)
		}
	}
}

// At least 32 unaccepted compiles per branch are remembered; older ones
// are forgotten (their accept is 404), bounded per conversation too; seqs
// never repeat.
func TestBinderCompileRetention(t *testing.T) {
	e := newBindingEnv(t, nil)
	e.b = NewBinder(e.j, BinderConfig{Compiles: binding.Retention{PerBranch: 32, PerConversation: 48}})
	body := request("keep", 1, 10)
	compile := func(branch string) string {
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "keep", Branch: branch, Request: body, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		return ans.CompileID
	}
	var a, bs []string
	for range 40 {
		a = append(a, compile("a"))
	}
	for range 20 {
		bs = append(bs, compile("b"))
	}
	// a kept its newest 32, then the conversation bound (48) took 4 more
	b2 := NewBinder(e.j, BinderConfig{}) // a restart: what the database kept
	for _, binder := range []*Binder{e.b, b2} {
		c, err := binder.lock(t.Context(), "keep")
		if err != nil {
			t.Fatal(err)
		}
		n := len(c.compiles)
		c.mu.Unlock()
		if n != 48 {
			t.Fatalf("%d compiles remembered, want 48", n)
		}
	}
	for i, id := range a {
		_, err := b2.Accept(t.Context(), &api.AcceptCall{CompileID: id})
		if forgotten := i < 12; forgotten != api.IsCode(err, api.CodeCompileForgotten) {
			t.Fatalf("a[%d]: %v", i, err)
		}
	}
	for _, id := range bs {
		if _, err := b2.Accept(t.Context(), &api.AcceptCall{CompileID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// A branch made with parent starts with the parent's releases as they were
// when it was made; releases on the parent afterwards do not reach it.
func TestBinderBranchForkInheritsReleases(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("fork", 3, 10) // thinking at messages.1/3/5.content.0
	stampAll(t, e, "fork", body)
	compile := func(branch string, parent *api.BranchRef) map[string]string {
		t.Helper()
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "fork", Branch: branch, Parent: parent, Request: body, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{"id": ans.CompileID}
		for _, s := range ans.Strips {
			got[s.Path] = s.Reason
		}
		return got
	}
	main := compile("main", nil)
	if len(main) != 1 {
		t.Fatalf("main strips %v", main)
	}
	if r, err := e.b.Release(t.Context(), &api.ReleaseCall{Conversation: "fork", CompileID: main["id"], Path: "messages.5.content.0"}); err != nil || r.Released != 1 {
		t.Fatalf("release: %+v %v", r, err)
	}
	f := compile("f", &api.BranchRef{Branch: "main"})
	if f["messages.5.content.0"] != "released" || len(f) != 2 {
		t.Fatalf("the fork did not inherit the parent's release: %v", f)
	}
	// a release on main after the fork
	if r, err := e.b.Release(t.Context(), &api.ReleaseCall{Conversation: "fork", CompileID: main["id"], Path: "messages.3.content.0"}); err != nil || r.Released != 1 {
		t.Fatalf("second release: %+v %v", r, err)
	}
	for _, b := range []*Binder{e.b, NewBinder(e.j, BinderConfig{})} { // and after a reload
		e.b = b
		if f := compile("f", nil); f["messages.5.content.0"] != "released" || len(f) != 2 {
			t.Fatalf("the fork got a release made on the parent after it diverged: %v", f)
		}
		if m := compile("main", nil); m["messages.3.content.0"] != "released" || m["messages.5.content.0"] != "released" {
			t.Fatalf("main lost its releases: %v", m)
		}
	}
}

// A host without a session tree moves to a new branch name at each turn and
// names the old one as parent (pi without a session file does). A reply
// whose accept was lost answered a compile made on the parent branch:
// attribution by prefix must find that compile there, so the reply's
// thinking is kept, not stripped as no-stamp.
func TestBinderLostAcceptAcrossBranchMove(t *testing.T) {
	e := newBindingEnv(t, nil)
	body0 := request("move", 2, 10)
	stampAll(t, e, "move", body0)
	first, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "move", Branch: "b1", Request: body0, Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Strips) != 0 {
		t.Fatalf("first compile strips %+v", first.Strips)
	}
	// The accept of first never arrives. The host appends the reply and a
	// user turn and compiles at a new leaf, naming b1 as its parent.
	var req map[string]any
	if err := json.Unmarshal(body0, &req); err != nil {
		t.Fatal(err)
	}
	var rep any
	if err := json.Unmarshal(reply("sig-lost-reply"), &rep); err != nil {
		t.Fatal(err)
	}
	req["messages"] = append(req["messages"].([]any), rep, map[string]any{"role": "user", "content": "next"})
	body1, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range []*Binder{e.b, NewBinder(e.j, BinderConfig{})} { // and after a reload
		e.b = b
		next, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "move", Branch: "b2", Parent: &api.BranchRef{Branch: "b1"}, Request: body1, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		if len(next.Strips) != 0 {
			t.Fatalf("round %d: the lost accept's reply was not attributed: strips %+v", i, next.Strips)
		}
	}
}

// A pi header's parentSession names the parent's file: the session ingested
// at that exact path, else (the agent dir moved or reached through a
// symlink, the file renamed) the session whose id pi put in the file's name,
// when bindery knows it.
func TestParentOfPiHeader(t *testing.T) {
	e := newBindingEnv(t, nil)
	const (
		dir   = "/home/dev/.pi/agent/sessions/--tmp--/"
		moved = "/mnt/old-home/.pi/agent/sessions/--tmp--/"
		pid   = "0193e6c4-aaaa-7000-8000-000000000001"
		qid   = "0193e6c4-aaaa-7000-8000-000000000002"
	)
	pname := "2026-11-29T10-00-00-000Z_" + pid + ".jsonl"
	index := func(id, path, parent string) {
		p := &piIndex{tb: t, e: e, id: id, path: path, parent: parent}
		p.user("u1", "")
	}
	index(pid, dir+pname, "")
	// q's file was renamed from pi's form: only its path finds it.
	index(qid, dir+"q-renamed.jsonl", "")
	// r's file carries p's id in its name but r's in its header (a copy
	// edited by hand): the exact path wins over the name.
	const rid = "0193e6c4-aaaa-7000-8000-000000000003"
	index(rid, moved+pname, "")
	for _, c := range []struct{ child, parent, want string }{
		{"c-exact", dir + pname, pid},
		{"c-renamed", dir + "q-renamed.jsonl", qid},
		{"c-moved", "/srv/agent/sessions/--tmp--/" + pname, pid},
		{"c-path-first", moved + pname, rid},
		{"c-caller-id", "/srv/agent/2026-11-29T10-00-00-000Z_" + "my_id.v2-1" + ".jsonl", "my_id.v2-1"},
		{"c-unknown-id", "/srv/agent/2026-11-29T10-00-00-000Z_0193e6c4-aaaa-7000-8000-00000000ffff.jsonl", ""},
		{"c-not-pi-name", "/srv/agent/" + pid + ".jsonl", ""},
		{"c-no-suffix", "/srv/agent/2026-11-29T10-00-00-000Z_" + pid, ""},
	} {
		if c.child == "c-caller-id" {
			index("my_id.v2-1", "/home/dev/.pi/agent/sessions/--x--/somewhere-else.jsonl", "")
		}
		index(c.child, dir+c.child+".jsonl", c.parent)
		sess, err := e.j.DB.Session(t.Context(), c.child)
		if err != nil {
			t.Fatalf("%s: session: %v", c.child, err)
		}
		got, err := e.b.parentOf(t.Context(), &api.CompileCall{Conversation: c.child}, sess)
		if err != nil {
			t.Fatalf("%s: %v", c.child, err)
		}
		if (got == nil) != (c.want == "") || got != nil && got.Conversation != c.want {
			t.Errorf("%s (parentSession %s): parent %+v, want %q", c.child, c.parent, got, c.want)
		}
	}
}
