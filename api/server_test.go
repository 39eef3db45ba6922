package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeSessions is the store behind the handlers in these tests: api has no
// database of its own (the daemon passes one in).
type fakeSessions struct {
	list   []Session
	detail map[string]SessionDetail
	err    error
}

func (f *fakeSessions) ListSessions(context.Context) ([]Session, error) { return f.list, f.err }
func (f *fakeSessions) GetSession(_ context.Context, id string) (SessionDetail, error) {
	if f.err != nil {
		return SessionDetail{}, f.err
	}
	d, ok := f.detail[id]
	if !ok {
		return SessionDetail{}, Errorf(CodeNotFound, "no session %q", id)
	}
	return d, nil
}

type fakeHealth struct{ h Health }

func (f fakeHealth) Health(context.Context) (Health, error) { return f.h, nil }

// shortDir is a temp dir short enough for a socket path (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// serveUnix serves s on a real Unix socket, filling peer credentials the
// way the daemon does (here from the test's own uid, as the peer is this
// process).
func serveUnix(t *testing.T, s *Server, peer func(net.Conn) (Peer, error)) string {
	t.Helper()
	sock := filepath.Join(shortDir(t), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler(), ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		p, err := peer(c)
		return WithPeer(ctx, p, err)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func selfPeer(net.Conn) (Peer, error) {
	return Peer{PID: int32(os.Getpid()), UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}, nil
}

func testServer() (*Server, *fakeSessions) {
	fs := &fakeSessions{
		list: []Session{{ID: "s1", File: "/p/s1.jsonl", Cwd: "/c", Entries: 3, Leaf: "e3", ThinkingBlocks: 1}},
		detail: map[string]SessionDetail{"s1": {
			Session:  Session{ID: "s1", Entries: 3, Leaf: "e3"},
			Branches: []Branch{{Leaf: "e3", Current: true, Entries: 3}},
			Frontier: []Frontier{{Branch: "e3", Condense: &CondenseFrontier{Entry: "f1", Data: []byte(`{"a":1}`)}}},
		}},
	}
	return &Server{Sessions: fs, Health: fakeHealth{Health{Version: "test", Socket: "x"}}, UID: os.Getuid(), Version: "test", MaxBody: 1 << 20}, fs
}

func TestEndpointsOverUnixSocket(t *testing.T) {
	s, fs := testServer()
	c := NewClient(serveUnix(t, s, selfPeer))
	defer c.Close()
	ctx := t.Context()

	h, err := c.Health(ctx)
	if err != nil || h.Version != "test" {
		t.Fatalf("health %+v %v", h, err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "s1" || list[0].Leaf != "e3" {
		t.Fatalf("sessions %+v %v", list, err)
	}
	d, err := c.Session(ctx, "s1")
	if err != nil || len(d.Branches) != 1 || d.Frontier[0].Condense.Entry != "f1" || string(d.Frontier[0].Condense.Data) != `{"a":1}` {
		t.Fatalf("session %+v %v", d, err)
	}
	_, err = c.Session(ctx, "nope")
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound || e.Status != 404 || !strings.Contains(e.Message, "nope") {
		t.Fatalf("unknown session: %v", err)
	}
	// An empty list is [] on the wire, not null.
	fs.list = nil
	var raw map[string]any
	if err := c.Do(ctx, "GET", "/v1/sessions", nil, &raw); err != nil || fmt.Sprint(raw["sessions"]) != "[]" {
		t.Errorf("empty list: %v %v", raw, err)
	}
	// A store failure is a 500 "internal" without the detail.
	fs.err = errors.New("disk on fire")
	_, err = c.Sessions(ctx)
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeInternal || strings.Contains(e.Message, "fire") {
		t.Errorf("store failure: %v", err)
	}
}

func TestErrorAnswersAreJSON(t *testing.T) {
	s, _ := testServer()
	c := NewClient(serveUnix(t, s, selfPeer))
	defer c.Close()
	ctx := t.Context()
	for _, tc := range []struct {
		method, path string
		body         any
		code         string
		status       int
	}{
		{"GET", "/v1/nothing", nil, CodeNotFound, 404},
		{"GET", "/", nil, CodeNotFound, 404},
		{"DELETE", "/v1/sessions", nil, CodeMethodNotAllowed, 405},
		{"POST", "/v1/health", map[string]int{"a": 1}, CodeMethodNotAllowed, 405},
		{"GET", "/v1/sessions/" + strings.Repeat("x", 300), nil, CodeLimitExceeded, 400},
	} {
		err := c.Do(ctx, tc.method, tc.path, tc.body, nil)
		e, ok := errors.AsType[*Error](err)
		if !ok || e.Code != tc.code || e.Status != tc.status || e.Message == "" {
			t.Errorf("%s %s: got %v, want %s (%d)", tc.method, tc.path, err, tc.code, tc.status)
		}
	}
}

// rawRequest sends bytes on a fresh connection and returns the answer.
func rawRequest(t *testing.T, sock string, req *http.Request) (*http.Response, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

func TestBodyLimitAndBrowsers(t *testing.T) {
	s, _ := testServer()
	sock := serveUnix(t, s, selfPeer)

	big := strings.NewReader(strings.Repeat("x", 2<<20))
	req, _ := http.NewRequest("POST", "http://bindery/v1/sessions", big)
	resp, body := rawRequest(t, sock, req)
	if resp.StatusCode != 413 || !strings.Contains(body, `"code":"body_too_large"`) {
		t.Errorf("oversized body: %d %s", resp.StatusCode, body)
	}

	req, _ = http.NewRequest("GET", "http://bindery/v1/health", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, body = rawRequest(t, sock, req)
	if resp.StatusCode != 403 || !strings.Contains(body, `"code":"forbidden"`) {
		t.Errorf("browser request: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get(VersionHeader) != "test" {
		t.Errorf("version header %q", resp.Header.Get(VersionHeader))
	}
}

func TestDecodeJSON(t *testing.T) {
	var limit int64 = 64
	for _, tc := range []struct {
		name, body, ctype, code string
	}{
		{"ok", `{"a":1}`, "application/json", ""},
		{"no content type", `{"a":1}`, "", ""},
		{"empty", ``, "application/json", CodeBadRequest},
		{"bad json", `{"a":`, "application/json", CodeBadRequest},
		{"trailing", `{"a":1} {"b":2}`, "application/json", CodeBadRequest},
		{"text", `{"a":1}`, "text/plain", CodeUnsupportedMedia},
		{"too large", `{"a":"` + strings.Repeat("x", 100) + `"}`, "application/json", CodeBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "/", strings.NewReader(tc.body))
			r.ContentLength = -1 // chunked: only the reader's limit catches it
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			r.Body = http.MaxBytesReader(nil, r.Body, limit)
			var v map[string]any
			err := DecodeJSON(r, &v)
			if tc.code == "" {
				if err != nil || v["a"] != float64(1) {
					t.Fatalf("got %v %v", v, err)
				}
				return
			}
			if !IsCode(err, tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}

// TestPeerCheck covers the uid rule with crafted credentials; the daemon's
// tests cover reading real ones from a socket (same uid, and another uid
// when run as root).
func TestPeerCheck(t *testing.T) {
	me := os.Getuid()
	if err := CheckPeer(Peer{UID: uint32(me), PID: 1}, true, nil, me); err != nil {
		t.Errorf("own uid refused: %v", err)
	}
	for name, tc := range map[string]struct {
		p     Peer
		known bool
		err   error
	}{
		"other uid":    {Peer{UID: uint32(me + 1), PID: 7}, true, nil},
		"root":         {Peer{UID: 0}, me != 0, nil},
		"unknown":      {Peer{UID: uint32(me)}, false, nil},
		"lookup error": {Peer{UID: uint32(me)}, true, syscall.EBADF},
	} {
		if name == "root" && me == 0 {
			continue
		}
		err := CheckPeer(tc.p, tc.known, tc.err, me)
		if err == nil || err.Code != CodeForbidden || err.Status != 403 {
			t.Errorf("%s: got %v, want forbidden", name, err)
		}
	}

	// Over a real socket, a server that sees another uid answers 403.
	s, _ := testServer()
	other := func(net.Conn) (Peer, error) { return Peer{UID: uint32(me + 1000), PID: 99}, nil }
	err := NewClient(serveUnix(t, s, other)).Do(t.Context(), "GET", "/v1/health", nil, nil)
	if !IsCode(err, CodeForbidden) || !strings.Contains(err.Error(), fmt.Sprint(me+1000)) {
		t.Errorf("other uid over the socket: %v", err)
	}
}

func TestClientNotRunning(t *testing.T) {
	dir := shortDir(t)
	missing := filepath.Join(dir, "none.sock")
	err := NewClient(missing).Do(t.Context(), "GET", "/v1/health", nil, nil)
	nr, ok := errors.AsType[*NotRunningError](err)
	if !ok || nr.Socket != missing || !strings.Contains(err.Error(), "bindery serve") || !strings.Contains(err.Error(), "bindery service install") {
		t.Fatalf("no socket: %v", err)
	}
	// A stale socket file (a crashed daemon) is "not running" too.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(stale); err != nil {
		t.Fatal(err)
	}
	err = NewClient(stale).Do(t.Context(), "GET", "/v1/health", nil, nil)
	if _, ok := errors.AsType[*NotRunningError](err); !ok {
		t.Fatalf("stale socket: %v", err)
	}
}

func TestDefaultPaths(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		env           func(string) string
		socket, state string
	}{
		{env("HOME", "/h"), "/h/.local/state/bindery/run/bindery.sock", "/h/.local/state/bindery"},
		{env("HOME", "/h", "XDG_RUNTIME_DIR", "/run/user/1", "XDG_STATE_HOME", "/xs"), "/run/user/1/bindery/bindery.sock", "/xs/bindery"},
		{env("HOME", "/h", "RUNTIME_DIRECTORY", "/run/user/1/bindery", "STATE_DIRECTORY", "/h/.local/state/bindery:/other"), "/run/user/1/bindery/bindery.sock", "/h/.local/state/bindery"},
		{env("HOME", "/h", "BINDERY_SOCKET", "/s.sock", "BINDERY_STATE_DIR", "/st", "XDG_RUNTIME_DIR", "/r"), "/s.sock", "/st"},
		{env("HOME", "/h", "BINDERY_STATE_DIR", "/st"), "/st/run/bindery.sock", "/st"},
	} {
		sock, err := DefaultSocket(tc.env)
		state, err2 := DefaultStateDir(tc.env)
		if err != nil || err2 != nil || sock != tc.socket || state != tc.state {
			t.Errorf("got %s %s (%v %v), want %s %s", sock, state, err, err2, tc.socket, tc.state)
		}
	}
	if _, err := DefaultSocket(env()); err == nil {
		t.Error("no HOME and no dirs: want an error")
	}
}
