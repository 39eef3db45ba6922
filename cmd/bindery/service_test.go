package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// serviceEnv is a temporary user: its own HOME and runtime folder, the
// test's PATH, nothing else of the test's environment (no DBUS address,
// no XDG folders) so nothing reaches the developer's own session.
type serviceEnv struct {
	t                *testing.T
	base, home, run  string
	bin              string // a copy of bindery outside HOME, as a fresh clone's build
	env              []string
	manager          *exec.Cmd
	managerDone      chan error
	systemdPath      string
	managerLog       *bytes.Buffer
	managerLogLocked *lockedWriter
}

// newServiceEnv makes the user's folders outside /tmp: the unit has
// PrivateTmp=yes, so a HOME or runtime folder under /tmp would be hidden
// from the service it installs (a real user's never is).
func newServiceEnv(t *testing.T) *serviceEnv {
	parent, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no cache folder for a HOME outside /tmp:", err)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp(parent, "bindery-svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	s := &serviceEnv{t: t, base: base, home: filepath.Join(base, "home"), run: filepath.Join(base, "run")}
	if err := os.MkdirAll(s.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.run, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(buildBindery(t))
	if err != nil {
		t.Fatal(err)
	}
	s.bin = filepath.Join(base, "clone", "bindery")
	os.MkdirAll(filepath.Dir(s.bin), 0o755)
	if err := os.WriteFile(s.bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"HOME=" + s.home, "XDG_RUNTIME_DIR=" + s.run, "PATH=" + os.Getenv("PATH")}
	return s
}

func (s *serviceEnv) cli(extraEnv []string, args ...string) (string, string, int) {
	s.t.Helper()
	c := exec.Command(s.bin, args...)
	c.Env = append(append([]string{}, s.env...), extraEnv...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func (s *serviceEnv) systemctl(args ...string) string {
	c := exec.Command("systemctl", append([]string{"--user"}, args...)...)
	c.Env = s.env
	out, _ := c.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// startManager starts a real systemd user instance for the temporary user.
// systemd refuses to run a user instance on a host not booted with it
// (it checks /run/systemd/system), which a CI container is not: the
// instance runs in a private mount namespace with that folder on a tmpfs,
// which changes nothing outside it. Needs root (for the namespace) and
// systemd; the test is skipped without them, and says so.
func (s *serviceEnv) startManager() {
	t := s.t
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("a systemd user instance of its own needs Linux and root (a mount namespace)")
	}
	for _, p := range []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd"} {
		if _, err := os.Stat(p); err == nil {
			s.systemdPath = p
			break
		}
	}
	if s.systemdPath == "" {
		t.Skip("systemd is not installed")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	s.managerLog = &bytes.Buffer{}
	s.managerLogLocked = &lockedWriter{w: s.managerLog}
	s.launchManager()
	t.Cleanup(s.stopManager)
}

func (s *serviceEnv) launchManager() {
	t := s.t
	script := `mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; } || exit 97
mkdir -p /run/systemd/system && exec "$0" "$@"`
	c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, s.systemdPath)
	c.Args = append(c.Args, "--user")
	c.Env = s.env
	c.Stdout, c.Stderr = s.managerLogLocked, s.managerLogLocked
	if err := c.Start(); err != nil {
		t.Skip("cannot start a systemd user instance:", err)
	}
	s.manager, s.managerDone = c, make(chan error, 1)
	go func() { s.managerDone <- c.Wait() }()
	private := filepath.Join(s.run, "systemd", "private")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if conn, err := net.Dial("unix", private); err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-s.managerDone:
			s.manager = nil
			t.Skipf("the systemd user instance did not start (%v): %s", err, s.managerLog)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the systemd user instance does not answer on %s: %s", private, s.managerLog)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Wait until start-up is done (default.target reached).
	deadline = time.Now().Add(30 * time.Second)
	for {
		st := s.systemctl("is-system-running")
		if st == "running" || st == "degraded" || st == "offline" && s.systemctl("is-active", "default.target") == "active" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user instance did not finish starting: %s", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopManager ends the user instance as a logout does: its services stop.
func (s *serviceEnv) stopManager() {
	if s.manager == nil {
		return
	}
	s.manager.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.managerDone:
	case <-time.After(30 * time.Second):
		s.manager.Process.Kill()
		<-s.managerDone
	}
	s.manager = nil
}

func checkWidth(t *testing.T, what, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("%s: a line of %d columns:\n%s", what, n, l)
		}
	}
}

// bindery service install under a real systemd user instance, in a
// temporary HOME: the binary is copied, the unit written with the agent
// folder the shell names, enabled and started; status is healthy before
// pi's first session; the service comes back at the next login (a new
// instance of the user manager); uninstall undoes it.
func TestServiceInstallSystemd(t *testing.T) {
	s := newServiceEnv(t)
	s.startManager()

	agent := filepath.Join(s.home, "pi agent%1") // a space and a % (systemd specifiers)
	shellEnv := []string{"PI_CODING_AGENT_DIR=~/pi agent%1"}
	out, serr, code := s.cli(shellEnv, "service", "install")
	if code != 0 {
		t.Fatalf("service install: exit %d\n%s%s\n%s", code, out, serr, s.systemctl("status", "bindery"))
	}
	checkWidth(t, "service install", out)
	for _, want := range []string{
		"copied   " + s.bin + "\n           to ~/.local/bin/bindery",
		"wrote    ~/.config/systemd/user/bindery.service",
		"ran      systemctl --user enable bindery.service",
		"~/pi agent%1/sessions",
		"Undo: bindery service uninstall",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("service install does not say %q:\n%s", want, out)
		}
	}
	unitPath := filepath.Join(s.home, ".config", "systemd", "user", "bindery.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), `Environment="BINDERY_AGENT_DIR=`+strings.ReplaceAll(agent, "%", "%%")+`"`) ||
		!strings.Contains(string(unit), "[Install]\nWantedBy=default.target") {
		t.Errorf("the unit:\n%s", unit)
	}
	if fi, err := os.Stat(filepath.Join(s.home, ".local", "bin", "bindery")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("~/.local/bin/bindery: %v", err)
	}
	if got := s.systemctl("is-enabled", "bindery.service"); got != "enabled" {
		t.Errorf("is-enabled: %s", got)
	}
	if got := s.systemctl("is-active", "bindery.service"); got != "active" {
		t.Errorf("is-active: %s", got)
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		c := exec.Command(sa, "--user", "verify", unitPath)
		c.Env = s.env
		if out, err := c.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify of the written unit: %v\n%s", err, out)
		}
	}

	// Healthy before pi's first session, and watching the shell's folder.
	out, serr, code = s.cli(nil, "status")
	if code != 0 || !strings.Contains(out, "waiting for pi") || !strings.Contains(out, filepath.Join(agent, "sessions")) {
		t.Errorf("status: exit %d\n%s%s", code, out, serr)
	}
	out, serr, code = s.cli(nil, "status", "--json")
	var h struct{ PID int }
	if code != 0 || json.Unmarshal([]byte(out), &h) != nil || h.PID == 0 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, serr)
	}
	out, serr, code = s.cli(nil, "service", "status")
	if code != 0 || !strings.Contains(out, "active, enabled") || !strings.Contains(out, "agent dir ~/pi agent%1") {
		t.Errorf("service status: exit %d\n%s%s", code, out, serr)
	}
	checkWidth(t, "service status", out)
	// A shell pointing pi elsewhere is told the service does not follow it.
	out, _, _ = s.cli([]string{"PI_CODING_AGENT_DIR=" + filepath.Join(s.home, "other")}, "service", "status")
	if !strings.Contains(out, "This shell's pi folder is ~/other, not the service's.") {
		t.Errorf("service status from a shell with another pi folder:\n%s", out)
	}

	// The next login: the user manager starts again and so does bindery.
	s.stopManager()
	if _, _, code := s.cli(nil, "status"); code != 3 {
		t.Fatalf("status with the user manager stopped: exit %d, want 3", code)
	}
	s.launchManager()
	waitFor(t, "bindery to start with the user manager", func() (bool, string) {
		out, serr, code := s.cli(nil, "status", "--json")
		var h2 struct{ PID int }
		return code == 0 && json.Unmarshal([]byte(out), &h2) == nil && h2.PID != 0 && h2.PID != h.PID, serr
	})

	// Installing again replaces the unit and restarts the service; a
	// session folder under /tmp, which the unit's private /tmp hides, is
	// named as such.
	out, serr, code = s.cli(shellEnv, "service", "install", "--session-dir", "/tmp/pi-flat")
	if code != 0 || !strings.Contains(out, "ran      systemctl --user restart bindery.service") ||
		!strings.Contains(out, "Note: the unit has a private /tmp, so it cannot see /tmp/pi-flat;") {
		t.Errorf("a second install: exit %d\n%s%s", code, out, serr)
	}
	if unit, _ := os.ReadFile(unitPath); !strings.Contains(string(unit), `Environment="BINDERY_SESSION_DIRS=/tmp/pi-flat"`) {
		t.Errorf("the unit after --session-dir:\n%s", unit)
	}

	out, serr, code = s.cli(nil, "service", "uninstall")
	if code != 0 || !strings.Contains(out, "removed  ~/.config/systemd/user/bindery.service") || !strings.Contains(out, "rm ~/.local/bin/bindery") {
		t.Errorf("service uninstall: exit %d\n%s%s", code, out, serr)
	}
	checkWidth(t, "service uninstall", out)
	if _, err := os.Stat(unitPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit is still there: %v", err)
	}
	if got := s.systemctl("is-active", "bindery.service"); got == "active" {
		t.Errorf("is-active after uninstall: %s", got)
	}
	if _, _, code := s.cli(nil, "status"); code != 3 {
		t.Errorf("status after uninstall: exit %d, want 3", code)
	}
	out, serr, code = s.cli(nil, "service", "status")
	if code != 1 || !strings.Contains(serr, "not installed") {
		t.Errorf("service status after uninstall: exit %d\n%s%s", code, out, serr)
	}
	if out, _, code := s.cli(nil, "service", "uninstall"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("a second uninstall: exit %d\n%s", code, out)
	}
}

