package main

// End-to-end: the real `bindery` binary, built into a temp dir, run as a
// separate process on an isolated agent dir, state dir and socket.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildBinary builds this package's binary once per test run.
func buildBinary() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bindery-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "bindery")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goTool, "build", "-o", binPath, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

func buildBindery(t testing.TB) string {
	t.Helper()
	p, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type e2e struct {
	t                           *testing.T
	bin                         string
	root, agent, sessions, sock string
	state                       string
	env                         []string
}

func newE2E(t *testing.T) *e2e {
	root, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	e := &e2e{t: t, bin: buildBindery(t), root: root,
		agent: filepath.Join(root, "agent"), state: filepath.Join(root, "state"), sock: filepath.Join(root, "run", "b.sock")}
	e.sessions = filepath.Join(e.agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/app"))
	if err := os.MkdirAll(e.sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	e.env = []string{
		"HOME=" + root, "PATH=" + os.Getenv("PATH"),
		"PI_CODING_AGENT_DIR=" + e.agent,
		"BINDERY_STATE_DIR=" + e.state,
		"BINDERY_SOCKET=" + e.sock,
		"BINDERY_RESCAN=500ms",
	}
	return e
}

type daemonProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// serve starts `bindery serve` and waits until it answers on the socket.
func (e *e2e) serve() *daemonProc {
	e.t.Helper()
	p, err := e.start()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (e *e2e) start() (*daemonProc, error) {
	p := &daemonProc{cmd: exec.Command(e.bin, "serve"), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd.Env = e.env
	p.cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait() }()
	c := api.NewClient(e.sock)
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := c.Health(context.Background()); err == nil {
			return p, nil
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("bindery serve exited: %v\n%s", err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("bindery serve did not answer within 60s\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// run runs a client command of the binary.
func (e *e2e) run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.env
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return o.String(), se.String(), code
}

func (e *e2e) sessionsJSON() (map[string]api.Session, error) {
	out, serr, code := e.run("sessions", "--json")
	if code != 0 {
		return nil, fmt.Errorf("exit %d: %s", code, serr)
	}
	var l api.SessionList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return nil, err
	}
	m := map[string]api.Session{}
	for _, s := range l.Sessions {
		m[s.ID] = s
	}
	return m, nil
}

// waitFor polls cond until it holds, failing with what was awaited and
// the last state cond reported. The deadline is generous on purpose: it
// bounds a hang, it does not assert a speed (the machine is shared).
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
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last: %s", what, last)
}

// entryRows counts, straight from the database file, the entry rows of
// each session id: duplicates from a re-read would show here.
func (e *e2e) entryRows() map[string]int {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.state, "bindery.db")+"?mode=ro")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT s.id, count(e.seq) FROM sessions s LEFT JOIN entries e ON e.file = s.file GROUP BY s.file`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		rows.Scan(&id, &n)
		m[id] = n
	}
	return m
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	e := newE2E(t)

	// Not running yet: a clear message and exit status 3.
	_, serr, code := e.run("status")
	if code != 3 || !strings.Contains(serr, "bindery is not running") || !strings.Contains(serr, "bindery serve") {
		t.Fatalf("status without a daemon: exit %d, %q", code, serr)
	}

	// Two complete sessions, one with a malformed line in the middle, and a
	// third that pi is still writing (only its first 10 lines so far).
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a := pisessiontest.Generate(pisessiontest.Options{Seed: 1})
	b := pisessiontest.Generate(pisessiontest.Options{Seed: 2, Version: 1})
	live := pisessiontest.Generate(pisessiontest.Options{Seed: 3, Turns: 10})
	pathA := filepath.Join(e.sessions, pisessiontest.FileName(start, a.ID))
	pathB := filepath.Join(e.sessions, pisessiontest.FileName(start.Add(time.Hour), b.ID))
	pathLive := filepath.Join(e.sessions, pisessiontest.FileName(start.Add(2*time.Hour), live.ID))
	mid := a.Offsets[len(a.Offsets)/2]
	bad := append(append(append([]byte{}, a.Data[:mid]...), []byte("{\"type\":\"message\",\"id\":\"torn\n")...), a.Data[mid:]...)
	if err := os.WriteFile(pathA, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(pathB); err != nil {
		t.Fatal(err)
	}
	const initial = 10
	if err := os.WriteFile(pathLive, live.Data[:live.Offsets[initial]], 0o644); err != nil {
		t.Fatal(err)
	}

	d := e.serve()
	want := map[string]int{a.ID: len(a.Lines) - 1, b.ID: len(b.Lines) - 1, live.ID: initial - 1}
	waitFor(t, "three sessions", func() (bool, string) {
		m, err := e.sessionsJSON()
		if err != nil {
			return false, err.Error()
		}
		for id, n := range want {
			if m[id].Entries != n {
				return false, fmt.Sprintf("%s has %d entries, want %d", id, m[id].Entries, n)
			}
		}
		return len(m) == 3, fmt.Sprint(len(m), " sessions")
	})
	out, _, code := e.run("status", "--json")
	var h api.Health
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil || h.Database.IngestErrors != 1 || h.Watcher.Sessions != 3 {
		t.Errorf("status: %d %s", code, out)
	}
	// The table fits 80 columns and prints each id as a unique prefix
	// that pastes back into show.
	out, _, code = e.run("sessions")
	if code != 0 || !strings.Contains(out, "SESSION") || !strings.Contains(out, "/home/dev/src/app") {
		t.Errorf("sessions table: %d\n%s", code, out)
	}
	var livePrefix string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("sessions table line of %d columns: %q", n, l)
		}
		if f := strings.Fields(l); len(f) > 0 && len(f[0]) >= api.MinShortID && strings.HasPrefix(live.ID, f[0]) {
			livePrefix = f[0]
		}
	}
	if livePrefix == "" {
		t.Errorf("sessions table has no prefix of %s:\n%s", live.ID, out)
	} else {
		if got, _, code := e.run("show", livePrefix); code != 0 || !strings.Contains(got, live.ID) {
			t.Errorf("show %s (the printed prefix): %d\n%s", livePrefix, code, got)
		}
		if got, serr, code := e.run("report", "--session", livePrefix); code != 0 || !strings.Contains(got, "session "+livePrefix+" ") {
			t.Errorf("report --session %s (the printed prefix): %d\n%s%s", livePrefix, code, got, serr)
		}
	}
	out, _, code = e.run("show", a.ID)
	if code != 0 || !strings.Contains(out, "branches:") || !strings.Contains(out, "* ") {
		t.Errorf("show: %d\n%s", code, out)
	}
	_, serr, code = e.run("show", "no-such-session")
	if code != 1 || !strings.Contains(serr, "no-such-session") {
		t.Errorf("show unknown: %d %s", code, serr)
	}

	// Live: every appended line shows in GET /v1/sessions/{id}; every
	// third is written in two halves, and the torn half is never counted.
	c := api.NewClient(e.sock)
	defer c.Close()
	ctx := t.Context()
	entries := func() int {
		s, err := c.Session(ctx, live.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s.Entries
	}
	for i := initial; i < initial+12; i++ {
		line := live.Data[live.Offsets[i]:live.Offsets[i+1]]
		var err error
		if i%3 == 0 {
			err = pisessiontest.AppendHalves(pathLive, line, func() {
				time.Sleep(30 * time.Millisecond) // let the watcher see the torn half
				if n := entries(); n != i-1 {
					t.Errorf("with a torn line: %d entries, want %d", n, i-1)
				}
			})
		} else {
			err = pisessiontest.AppendLine(pathLive, line)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("line %d", i+1), func() (bool, string) {
			n := entries()
			return n == i, fmt.Sprint(n)
		})
	}
	// `bindery sessions --json` sees the same.
	m, err := e.sessionsJSON()
	if err != nil || m[live.ID].Entries != initial+12-1 {
		t.Errorf("sessions --json after appends: %+v %v", m[live.ID], err)
	}

	// pi migrates the v1 file in place (same inode, longer): re-ingested
	// whole, now version 3 with pi's new ids.
	mig := b.Migrated(99)
	if err := pisessiontest.RewriteInPlace(pathB, mig.Data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the migrated file", func() (bool, string) {
		d, err := c.Session(ctx, b.ID)
		return err == nil && d.Version == 3 && d.Entries == len(mig.Lines)-1 && d.Leaf == mig.Lines[len(mig.Lines)-1].ID,
			fmt.Sprintf("%+v %v", d.Session, err)
	})
	// A project folder created after start, with a session in it.
	late := pisessiontest.Generate(pisessiontest.Options{Seed: 4, Cwd: "/home/dev/src/late", Turns: 3})
	lateDir := filepath.Join(e.agent, "sessions", pisessiontest.ProjectDir("/home/dev/src/late"))
	if err := os.MkdirAll(lateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := late.WriteFile(filepath.Join(lateDir, pisessiontest.FileName(start, late.ID))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a session in a new folder", func() (bool, string) {
		d, err := c.Session(ctx, late.ID)
		return err == nil && d.Cwd == "/home/dev/src/late" && d.Entries == len(late.Lines)-1, fmt.Sprint(err)
	})
	// A deleted file: the session leaves the list, and what was learned stays.
	if err := os.Remove(pathA); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed session", func() (bool, string) {
		m, err := e.sessionsJSON()
		if err != nil {
			return false, err.Error()
		}
		_, listed := m[a.ID]
		d, err := c.Session(ctx, a.ID)
		return !listed && err == nil && d.Removed && d.ThinkingBlocks > 0, fmt.Sprint(listed, d.Removed, err)
	})
	want[b.ID] = len(mig.Lines) - 1
	want[late.ID] = len(late.Lines) - 1

	// A second daemon on the same state refuses, naming the first.
	_, serr, code = e.run("serve")
	serr = strings.Join(strings.Fields(serr), " ") // wrapped at 80 columns
	if code == 0 || !strings.Contains(serr, "in use by another bindery") || !strings.Contains(serr, fmt.Sprint("pid ", d.cmd.Process.Pid)) {
		t.Errorf("second daemon: exit %d: %s", code, serr)
	}

	// The first scan is over (so its log line is written) before the kill.
	waitFor(t, "the first scan to be over", func() (bool, string) {
		out, _, _ := e.run("status", "--json")
		var h api.Health
		json.Unmarshal([]byte(out), &h)
		return h.Watcher.InitialScan, out
	})
	// kill -9: the socket file stays behind.
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done
	if fi, err := os.Lstat(e.sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("after kill -9 the socket file should be left: %v", err)
	}
	// The start said what the database knew; the end of the first scan
	// what was on disk (the start said files=0 with the three files there).
	if log := d.stderr.String(); !strings.Contains(log, "files_known=0") || !strings.Contains(log, `msg="first scan done" files=3 `) {
		t.Errorf("first start's log:\n%s", log)
	}
	_, serr, code = e.run("status")
	if code != 3 || !strings.Contains(serr, "not running") {
		t.Errorf("status against a stale socket: %d %s", code, serr)
	}
	// pi keeps writing while bindery is down.
	upto := initial + 12
	for i := upto; i < upto+5; i++ {
		if err := pisessiontest.AppendLine(pathLive, live.Data[live.Offsets[i]:live.Offsets[i+1]]); err != nil {
			t.Fatal(err)
		}
	}
	upto += 5

	// Restart: the stale socket is replaced, ingest resumes from the saved
	// offsets, nothing is read twice.
	d = e.serve()
	want[live.ID] = upto - 1
	waitFor(t, "resume after kill -9", func() (bool, string) {
		m, err := e.sessionsJSON()
		if err != nil {
			return false, err.Error()
		}
		return m[live.ID].Entries == upto-1, fmt.Sprint(m[live.ID].Entries)
	})
	rows := e.entryRows()
	if len(rows) != len(want) {
		t.Errorf("sessions in the database: %v, want %v", rows, want)
	}
	for id, n := range want {
		if rows[id] != n {
			t.Errorf("session %s has %d entry rows, want %d (duplicates or losses)", id, rows[id], n)
		}
	}

	// SIGTERM: a clean, ordered shutdown, exit 0, socket removed.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, d.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit 20s after SIGTERM\n%s", d.stderr)
	}
	if _, err := os.Lstat(e.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after SIGTERM: %v", err)
	}
	if !strings.Contains(d.stderr.String(), "shutting down") || !strings.Contains(d.stderr.String(), "stopped") {
		t.Errorf("shutdown log:\n%s", d.stderr)
	}
}

// TestRestartMidIngest kills the daemon (kill -9) while its first ingest of
// an archive is under way, restarts it, and checks every session ends up
// with exactly its lines: nothing lost, nothing twice.
func TestRestartMidIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	e := newE2E(t)
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	want := map[string]int{}
	var total int64
	for i := range 60 {
		s := pisessiontest.Generate(pisessiontest.Options{Seed: uint64(100 + i), TargetBytes: 400 << 10})
		if err := s.WriteFile(filepath.Join(e.sessions, pisessiontest.FileName(start.Add(time.Duration(i)*time.Minute), s.ID))); err != nil {
			t.Fatal(err)
		}
		want[s.ID] = len(s.Lines) - 1
		total += int64(len(s.Data))
	}
	d := e.serve()
	c := api.NewClient(e.sock)
	defer c.Close()
	var at int64
	waitFor(t, "ingest under way", func() (bool, string) {
		h, err := c.Health(t.Context())
		if err != nil {
			return false, err.Error()
		}
		at = h.Watcher.IngestedBytes
		return at > 0, fmt.Sprint(at)
	})
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	if at >= total {
		t.Logf("the daemon finished before the kill (%d of %d bytes); the restart still must not duplicate", at, total)
	} else {
		t.Logf("killed at %d of %d bytes", at, total)
	}
	e.serve()
	waitFor(t, "the whole archive", func() (bool, string) {
		h, err := c.Health(t.Context())
		if err != nil {
			return false, err.Error()
		}
		return h.Watcher.IngestedBytes == total && h.Watcher.Sessions == len(want), fmt.Sprint(h.Watcher.IngestedBytes, "/", total)
	})
	rows := e.entryRows()
	for id, n := range want {
		if rows[id] != n {
			t.Errorf("session %s: %d entry rows, want %d", id, rows[id], n)
		}
	}
}
