package main

// End to end: what the watcher cannot follow is refused without blocking
// anything, bounded, and told by `bindery status` and `bindery show`.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

func (d *bindDaemon) health(t *testing.T) api.Health {
	t.Helper()
	h, err := d.client.Health(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitHealth waits until cond holds of the daemon's health, failing with
// the problems it last listed.
func waitHealth(t *testing.T, d *bindDaemon, what string, cond func(api.Health) bool) {
	t.Helper()
	waitFor(t, what, func() (bool, string) {
		h := d.health(t)
		return cond(h), problemsState(h)
	})
}

func problemsState(h api.Health) string {
	return fmt.Sprintf("sessions %d, degraded %v, last rescan %s, problems %+v", h.Watcher.Sessions, h.Watcher.Degraded, h.Watcher.LastRescan, h.Watcher.Problems)
}

func hasProblem(h api.Health, path, kind string) bool {
	for _, p := range h.Watcher.Problems {
		if p.Path == path && p.Kind == kind {
			return true
		}
	}
	return false
}

// A FIFO named like a session file in the sessions folder, and another
// named by a compile's sessionFile: both refused unread and listed by
// status (exit 4) and show; sessions written after them are ingested; the
// daemon stops on SIGTERM. Before, the first FIFO wedged the watcher for
// good and SIGTERM did not stop the daemon.
func TestFIFOSessionFiles(t *testing.T) {
	d := newDaemon(t)
	dir := filepath.Join(d.agent, "sessions", "--tmp-project--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifoID := "0193e6c4-ffff-7000-8000-000000000001"
	fifo := filepath.Join(dir, "2026-11-29T09-00-00-000Z_"+fifoID+".jsonl")
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, d, "the FIFO in the sessions folder to be listed", func(h api.Health) bool { return hasProblem(h, fifo, "not-regular") })

	sid := "0193e6c4-ffff-7000-8000-000000000002"
	ps := newPiSession(t, d.agent, sid)
	ps.user("u1", "", "hello")
	waitFor(t, "a session written after the FIFO", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 1, sessionState(s, err)
	})

	named := filepath.Join(d.dir, "named.jsonl")
	if err := mkfifo(named, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hello"}}
	conv := "0193e6c4-ffff-7000-8000-000000000003"
	if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Branch: "u1", SessionFile: named, Request: h.body(h.system)}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, d, "the FIFO a compile named to be listed", func(h api.Health) bool { return hasProblem(h, named, "not-regular") })
	ps.user("u2", "u1", "still followed")
	waitFor(t, "a line appended after the compile named a FIFO", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 2, sessionState(s, err)
	})

	out, serr, code := d.runCLI(ctxT(t), "status")
	if code != 4 || !strings.Contains(out, fifo) || !strings.Contains(out, named) || !strings.Contains(out, "named pipe") || !strings.Contains(serr, "degraded") {
		t.Errorf("status: exit %d\n%s\n%s", code, out, serr)
	}
	out, _, code = d.runCLI(ctxT(t), "status", "--json")
	var hj api.Health
	if code != 4 || json.Unmarshal([]byte(out), &hj) != nil || !hj.Watcher.Degraded || len(hj.Watcher.Problems) != 2 {
		t.Errorf("status --json: exit %d\n%s", code, out)
	}
	_, serr, code = d.runCLI(ctxT(t), "show", fifoID)
	if code != 1 || !strings.Contains(serr, "not followed") || !strings.Contains(serr, "named pipe") {
		t.Errorf("show of the FIFO's session: exit %d %s", code, serr)
	}
	out, _, code = d.runCLI(ctxT(t), "show", conv)
	if code != 0 || !strings.Contains(out, "not followed") || !strings.Contains(out, "named pipe") {
		t.Errorf("show of the conversation naming a FIFO: exit %d\n%s", code, out)
	}

	// The FIFO goes: not degraded any more.
	os.Remove(fifo)
	os.Remove(named)
	waitHealth(t, d, "the problems to clear", func(h api.Health) bool { return len(h.Watcher.Problems) == 0 && !h.Watcher.Degraded })
	if _, _, code := d.runCLI(ctxT(t), "status"); code != 0 {
		t.Errorf("status after the FIFOs went: exit %d", code)
	}
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, d, "the FIFO again", func(h api.Health) bool { return hasProblem(h, fifo, "not-regular") })
	d.stop(true) // fails the test if SIGTERM does not end the daemon
}

