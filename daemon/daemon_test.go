package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db/pgtest"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// TestMain doubles as the "other user" client for TestPeerOtherUID: run
// with BINDERY_TEST_CLIENT=<socket> it calls GET /v1/health once and
// prints the error code (or "ok").
func TestMain(m *testing.M) {
	if sock := os.Getenv("BINDERY_TEST_CLIENT"); sock != "" {
		err := api.NewClient(sock).Do(context.Background(), "GET", "/v1/health", nil, nil)
		if e, ok := errors.AsType[*api.Error](err); ok {
			fmt.Println(e.Code, e.Message)
		} else if err != nil {
			fmt.Println("error", err)
		} else {
			fmt.Println("ok")
		}
		os.Exit(0)
	}
	code := pgtest.Run(m) // the shared tier's tests start a cluster
	removeArchives()
	os.Exit(code)
}

func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func envMap(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestConfigDefaultsEnvAndFlags(t *testing.T) {
	c, err := DefaultConfig(envMap("HOME", "/h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.AgentDir != "/h/.pi/agent" || c.StateDir != "/h/.local/state/bindery" || c.Database != "/h/.local/state/bindery/bindery.db" ||
		c.Socket != "/h/.local/state/bindery/run/bindery.sock" || c.MaxBody != api.DefaultMaxBody || c.Rescan != 10*time.Second {
		t.Errorf("defaults: %+v", c)
	}

	c, err = DefaultConfig(envMap("HOME", "/h", "PI_CODING_AGENT_DIR", "~/pi", "XDG_RUNTIME_DIR", "/run/user/5",
		"XDG_STATE_HOME", "/xs", "BINDERY_MAX_BODY", "40MiB", "BINDERY_RESCAN", "2s", "BINDERY_LOG_LEVEL", "debug",
		"BINDERY_SESSION_DIRS", "/a:~/b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.AgentDir != "/h/pi" || c.Socket != "/run/user/5/bindery/bindery.sock" || c.Database != "/xs/bindery/bindery.db" ||
		c.MaxBody != 40<<20 || c.Rescan != 2*time.Second || c.LogLevel != slog.LevelDebug ||
		strings.Join(c.SessionDirs, ",") != "/a,/h/b" {
		t.Errorf("from env: %+v", c)
	}

	// Flags win over the environment; a moved state dir moves the derived paths.
	c, _ = DefaultConfig(envMap("HOME", "/h", "BINDERY_AGENT_DIR", "/env-agent"))
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"--agent-dir", "/flag-agent", "--state-dir", "/st", "--session-dir", "/s1", "--session-dir", "/s2", "--max-body", "33554432", "--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.AgentDir != "/flag-agent" || c.Database != "/st/bindery.db" || c.Socket != "/st/run/bindery.sock" ||
		c.MaxBody != 32<<20 || c.LogLevel != slog.LevelWarn || len(c.SessionDirs) != 2 {
		t.Errorf("from flags: %+v", c)
	}

	for name, env := range map[string]func(string) string{
		"bad size":     envMap("HOME", "/h", "BINDERY_MAX_BODY", "lots"),
		"bad duration": envMap("HOME", "/h", "BINDERY_RESCAN", "often"),
		"bad level":    envMap("HOME", "/h", "BINDERY_LOG_LEVEL", "loud"),
	} {
		if _, err := DefaultConfig(env); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, _ = DefaultConfig(envMap("HOME", "/h", "BINDERY_SOCKET", "/"+strings.Repeat("s", 120)))
	if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "at most 107") {
		t.Errorf("long socket path: %v", err)
	}
	c, _ = DefaultConfig(envMap("HOME", "/h"))
	c.MaxBody = 10
	if err := c.Resolve(); err == nil {
		t.Error("a tiny --max-body was accepted")
	}
}

func TestSessionRoots(t *testing.T) {
	agent := t.TempDir()
	os.WriteFile(filepath.Join(agent, "settings.json"), []byte(`{"sessionDir":"~/custom","theme":"dark"}`), 0o644)
	c, _ := DefaultConfig(envMap("HOME", "/h", "PI_CODING_AGENT_DIR", agent, "PI_CODING_AGENT_SESSION_DIR", "/envdir"))
	c.SessionDirs = []string{"/flat", "/flat"}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.SessionRoots())
	want := fmt.Sprint([]Root{{agent + "/sessions", true}, {"/envdir", true}, {"/h/custom", true}, {"/flat", false}})
	if got != want {
		t.Errorf("roots\n got %s\nwant %s", got, want)
	}
}

func TestListenSocket(t *testing.T) {
	dir := filepath.Join(shortDir(t), "run")
	sock := filepath.Join(dir, "b.sock")
	ln, _, err := listenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", fi.Mode().Perm())
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// A live socket is never replaced.
	if _, _, err := listenSocket(sock); !errors.Is(err, ErrLocked) {
		t.Errorf("second listener on a live socket: %v", err)
	}
	// A crash leaves the file behind: it is replaced.
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("the stale socket file should still be there:", err)
	}
	ln2, remove, err := listenSocket(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removing our socket left the socket file: %v", err)
	}
	// What replaced our socket since is not ours to remove: a regular
	// file, or another listener's socket.
	ln3, remove3, err := listenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	ln3.Close()
	os.Remove(sock)
	os.WriteFile(sock, []byte("mine"), 0o600)
	if err := remove3(); err == nil {
		t.Error("remove of a regular file put at our socket's path: no error")
	}
	if b, _ := os.ReadFile(sock); string(b) != "mine" {
		t.Error("a regular file put at the socket's path was removed or changed")
	}
	os.Remove(sock)
	ln4, remove4, err := listenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sock)
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln4.Close()
	if err := remove4(); err == nil {
		t.Error("remove of another listener's socket: no error")
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("another listener's socket was removed: %v", err)
	}
	other.Close()
	// A regular file where the socket goes is never deleted.
	os.WriteFile(sock, []byte("mine"), 0o600)
	if _, _, err := listenSocket(sock); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "mine" {
		t.Error("the regular file was touched")
	}
	// An existing readable folder is used as it is (never chmod'ed: it may
	// be $HOME); one others can write to is refused, unless sticky.
	readable := filepath.Join(shortDir(t), "readable")
	os.Mkdir(readable, 0o755)
	os.Chmod(readable, 0o755)
	if err := privateDir(readable); err != nil {
		t.Errorf("a 0755 folder of ours: %v", err)
	}
	if fi, _ := os.Stat(readable); fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing folder's mode was changed: %v", fi.Mode().Perm())
	}
	shared := filepath.Join(shortDir(t), "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	if err := privateDir(shared); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a 0777 folder: %v", err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	if err := privateDir(shared); err != nil {
		t.Errorf("a sticky 1777 folder (like /tmp): %v", err)
	}
}

func TestLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.db.lock")
	l, err := acquireLock(p, "database")
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireLock(p, "database")
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second lock: %v", err)
	}
	l.release()
	l2, err := acquireLock(p, "database")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
}

