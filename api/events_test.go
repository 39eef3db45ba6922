package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// sliceLog is an in-memory EventLog with the same contract as db's table:
// seqs rise, pruning removes the oldest, the high-water mark survives.
type sliceLog struct {
	mu     sync.Mutex
	events []Event
	last   int64
}

func (l *sliceLog) append(hub *Hub, typ, conv string) Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	e := Event{Seq: l.last, Time: time.Now(), Type: typ, Conversation: conv, Fields: json.RawMessage(fmt.Sprintf(`{"n":%d}`, l.last))}
	l.events = append(l.events, e)
	hub.Publish(e) // under the same lock, as the daemon publishes under its writer lock
	return e
}

func (l *sliceLog) prune(keep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) > keep {
		l.events = append([]Event(nil), l.events[len(l.events)-keep:]...)
	}
}

func (l *sliceLog) EventBounds(context.Context) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) == 0 {
		return 0, l.last, nil
	}
	return l.events[0].Seq, l.last, nil
}

func (l *sliceLog) EventsAfter(_ context.Context, after int64, conv string, limit int) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.events {
		if e.Seq > after && (conv == "" || e.Conversation == conv) {
			out = append(out, e)
			if len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

type feedServer struct {
	hub  *Hub
	log  *sliceLog
	sock string
}

func startFeed(t *testing.T, buffer int, writeTimeout time.Duration) *feedServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fs := &feedServer{hub: NewHub(buffer, nil), log: &sliceLog{}, sock: sock}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/events", &EventFeed{Hub: fs.hub, Log: fs.log, WriteTimeout: writeTimeout})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		fs.hub.Close()
		srv.Close()
	})
	return fs
}

func (fs *feedServer) dial(t *testing.T, query string) *websocket.Conn {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", fs.sock)
	}}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://bindery/v1/events"+query, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial %s: %v", query, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// waitSubscribers waits until the hub has n subscribers: the feed has
// subscribed (and so will see every later publish).
func (fs *feedServer) waitSubscribers(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fs.hub.Subscribers() != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub has %d subscribers, want %d", fs.hub.Subscribers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func readEvent(t *testing.T, c *websocket.Conn) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("decode event %s: %v", b, err)
	}
	return e
}

