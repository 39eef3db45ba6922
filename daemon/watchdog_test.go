package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// The watchdog's health check: healthy while the watcher's loop beats,
// unhealthy once it has made no progress for the stall bound (here a sink
// that never returns, as a wedged read was), and when the watcher stopped.
func TestWatchdogHealth(t *testing.T) {
	dir := t.TempDir()
	store, err := db.Open(t.Context(), filepath.Join(dir, "bindery.db"), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	root := filepath.Join(dir, "sessions")
	os.MkdirAll(root, 0o755)
	w := watcher.New(watcher.Config{Roots: []watcher.Root{{Dir: root, Recursive: true}}, Rescan: 50 * time.Millisecond}, nil)
	stopped := false
	d := &daemon{cfg: Config{Rescan: 50 * time.Millisecond}, log: slog.New(slog.DiscardHandler), store: store, watch: w,
		watchOK: func() error {
			if stopped {
				return context.Canceled
			}
			return nil
		}}
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(ctx context.Context, b watcher.Batch) error {
			<-release // wedged
			return nil
		})
	}()
	defer func() { close(release); cancel(); <-done }()
	wait := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			why := d.unhealthy(t.Context(), time.Second, 300*time.Millisecond)
			if cond(why) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last: %q", what, why)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("healthy", func(why string) bool { return why == "" && !w.Beat().IsZero() })
	sess := pisessiontest.Generate(pisessiontest.Options{Seed: 5, Turns: 1})
	if err := sess.WriteFile(filepath.Join(root, "a.jsonl")); err != nil {
		t.Fatal(err)
	}
	wait("the stalled loop to be seen", func(why string) bool { return strings.Contains(why, "no progress") })
	stopped = true
	if why := d.unhealthy(t.Context(), time.Second, time.Hour); !strings.Contains(why, "watcher stopped") {
		t.Errorf("a stopped watcher: %q", why)
	}
}

func TestWatchdogInterval(t *testing.T) {
	env := map[string]string{"WATCHDOG_USEC": "30000000"}
	get := func(k string) string { return env[k] }
	if d, ok := watchdogInterval(get); !ok || d != 30*time.Second {
		t.Errorf("interval %v %v", d, ok)
	}
	env["WATCHDOG_PID"] = "1"
	if _, ok := watchdogInterval(get); ok {
		t.Error("another process's watchdog taken")
	}
	if _, ok := watchdogInterval(func(string) string { return "" }); ok {
		t.Error("no WATCHDOG_USEC, yet an interval")
	}
}

// The socket probe: any HTTP answer is healthy; a listener that accepts
// and never answers is not.
func TestWatchdogSocketProbe(t *testing.T) {
	dir := t.TempDir()
	silent := filepath.Join(dir, "silent.sock")
	ln, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	if err := probeSocket(silent, 200*time.Millisecond); err == nil {
		t.Error("a socket that never answers passed the probe")
	}
	if err := probeSocket(filepath.Join(dir, "none.sock"), 200*time.Millisecond); err == nil {
		t.Error("a missing socket passed the probe")
	}
	answering := filepath.Join(dir, "http.sock")
	hl, err := net.Listen("unix", answering)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go srv.Serve(hl)
	defer srv.Close()
	if err := probeSocket(answering, 5*time.Second); err != nil {
		t.Errorf("an HTTP server failed the probe: %v", err)
	}
}