// TestPeerCredSameUID reads real credentials off a real socket: the peer
// is this process.
func TestPeerCredSameUID(t *testing.T) {
	sock := filepath.Join(shortDir(t), "p.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := peerCred(c)
	if err != nil {
		t.Fatal(err)
	}
	if int(p.UID) != os.Getuid() || int(p.PID) != os.Getpid() || int(p.GID) != os.Getgid() {
		t.Errorf("peer %+v, want uid %d pid %d", p, os.Getuid(), os.Getpid())
	}
	if err := api.CheckPeer(p, true, nil, os.Getuid()); err != nil {
		t.Errorf("own peer refused: %v", err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := peerCred(a); err == nil {
		t.Error("credentials from a non-Unix connection")
	}
}

// testEnv is an isolated agent dir, state dir and socket.
type testEnv struct {
	agent, sessions, state, sock string
}

func newTestEnv(t testing.TB) testEnv {
	root := shortDir(t)
	e := testEnv{agent: filepath.Join(root, "agent"), state: filepath.Join(root, "state"), sock: filepath.Join(root, "run", "b.sock")}
	e.sessions = filepath.Join(e.agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(e.sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e testEnv) config(t testing.TB) Config {
	c, err := DefaultConfig(envMap("HOME", "/nonexistent", "PI_CODING_AGENT_DIR", e.agent, "BINDERY_STATE_DIR", e.state, "BINDERY_SOCKET", e.sock))
	if err != nil {
		t.Fatal(err)
	}
	c.Logger = slog.New(slog.DiscardHandler)
	c.Rescan = 200 * time.Millisecond
	c.Version = "test"
	return c
}

// start runs the daemon in this process and waits until it answers.
func start(t testing.TB, cfg Config) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	c := api.NewClient(cfg.Socket)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := c.Health(context.Background()); err == nil {
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("daemon exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("daemon did not answer within 60s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	var stopped bool
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitFor polls cond until it holds or the deadline passes, failing with
// what was awaited and the last state cond reported. The deadline bounds a
// hang; it asserts no speed (the machine is shared, the race detector slow).
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

func TestRunServesAndShutsDown(t *testing.T) {
	e := newTestEnv(t)
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 7})
	file := filepath.Join(e.sessions, pisessiontest.FileName(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), s.ID))
	if err := s.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	notifySock := filepath.Join(shortDir(t), "notify")
	nl, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifySock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	t.Setenv("NOTIFY_SOCKET", notifySock)

	cfg := e.config(t)
	stop := start(t, cfg)
	buf := make([]byte, 256)
	nl.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := nl.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1") {
		t.Fatalf("sd_notify: %q %v", buf[:n], err)
	}

	c := api.NewClient(e.sock)
	defer c.Close()
	ctx := t.Context()
	waitFor(t, "the session", func() (bool, string) {
		l, err := c.Sessions(ctx)
		return err == nil && len(l) == 1 && l[0].Entries == len(s.Lines)-1, fmt.Sprint(l, err)
	})
	d, err := c.Session(ctx, s.ID)
	if err != nil || len(d.Branches) == 0 || d.File != file {
		t.Fatalf("session detail %+v %v", d, err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Watcher.Sessions != 1 || h.Database.SchemaVersion == 0 || !h.Watcher.Running || h.Socket != e.sock {
		t.Errorf("health %+v %v", h, err)
	}
	// A second daemon on the same state refuses to start, naming the first.
	err = Run(ctx, cfg)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), fmt.Sprint("pid ", os.Getpid())) {
		t.Errorf("second daemon: %v", err)
	}
	// Same socket, another database: refused by the socket lock.
	cfg2 := cfg
	cfg2.StateDir, cfg2.Database = filepath.Join(shortDir(t), "st"), ""
	if err := Run(ctx, cfg2); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "socket") {
		t.Errorf("second daemon on the same socket: %v", err)
	}

	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	nl.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err = nl.Read(buf)
	if err != nil || string(buf[:n]) != "STOPPING=1" {
		t.Errorf("sd_notify at shutdown: %q %v", buf[:n], err)
	}
	if _, err := os.Stat(e.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after shutdown: %v", err)
	}
	_, err = c.Health(ctx)
	if _, ok := errors.AsType[*api.NotRunningError](err); !ok {
		t.Errorf("after shutdown: %v", err)
	}
}

// TestPeerOtherUID runs a client as another user (uid 65534) against the
// daemon. It needs root to switch uid; elsewhere it is skipped and the
// rule is covered by api's crafted-credential test and TestPeerCredSameUID.
func TestPeerOtherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client under another uid")
	}
	e := newTestEnv(t)
	start(t, e.config(t))
	// Open the socket's folder and the socket to everyone, so only the
	// peer-credential check stands between the other user and the API.
	os.Chmod(filepath.Dir(filepath.Dir(e.sock)), 0o755)
	os.Chmod(filepath.Dir(e.sock), 0o755)
	os.Chmod(e.sock, 0o666)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(shortDir(t), "client")
	os.Chmod(filepath.Dir(bin), 0o755)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uid  uint32
		want string
	}{{65534, "forbidden peer uid 65534"}, {0, "ok"}} {
		cmd := exec.Command(bin)
		cmd.Env = []string{"BINDERY_TEST_CLIENT=" + e.sock}
		setUser(cmd, tc.uid)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("client as uid %d: %v: %s", tc.uid, err, out)
		}
		if !strings.HasPrefix(string(out), tc.want) {
			t.Errorf("client as uid %d: %q, want %q...", tc.uid, out, tc.want)
		}
	}
}