func TestEventWireShape(t *testing.T) {
	e := Event{Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Type: EventStrip, Conversation: "c\"1",
		Fields: json.RawMessage(`{"path":"messages.1.content.0","reason":"gap"}`)}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":7,"time":"2026-01-02T03:04:05.000000006Z","type":"strip","conversation":"c\"1","path":"messages.1.content.0","reason":"gap"}`
	if string(b) != want {
		t.Fatalf("wire:\n got %s\nwant %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var path string
	if ok, err := back.Field("path", &path); !ok || err != nil || path != "messages.1.content.0" || back.Seq != 7 || back.Conversation != "c\"1" {
		t.Fatalf("round trip: %+v path=%q ok=%v err=%v", back, path, ok, err)
	}
	if _, err := (Event{Fields: json.RawMessage(`[1]`)}).AppendJSON(nil); err == nil {
		t.Fatal("fields that are not an object must be refused")
	}
	if b, _ := (Event{Seq: 1, Type: "x"}).AppendJSON(nil); !json.Valid(b) {
		t.Fatalf("no fields: %s", b)
	}
}

// Resume with since: the backlog is replayed, then live events follow
// with no gap and no duplicate, even while events are being appended
// concurrently with the replay.
func TestFeedResumeSinceNoGapNoDuplicate(t *testing.T) {
	fs := startFeed(t, 1<<14, 0)
	for range 300 {
		fs.log.append(fs.hub, EventAccept, "a")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 700 {
			fs.log.append(fs.hub, EventAccept, "a")
		}
	}()
	c := fs.dial(t, "?since=100")
	want := int64(101)
	for want <= 1000 {
		e := readEvent(t, c)
		if e.Seq != want {
			t.Fatalf("got seq %d, want %d", e.Seq, want)
		}
		want++
	}
	<-done
	fs.log.append(fs.hub, EventAccept, "a")
	if e := readEvent(t, c); e.Seq != 1001 {
		t.Fatalf("live after replay: seq %d", e.Seq)
	}
}

func TestFeedFilterByConversation(t *testing.T) {
	fs := startFeed(t, 0, 0)
	fs.log.append(fs.hub, EventCompile, "a")
	fs.log.append(fs.hub, EventCompile, "b")
	c := fs.dial(t, "?conversation=b&since=0")
	all := fs.dial(t, "")
	fs.waitSubscribers(t, 2)
	fs.log.append(fs.hub, EventAccept, "a")
	fs.log.append(fs.hub, EventAccept, "b")
	if e := readEvent(t, c); e.Seq != 2 || e.Conversation != "b" {
		t.Fatalf("first: %+v", e)
	}
	if e := readEvent(t, c); e.Seq != 4 || e.Conversation != "b" {
		t.Fatalf("second: %+v", e)
	}
	// without since, only live events, every conversation
	if e := readEvent(t, all); e.Seq != 3 {
		t.Fatalf("unfiltered first live: %+v", e)
	}
	if e := readEvent(t, all); e.Seq != 4 {
		t.Fatalf("unfiltered second live: %+v", e)
	}
}

// TestFeedLiveFromDial: a client without since is subscribed by the time
// its dial returns, so an event committed right after reaches it (no
// waiting for the subscription: a host connects, then acts).
func TestFeedLiveFromDial(t *testing.T) {
	fs := startFeed(t, 0, 0)
	for i := range 20 {
		c := fs.dial(t, "")
		if n := fs.hub.Subscribers(); n != 1 {
			t.Fatalf("dial %d returned with %d subscribers, want 1", i, n)
		}
		e := fs.log.append(fs.hub, EventCompile, "a")
		if got := readEvent(t, c); got.Seq != e.Seq {
			t.Fatalf("dial %d: first live event %+v, want seq %d", i, got, e.Seq)
		}
		c.Close(websocket.StatusNormalClosure, "")
		fs.waitSubscribers(t, 0)
	}
}

func TestFeedResetWhenSinceWasPruned(t *testing.T) {
	fs := startFeed(t, 0, 0)
	for range 50 {
		fs.log.append(fs.hub, EventAccept, "a")
	}
	fs.log.prune(10) // keeps 41..50
	c := fs.dial(t, "?since=5")
	e := readEvent(t, c)
	var lost int64
	if ok, _ := e.Field("lost", &lost); e.Type != EventReset || !ok || lost != 35 || e.Seq != 40 {
		t.Fatalf("want reset losing 35 events (6..40), got %+v", e)
	}
	if e := readEvent(t, c); e.Seq != 41 {
		t.Fatalf("after reset: %+v", e)
	}

	// since the last seq: nothing lost, no reset
	c2 := fs.dial(t, "?since=50")
	fs.waitSubscribers(t, 2)
	fs.log.append(fs.hub, EventAccept, "a")
	if e := readEvent(t, c2); e.Type == EventReset || e.Seq != 51 {
		t.Fatalf("since=last: %+v", e)
	}
	// a since from another database (ahead of the log)
	c3 := fs.dial(t, "?since=9999")
	if e := readEvent(t, c3); e.Type != EventReset || e.Seq != 51 {
		t.Fatalf("since ahead: %+v", e)
	}
}

func TestFeedBadSince(t *testing.T) {
	fs := startFeed(t, 0, 0)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", fs.sock)
	}}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, "ws://bindery/v1/events?since=x", &websocket.DialOptions{HTTPClient: hc})
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("since=x: err=%v resp=%v", err, resp)
	}
}

// A client that never reads is dropped with a close reason, while a client
// that reads keeps receiving everything, and publishing never blocks.
func TestFeedSlowClientDropped(t *testing.T) {
	fs := startFeed(t, 64, 2*time.Second)
	slow := fs.dial(t, "")
	fs.waitSubscribers(t, 1)
	var slowSub *Subscriber
	fs.hub.mu.Lock()
	for s := range fs.hub.subs {
		slowSub = s
	}
	fs.hub.mu.Unlock()
	fast := fs.dial(t, "")
	fs.waitSubscribers(t, 2)
	var fastSub *Subscriber
	fs.hub.mu.Lock()
	for s := range fs.hub.subs {
		if s != slowSub {
			fastSub = s
		}
	}
	fs.hub.mu.Unlock()

	const n = 20000
	got := make(chan error, 1)
	go func() {
		for want := int64(1); want <= n; want++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, b, err := fast.Read(ctx)
			cancel()
			if err != nil {
				got <- fmt.Errorf("fast client read %d: %w", want, err)
				return
			}
			var e Event
			if err := json.Unmarshal(b, &e); err != nil || e.Seq != want {
				got <- fmt.Errorf("fast client: got %s, want seq %d (%v)", b, want, err)
				return
			}
		}
		got <- nil
	}()
	// The fast reader must keep up with a hub buffer of 64: publish in
	// small bursts, waiting for its queue to drain, as a real daemon's
	// commits are spaced. The slow one never reads.
	for i := 0; i < n; i++ {
		fs.log.append(fs.hub, EventAccept, "a")
		if i%32 == 31 {
			waitQueueBelow(t, fastSub, 16)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// The slow client was dropped from the hub, and its connection ends
	// with a policy-violation close naming where to resume.
	if fs.hub.Subscribers() != 1 {
		t.Fatalf("subscribers = %d, want only the fast one", fs.hub.Subscribers())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = slow.Read(ctx)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		// The server may have given up writing the close frame into a full
		// socket: then the connection simply ends. Either way it is gone.
		t.Logf("slow client ended without a close frame: %v", err)
		return
	}
	if ce.Code != websocket.StatusPolicyViolation {
		t.Fatalf("close = %v", ce)
	}
}

// waitQueueBelow waits until the subscriber has fewer than n queued events.
func waitQueueBelow(t *testing.T, s *Subscriber, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(s.c) >= n {
		if time.Now().After(deadline) {
			t.Fatalf("queue stays at %d", len(s.c))
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestFeedShutdownGoingAway(t *testing.T) {
	fs := startFeed(t, 0, 0)
	c := fs.dial(t, "")
	fs.waitSubscribers(t, 1)
	fs.hub.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after hub close: %v", err)
	}
}