// A 20 GB sparse session file with no newline: its error is recorded once
// with its file and offset, status lists it, and rescans do not read it
// again: the daemon's read(2) byte count (/proc/PID/io rchar) stays flat
// across rescans. Before, every rescan read all 20 GB.
func TestSparseSessionFile(t *testing.T) {
	d := newDaemon(t)
	dir := filepath.Join(d.agent, "sessions", "--tmp-project--")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "2026-11-29T09-00-00-000Z_0193e6c4-eeee-7000-8000-000000000001.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(20 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	waitHealth(t, d, "the long line to be scanned to its end", func(h api.Health) bool {
		for _, p := range h.Watcher.Problems {
			if p.Path == path && p.Kind == "long-line" && strings.Contains(p.Reason, "(21474836480 bytes so far)") {
				return true
			}
		}
		return false
	})
	rchar := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", d.cmd.Process.Pid))
		if err != nil {
			t.Skipf("no /proc/PID/io: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "rchar: "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no rchar")
		return 0
	}
	before := rchar()
	last := d.health(t).Watcher.LastRescan
	for range 5 {
		waitHealth(t, d, "a rescan", func(h api.Health) bool {
			r := h.Watcher.LastRescan
			if r.After(last) {
				last = r
				return true
			}
			return false
		})
	}
	if n := rchar() - before; n > 16<<20 {
		t.Errorf("five rescans read %d bytes", n)
	}
	h := d.health(t)
	if len(h.Watcher.IngestErrors) != 1 || h.Database.IngestErrors != 1 {
		t.Fatalf("ingest errors %+v (%d)", h.Watcher.IngestErrors, h.Database.IngestErrors)
	}
	if e := h.Watcher.IngestErrors[0]; e.File != path || e.Line != 1 || e.Offset != 0 || !strings.Contains(e.Reason, "longer than") {
		t.Errorf("ingest error %+v", e)
	}
	out, _, code := d.runCLI(ctxT(t), "status")
	if code != 4 || !strings.Contains(out, path+":1 (offset 0)") || !strings.Contains(out, "long-line") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	// A restart scans it once more, and records nothing new.
	d.restart(0)
	waitHealth(t, d, "the long line after a restart", func(h api.Health) bool { return hasProblem(h, path, "long-line") })
	if h := d.health(t); h.Database.IngestErrors != 1 {
		t.Errorf("%d ingest errors after a restart", h.Database.IngestErrors)
	}
}