// A model-table override is read at start: named by BINDERY_MODELS (or
// --models), else <state-dir>/models.json when present. A file that does
// not parse stops the daemon from starting.
func TestConfigModelTable(t *testing.T) {
	dir := t.TempDir()
	c, err := DefaultConfig(envMap("HOME", "/h", "BINDERY_STATE_DIR", dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(); err != nil || c.ModelTable != nil {
		t.Fatalf("no file: table %v, err %v", c.ModelTable, err)
	}
	// In the state dir: a model the built-in table does not know, declared non-binding.
	if err := os.WriteFile(filepath.Join(dir, "models.json"), []byte(`{"models":[{"id":"claude-quill-1","binds":false}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ = DefaultConfig(envMap("HOME", "/h", "BINDERY_STATE_DIR", dir))
	if err := c.Resolve(); err != nil || c.ModelTable == nil {
		t.Fatalf("state-dir file: table %v, err %v", c.ModelTable, err)
	}
	if c.ModelTable.Binds("claude-quill-1") || !binding.DefaultModelTable().Binds("claude-quill-1") {
		t.Errorf("the override did not take: binds %v (default %v)", c.ModelTable.Binds("claude-quill-1"), binding.DefaultModelTable().Binds("claude-quill-1"))
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"models":[{"id":""}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ = DefaultConfig(envMap("HOME", "/h", "BINDERY_STATE_DIR", dir, "BINDERY_MODELS", bad))
	if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("a bad model table: %v", err)
	}
	c, _ = DefaultConfig(envMap("HOME", "/h", "BINDERY_STATE_DIR", dir, "BINDERY_MODELS", filepath.Join(dir, "missing.json")))
	if err := c.Resolve(); err == nil {
		t.Error("a named model table that does not exist was accepted")
	}
}