// A host with no systemd user instance (a container, a login without
// systemd --user): install says so and names the foreground command, and
// writes nothing.
func TestServiceInstallNoUserSystemd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("systemd is Linux's")
	}
	s := newServiceEnv(t)
	check := func(what string, env []string, want string) {
		t.Helper()
		out, serr, code := s.cli(env, "service", "install")
		if code != 1 || !strings.Contains(serr, want) || !strings.Contains(serr, "  bindery serve") {
			t.Errorf("%s: exit %d\n%s%s", what, code, out, serr)
		}
		checkWidth(t, what, serr)
		for _, p := range []string{".config/systemd/user/bindery.service", ".local/bin/bindery"} {
			if _, err := os.Stat(filepath.Join(s.home, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s was written", what, p)
			}
		}
	}
	if _, err := exec.LookPath("systemctl"); err == nil {
		// No instance listens in this runtime folder.
		check("no user instance", nil, "no systemd user instance answers here")
	}
	empty := t.TempDir()
	check("no systemctl", []string{"PATH=" + empty}, "no systemd here (systemctl not found)")
}

// The launchd agent is a property list macOS reads: checked by a real
// plist parser (Python's plistlib; plutil -lint where it exists), with
// the folders carried through XML escaping, and read back by status.
func TestLaunchdPlist(t *testing.T) {
	spec := serviceSpec{bin: "/Users/a&b/.local/bin/bindery", env: [][2]string{
		{"BINDERY_AGENT_DIR", `/Users/a&b/pi <"agent">`},
		{"BINDERY_STATE_DIR", "/Users/a&b/.local/state/bindery"},
	}}
	text := plistText(spec, "/Users/a&b/Library/Logs/bindery.log")
	if got := plistEnv([]byte(text)); got["BINDERY_AGENT_DIR"] != `/Users/a&b/pi <"agent">` || len(got) != 2 {
		t.Errorf("plistEnv: %v", got)
	}
	path := filepath.Join(t.TempDir(), launchdLabel+".plist")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	checked := false
	if plutil, err := exec.LookPath("plutil"); err == nil {
		if out, err := exec.Command(plutil, "-lint", path).CombinedOutput(); err != nil {
			t.Errorf("plutil -lint: %v\n%s", err, out)
		}
		checked = true
	}
	if py, err := exec.LookPath("python3"); err == nil {
		script := `import json, plistlib, sys
with open(sys.argv[1], "rb") as f:
    print(json.dumps(plistlib.load(f)))`
		out, err := exec.Command(py, "-c", script, path).CombinedOutput()
		if err != nil {
			t.Fatalf("plistlib: %v\n%s", err, out)
		}
		var p struct {
			Label                string
			ProgramArguments     []string
			EnvironmentVariables map[string]string
			RunAtLoad            bool
			KeepAlive            map[string]bool
			StandardErrorPath    string
		}
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if p.Label != launchdLabel || len(p.ProgramArguments) != 2 || p.ProgramArguments[0] != spec.bin || p.ProgramArguments[1] != "serve" ||
			p.EnvironmentVariables["BINDERY_AGENT_DIR"] != spec.env[0][1] || !p.RunAtLoad ||
			p.KeepAlive == nil || p.KeepAlive["SuccessfulExit"] || p.StandardErrorPath != "/Users/a&b/Library/Logs/bindery.log" {
			t.Errorf("the plist as plistlib reads it: %+v", p)
		}
		checked = true
	}
	if !checked {
		t.Skip("neither plutil nor python3 to read the plist with")
	}
}