// A session file that cannot be read (mode 000) and a sessions folder that
// does not exist: status lists both and exits 4 for as long as they last,
// show of the session says why it is missing, and the file is ingested
// once readable. Before, three retries were logged and then nothing. The
// daemon runs as an unprivileged user when the tests run as root (root
// reads a mode 000 file).
func TestUnreadableSessionFile(t *testing.T) {
	dir, err := os.MkdirTemp("", "bd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Root reads a mode 000 file: the daemon then runs as nobody.
	asNobody := os.Getuid() == 0
	bin := filepath.Join(dir, "bindery")
	src, err := os.ReadFile(buildBindery(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent")
	proj := filepath.Join(agent, "sessions", "--tmp-project--")
	os.MkdirAll(proj, 0o755)
	sid := "0193e6c4-dddd-7000-8000-000000000001"
	ps := newPiSession(t, agent, sid)
	ps.user("u1", "", "hello")
	if err := os.Chmod(ps.path, 0); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "flat-missing")
	if asNobody {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	}
	sock := filepath.Join(dir, "s")
	cmd := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "XDG_RUNTIME_DIR=" + dir, "NOTIFY_SOCKET="}
		if asNobody {
			setUser(c, 65534)
		}
		return c
	}
	logf, _ := os.Create(filepath.Join(dir, "log"))
	srv := cmd("serve", "--state-dir", filepath.Join(dir, "state"), "--socket", sock, "--agent-dir", agent,
		"--session-dir", extra, "--rescan", "200ms", "--log-level", "debug")
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-done
			t.Error("the daemon did not stop on SIGTERM")
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("daemon log:\n%s", b)
		}
	})
	cli := func(args ...string) (string, string, int) {
		c := cmd(append(args, "--socket", sock)...)
		var o, e strings.Builder
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	health := func() (api.Health, bool) {
		out, _, code := cli("status", "--json")
		var h api.Health
		if (code != 0 && code != 4) || json.Unmarshal([]byte(out), &h) != nil {
			return h, false
		}
		return h, true
	}
	waitFor(t, "status to list the unreadable file and the missing folder", func() (bool, string) {
		h, ok := health()
		return ok && hasProblem(h, ps.path, "unreadable") && hasProblem(h, extra, "folder-missing"), problemsState(h)
	})
	out, _, code := cli("status")
	if code != 4 || !strings.Contains(out, ps.path) || !strings.Contains(out, "permission denied") || !strings.Contains(out, "waiting for pi: no session folder yet") || !strings.Contains(out, "  "+extra+"\n") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	_, serr, code := cli("show", sid)
	if code != 1 || !strings.Contains(serr, "not followed") || !strings.Contains(serr, "permission denied") {
		t.Errorf("show: exit %d %s", code, serr)
	}
	// Still listed after many retries (before: silence after three).
	h, _ := health()
	last := h.Watcher.LastRescan
	for range 5 {
		waitFor(t, "a rescan", func() (bool, string) {
			h, ok := health()
			if ok && h.Watcher.LastRescan.After(last) {
				last = h.Watcher.LastRescan
				return true, ""
			}
			return false, fmt.Sprintf("last rescan %s", h.Watcher.LastRescan)
		})
	}
	if h, _ := health(); !hasProblem(h, ps.path, "unreadable") {
		t.Errorf("the unreadable file is no longer listed: %+v", h.Watcher.Problems)
	}
	if err := os.Chmod(ps.path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	if asNobody {
		os.Chown(extra, 65534, 65534)
	}
	waitFor(t, "the file once readable, and the folder once made", func() (bool, string) {
		h, ok := health()
		return ok && len(h.Watcher.Problems) == 0 && !h.Watcher.Degraded && h.Watcher.Sessions == 1, problemsState(h)
	})
	if _, _, code := cli("status"); code != 0 {
		t.Errorf("status once all is followed: exit %d", code)
	}
}

// A session whose two entries name each other as parent: compiles on it
// are answered at their usual cost (before: 2.4 s each, walking the cycle
// a million times), the branch is cut at the cycle's earliest entry, and
// status lists the cycle as an ingest error naming the file, line and
// entries.
func TestParentCycleSession(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	sid := "0193e6c4-cccc-7000-8000-000000000001"
	ps := newPiSession(t, d.agent, sid)
	ps.user("aaaa", "bbbb", "hello")
	ps.user("bbbb", "aaaa", "again")
	waitFor(t, "the session with a cycle", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 2, sessionState(s, err)
	})
	h.messages = []any{map[string]any{"role": "user", "content": "hello"}, map[string]any{"role": "assistant", "content": "hi"},
		map[string]any{"role": "user", "content": "again"}}
	for i := range 3 {
		start := time.Now()
		if _, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: sid, Branch: "bbbb", SessionFile: ps.path, Request: h.body(h.system)}); err != nil {
			t.Fatal(err)
		}
		t.Logf("compile %d on the cycle: %v", i, time.Since(start)) // a figure for the notes, not an assertion
	}
	s, err := d.client.Session(ctxT(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Branches) != 1 || s.Branches[0].Leaf != "bbbb" || s.Branches[0].Entries != 2 {
		t.Errorf("branches %+v", s.Branches)
	}
	if len(s.IngestErrors) != 1 || s.IngestErrors[0].Line != 2 || !strings.Contains(s.IngestErrors[0].Reason, `"aaaa" (line 2) → "bbbb" (line 3)`) {
		t.Errorf("session ingest errors %+v", s.IngestErrors)
	}
	out, _, code := d.runCLI(ctxT(t), "status")
	if code != 0 || !strings.Contains(out, ps.path+":2 (offset ") || !strings.Contains(out, "parentId cycle") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	out, _, code = d.runCLI(ctxT(t), "show", sid)
	if code != 0 || !strings.Contains(out, "line 2 (offset") || !strings.Contains(out, "parentId cycle") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
}

// Under systemd's watchdog ($WATCHDOG_USEC, from WatchdogSec= in the unit)
// the daemon sends WATCHDOG=1 on $NOTIFY_SOCKET while it is healthy.
func TestWatchdogPings(t *testing.T) {
	e := newE2E(t)
	addr := filepath.Join(e.root, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e.env = append(e.env, "NOTIFY_SOCKET="+addr, "WATCHDOG_USEC=200000")
	p := e.serve()
	seen := map[string]int{}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for seen["READY=1"] == 0 || seen["WATCHDOG=1"] < 3 {
		conn.SetReadDeadline(deadline)
		n, _, err := conn.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("waiting for READY=1 and three WATCHDOG=1: %v; seen %v", err, seen)
		}
		for _, l := range strings.Split(string(buf[:n]), "\n") {
			seen[l]++
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Errorf("exit: %v\n%s", err, p.stderr)
	}
}
