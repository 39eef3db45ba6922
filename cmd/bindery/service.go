package main

// bindery service install|uninstall|status: bindery as a per-user service
// that starts at login, the way syncthing or tailscale install themselves:
// a systemd user unit on Linux, a launchd agent on macOS. The unit is the
// repository's own (systemd/bindery.service, embedded), with the binary's
// path and the pi folders the user's shell resolves written into it: a
// user service does not inherit the shell's PI_CODING_AGENT_DIR, so
// without them it would watch ~/.pi/agent and say nothing about it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon"
	"github.com/my-pi/bindery/systemd"
)

const serviceUsage = `Usage: bindery service install|uninstall|status [flags]

Runs bindery at every login: a systemd user unit on Linux
(~/.config/systemd/user/bindery.service), a launchd agent on macOS
(~/Library/LaunchAgents/` + launchdLabel + `.plist).

  install    copy this binary to ~/.local/bin/bindery (unless --bin), write
             the service with the pi folders your shell uses, start it
  uninstall  stop the service and remove its file (the database stays)
  status     whether it is installed, enabled and running, and what it reads
  --proxy    each of them for bindery proxy's own unit (Linux)

Flags of install (default: what bindery serve would read in this shell):
`

// launchdLabel names the launchd agent (reverse DNS of the module path).
const launchdLabel = "io.github.my-pi.bindery"

// serviceHost is where the service is installed: the environment, the home
// folder, the operating system and how commands are run. Tests give it a
// temporary HOME and a real systemd user instance.
type serviceHost struct {
	getenv func(string) string
	home   string
	goos   string
	out    io.Writer
}

// serviceSpec is what the installed service runs: the binary and the
// environment that makes it read the user's pi folders.
type serviceSpec struct {
	bin   string
	env   [][2]string // name, value; in this order
	roots []string    // the session folders bindery will follow, for the summary
}

func serviceCmd(args []string, stdout, stderr io.Writer) error {
	var sub string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	cmd := newCommand("service "+sub, "", stdout, stderr)
	cmd.synopsis = "" // the whole usage is serviceUsage
	var agentDir, bin string
	var sessionDirs []string
	cmd.fs.StringVar(&agentDir, "agent-dir", "", "pi's agent folder `DIR` (default: $PI_CODING_AGENT_DIR,\nelse ~/.pi/agent)")
	cmd.fs.Func("session-dir", "also follow this flat folder `DIR` of session files\n(pi --session-dir); repeatable", func(s string) error {
		sessionDirs = append(sessionDirs, s)
		return nil
	})
	cmd.fs.StringVar(&bin, "bin", "", "run this binary `FILE` where it is instead of copying\nthis one to ~/.local/bin/bindery")
	var proxyUnit bool
	var listen, upstream string
	cmd.fs.BoolVar(&proxyUnit, "proxy", false, "bindery proxy's unit (bindery-proxy.service) instead of\nthe daemon's (Linux)")
	cmd.fs.StringVar(&listen, "listen", "", "with --proxy: the address `ADDR` it listens on, loopback\nonly (default "+defaultProxyListen+")")
	cmd.fs.StringVar(&upstream, "upstream", "", "with --proxy: the Messages API `URL` it forwards to\n(default "+proxyUpstreamDefault+")")
	usage := func(w io.Writer) {
		fmt.Fprint(w, serviceUsage)
		writeFlags(w, cmd.fs)
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			usage(stdout)
			return errHelp
		}
	}
	if sub == "" || sub == "help" {
		if sub == "help" {
			usage(stdout)
			return errHelp
		}
		fmt.Fprintln(stderr, "bindery service: missing install, uninstall or status")
		usage(stderr)
		return errUsage
	}
	if err := cmd.fs.Parse(args); err != nil || cmd.fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q", cmd.fs.Arg(0))
		}
		fmt.Fprintf(stderr, "bindery service %s: %v\n", sub, err)
		usage(stderr)
		return errUsage
	}
	h := &serviceHost{getenv: os.Getenv, goos: runtime.GOOS, out: stdout}
	h.home = h.getenv("HOME")
	if h.home == "" {
		var err error
		if h.home, err = os.UserHomeDir(); err != nil {
			return fmt.Errorf("service: %w", err)
		}
	}
	if !proxyUnit && (listen != "" || upstream != "") {
		fmt.Fprintf(stderr, "bindery service %s: --listen and --upstream go with --proxy\n", sub)
		return errUsage
	}
	if proxyUnit {
		switch sub {
		case "install":
			ps, err := h.proxySpec(listen, upstream, bin)
			if err != nil {
				return err
			}
			return h.installProxy(ps, bin == "")
		case "uninstall":
			return h.uninstallProxy()
		case "status":
			return h.statusProxy()
		}
	}
	switch sub {
	case "install":
		spec, err := h.spec(agentDir, sessionDirs, bin)
		if err != nil {
			return err
		}
		return h.install(spec, bin == "")
	case "uninstall":
		return h.uninstall()
	case "status":
		return h.status()
	}
	fmt.Fprintf(stderr, "bindery service: unknown subcommand %q\n", sub)
	usage(stderr)
	return errUsage
}

// spec resolves what the service will run: the folders as `bindery serve`
// would resolve them in this shell (flags first), and the binary.
func (h *serviceHost) spec(agentDir string, sessionDirs []string, bin string) (serviceSpec, error) {
	cfg, err := daemon.DefaultConfig(h.getenv)
	if err != nil {
		return serviceSpec{}, fmt.Errorf("service install: %w", err)
	}
	if agentDir != "" {
		cfg.AgentDir = agentDir
	}
	cfg.SessionDirs = append(cfg.SessionDirs, sessionDirs...)
	var s serviceSpec
	abs := func(p string) (string, error) {
		if p == "~" || strings.HasPrefix(p, "~/") {
			p = filepath.Join(h.home, strings.TrimPrefix(p, "~"))
		}
		return filepath.Abs(p)
	}
	if cfg.AgentDir, err = abs(cfg.AgentDir); err != nil {
		return s, fmt.Errorf("service install: agent folder: %w", err)
	}
	s.env = append(s.env, [2]string{"BINDERY_AGENT_DIR", cfg.AgentDir})
	if d := h.getenv("PI_CODING_AGENT_SESSION_DIR"); d != "" {
		if d, err = abs(d); err != nil {
			return s, fmt.Errorf("service install: PI_CODING_AGENT_SESSION_DIR: %w", err)
		}
		s.env = append(s.env, [2]string{"PI_CODING_AGENT_SESSION_DIR", d})
	}
	if len(cfg.SessionDirs) > 0 {
		dirs := make([]string, len(cfg.SessionDirs))
		for i, d := range cfg.SessionDirs {
			if dirs[i], err = abs(d); err != nil {
				return s, fmt.Errorf("service install: session folder: %w", err)
			}
		}
		cfg.SessionDirs = dirs
		s.env = append(s.env, [2]string{"BINDERY_SESSION_DIRS", strings.Join(dirs, string(filepath.ListSeparator))})
	}
	if h.goos == "darwin" {
		// launchd passes no XDG variables: pin the state folder (and with it
		// the socket) to the one the CLI finds from this shell.
		state, err := api.DefaultStateDir(h.getenv)
		if err != nil {
			return s, fmt.Errorf("service install: %w", err)
		}
		if state, err = abs(state); err != nil {
			return s, fmt.Errorf("service install: state folder: %w", err)
		}
		s.env = append(s.env, [2]string{"BINDERY_STATE_DIR", state})
	}
	for _, r := range cfg.SessionRoots() {
		s.roots = append(s.roots, r.Dir)
	}
	if bin != "" {
		if s.bin, err = abs(bin); err != nil {
			return s, fmt.Errorf("service install: --bin: %w", err)
		}
		if fi, err := os.Stat(s.bin); err != nil {
			return s, fmt.Errorf("service install: --bin: %w", err)
		} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return s, fmt.Errorf("service install: --bin %s is not an executable file", s.bin)
		}
	} else {
		s.bin = filepath.Join(h.home, ".local", "bin", "bindery")
	}
	return s, nil
}

// tilde writes a path under home as ~/..., which keeps the summary within
// 80 columns and is how the README names the same files.
func (h *serviceHost) tilde(p string) string {
	if h.home != "" && h.home != "/" {
		if p == h.home {
			return "~"
		}
		if rest, ok := strings.CutPrefix(p, h.home+"/"); ok {
			return "~/" + rest
		}
	}
	return p
}

// did prints one step the installer took, as a line the user can repeat or
// undo by hand.
func (h *serviceHost) did(what, detail string) {
	fmt.Fprintf(h.out, "  %-8s %s\n", what, detail)
}

// runCmd runs a service manager command; its output goes into the error.
func (h *serviceHost) runCmd(name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	out, err := c.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return string(out), fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), msg)
	}
	return string(out), nil
}

// copyBinary puts this executable at dst (atomically: a running service
// keeps its old file until it restarts), unless it is dst already.
func copyBinary(dst string) (copied bool, src string, err error) {
	if src, err = os.Executable(); err != nil {
		return false, "", fmt.Errorf("service install: this binary: %w", err)
	}
	if s, err := filepath.EvalSymlinks(src); err == nil {
		src = s
	}
	if d, err := filepath.EvalSymlinks(dst); err == nil && d == src {
		return false, src, nil
	}
	in, err := os.Open(src)
	if err != nil {
		return false, src, fmt.Errorf("service install: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, src, fmt.Errorf("service install: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".bindery-*")
	if err != nil {
		return false, src, fmt.Errorf("service install: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return false, src, fmt.Errorf("service install: copy to %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return false, src, fmt.Errorf("service install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, src, fmt.Errorf("service install: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return false, src, fmt.Errorf("service install: %w", err)
	}
	return true, src, nil
}

// writeFileAtomic writes a service file whole or not at all.
func writeFileAtomic(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bindery-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (h *serviceHost) install(s serviceSpec, copyBin bool) error {
	switch h.goos {
	case "linux":
		if err := h.systemdReachable(); err != nil {
			return err
		}
	case "darwin":
	default:
		return fmt.Errorf("service install: no service manager bindery knows on %s; run it in the foreground: bindery serve", h.goos)
	}
	fmt.Fprintln(h.out, "bindery service install:")
	if copyBin {
		copied, src, err := copyBinary(s.bin)
		if err != nil {
			return err
		}
		if copied {
			h.did("copied", h.tilde(src))
			h.did("", "to "+h.tilde(s.bin))
		}
	}
	var err error
	if h.goos == "darwin" {
		err = h.installLaunchd(s)
	} else {
		err = h.installSystemd(s)
	}
	if err != nil {
		return err
	}
	// Wait for the daemon to answer: a unit that starts and then fails on
	// its sandbox should be reported here, not found out later.
	hl, err := h.waitHealthy(15 * time.Second)
	if err != nil {
		return fmt.Errorf("the service was installed but bindery does not answer: %w\n(%s shows why)", err, h.logsHint())
	}
	fmt.Fprintf(h.out, "\nbindery runs (pid %d) and will start at every login.\n", hl.PID)
	fmt.Fprintln(h.out, "It reads pi's sessions from:")
	for _, r := range s.roots {
		fmt.Fprintln(h.out, "  "+h.tilde(r))
	}
	if h.goos == "linux" {
		for _, r := range s.roots {
			if r == "/tmp" || r == "/var/tmp" || strings.HasPrefix(r, "/tmp/") || strings.HasPrefix(r, "/var/tmp/") {
				// The unit's PrivateTmp=yes gives the service a /tmp of its
				// own: it would wait forever for a folder it cannot see.
				fmt.Fprintf(h.out, "Note: the unit has a private /tmp, so it cannot see %s;\n", r)
				fmt.Fprintln(h.out, "keep pi's sessions elsewhere, or add PrivateTmp=no in a drop-in.")
			}
		}
		fmt.Fprintln(h.out, "To keep it running while you are logged out: loginctl enable-linger")
	}
	fmt.Fprintln(h.out, "Check it: bindery status.  Undo: bindery service uninstall")
	return nil
}

// waitHealthy asks the daemon on the socket the CLI uses until it answers.
func (h *serviceHost) waitHealthy(limit time.Duration) (api.Health, error) {
	sock, err := api.DefaultSocket(h.getenv)
	if err != nil {
		return api.Health{}, err
	}
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hl, err := api.NewClient(sock).Health(ctx)
		cancel()
		if err == nil {
			return hl, nil
		}
		if time.Now().After(deadline) {
			return api.Health{}, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *serviceHost) logsHint() string {
	if h.goos == "darwin" {
		return h.tilde(h.launchdLog())
	}
	return "journalctl --user -u bindery"
}

func (h *serviceHost) uninstall() error {
	switch h.goos {
	case "linux":
		if err := h.systemdReachable(); err != nil {
			return err
		}
		return h.uninstallSystemd()
	case "darwin":
		return h.uninstallLaunchd()
	}
	return fmt.Errorf("service uninstall: no service manager bindery knows on %s", h.goos)
}

// status prints what is installed and whether it answers; exit 3 when it
// is installed but not running, 1 when it is not installed.
func (h *serviceHost) status() error {
	var path, state string
	var env map[string]string
	var err error
	switch h.goos {
	case "linux":
		path, state, env, err = h.statusSystemd()
	case "darwin":
		path, state, env, err = h.statusLaunchd()
	default:
		return fmt.Errorf("service status: no service manager bindery knows on %s", h.goos)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(h.out, "service   %s\n", h.tilde(path))
	fmt.Fprintf(h.out, "state     %s\n", state)
	agent := env["BINDERY_AGENT_DIR"]
	if agent == "" {
		agent = filepath.Join(h.home, ".pi", "agent") + " (the default)"
	}
	fmt.Fprintf(h.out, "agent dir %s\n", h.tilde(agent))
	// A shell that now points pi elsewhere than the service reads is the
	// quiet failure this command exists to catch.
	if cfg, err := daemon.DefaultConfig(h.getenv); err == nil && env["BINDERY_AGENT_DIR"] != "" {
		if mine, err := filepath.Abs(cfg.AgentDir); err == nil && mine != env["BINDERY_AGENT_DIR"] {
			fmt.Fprintf(h.out, "\nThis shell's pi folder is %s, not the service's.\n", h.tilde(mine))
			fmt.Fprintln(h.out, "Run bindery service install again from it to follow it.")
		}
	}
	sock, err := api.DefaultSocket(h.getenv)
	if err != nil {
		return err
	}
	ctx, cancel := callCtx()
	defer cancel()
	hl, err := api.NewClient(sock).Health(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(h.out, "daemon    answers (pid %d)\nsocket    %s\n", hl.PID, h.tilde(sock))
	return nil
}

// --- systemd (Linux) ---

func (h *serviceHost) unitPath() string {
	cfg := h.getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		cfg = filepath.Join(h.home, ".config")
	}
	return filepath.Join(cfg, "systemd", "user", "bindery.service")
}

// systemdReachable checks that a systemd user instance answers before
// anything is written, and otherwise says what to do instead.
func (h *serviceHost) systemdReachable() error {
	const instead = "Without one bindery cannot install itself as a service. Run it in the\n" +
		"foreground instead, or from your login script:\n  bindery serve"
	if _, err := exec.LookPath("systemctl"); err != nil {
		return errors.New("no systemd here (systemctl not found).\n" + instead)
	}
	c := exec.Command("systemctl", "--user", "show", "--property=Version")
	if out, err := c.CombinedOutput(); err != nil {
		why := strings.TrimSpace(string(out))
		if why == "" {
			why = err.Error()
		}
		return fmt.Errorf("no systemd user instance answers here:\n  %s\n%s", why, instead)
	}
	return nil
}

// systemdQuote quotes one word for a unit file: systemd expands % (all
// settings) and $ (ExecStart) and splits on spaces.
func systemdQuote(s string, dollar bool) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s)
	if dollar {
		s = strings.ReplaceAll(s, "$", "$$")
	}
	return `"` + s + `"`
}

// unitText is systemd/bindery.service with the binary's path and the
// user's folders written in; the shipped header (how to install it by
// hand) gives way to one saying who wrote the file.
func unitText(s serviceSpec) string {
	u := systemd.Unit
	if i := strings.Index(u, "[Unit]"); i >= 0 {
		u = u[i:]
	}
	var env strings.Builder
	for _, kv := range s.env {
		fmt.Fprintf(&env, "Environment=%s\n", systemdQuote(kv[0]+"="+kv[1], false))
	}
	u = strings.Replace(u, "ExecStart=%h/.local/bin/bindery serve\n",
		"ExecStart="+systemdQuote(s.bin, true)+" serve\n"+env.String(), 1)
	return "# Written by `bindery service install`; `bindery service uninstall`\n" +
		"# removes it. Run the install again after changing where pi keeps its\n" +
		"# sessions. Each option's reason: systemd/bindery.service in bindery's\n" +
		"# repository.\n" + u
}

func (h *serviceHost) installSystemd(s serviceSpec) error {
	return h.writeAndStart("service install", h.unitPath(), unitText(s), "bindery")
}

// writeAndStart writes a user unit and enables and (re)starts it: restart,
// not start, so a unit already running picks up the new binary and
// settings. what names the command in its errors.
func (h *serviceHost) writeAndStart(what, path, text, unit string) error {
	if err := writeFileAtomic(path, text); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h.did("wrote", h.tilde(path))
	for _, args := range [][]string{
		{"--user", "daemon-reload"},
		{"--user", "enable", unit + ".service"},
		{"--user", "restart", unit + ".service"},
	} {
		if _, err := h.runCmd("systemctl", args...); err != nil {
			return fmt.Errorf("%s: %w\n(journalctl --user -u %s shows why)", what, err, unit)
		}
		h.did("ran", "systemctl "+strings.Join(args, " "))
	}
	return nil
}

func (h *serviceHost) uninstallSystemd() error {
	path := h.unitPath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(h.out, "bindery service uninstall: nothing to do (%s does not exist)\n", h.tilde(path))
		return nil
	}
	fmt.Fprintln(h.out, "bindery service uninstall:")
	args := []string{"--user", "disable", "--now", "bindery.service"}
	if _, err := h.runCmd("systemctl", args...); err != nil {
		return fmt.Errorf("service uninstall: %w", err)
	}
	h.did("ran", "systemctl "+strings.Join(args, " "))
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("service uninstall: %w", err)
	}
	h.did("removed", h.tilde(path))
	if _, err := h.runCmd("systemctl", "--user", "daemon-reload"); err != nil {
		return fmt.Errorf("service uninstall: %w", err)
	}
	h.did("ran", "systemctl --user daemon-reload")
	h.leftBehind()
	return nil
}

// leftBehind names what uninstall keeps, as a package manager would.
func (h *serviceHost) leftBehind() {
	state, _ := api.DefaultStateDir(h.getenv)
	fmt.Fprintln(h.out, "Kept: the database and the binary. To remove them too:")
	if h.goos == "linux" {
		// A user unit's StateDirectory= is ~/.local/state on newer
		// systemd, ~/.config on older (252, Debian 12's): name both.
		fmt.Fprintf(h.out, "  rm -r %s %s\n", h.tilde(state), h.tilde(filepath.Join(h.home, ".config", "bindery")))
	} else {
		fmt.Fprintf(h.out, "  rm -r %s\n", h.tilde(state))
	}
	fmt.Fprintf(h.out, "  rm %s\n", h.tilde(filepath.Join(h.home, ".local", "bin", "bindery")))
}

func (h *serviceHost) statusSystemd() (path, state string, env map[string]string, err error) {
	path = h.unitPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", nil, fmt.Errorf("not installed (no %s); bindery service install installs it", h.tilde(path))
	}
	if err != nil {
		return "", "", nil, fmt.Errorf("service status: %w", err)
	}
	env = unitEnv(string(b))
	if err := h.systemdReachable(); err != nil {
		return "", "", nil, err
	}
	enabled, _ := h.runCmd("systemctl", "--user", "is-enabled", "bindery.service")
	active, _ := h.runCmd("systemctl", "--user", "is-active", "bindery.service")
	state = strings.TrimSpace(active) + ", " + strings.TrimSpace(enabled)
	return path, state, env, nil
}

// unitEnv reads the Environment= lines the installer wrote.
func unitEnv(unit string) map[string]string {
	env := map[string]string{}
	for _, l := range strings.Split(unit, "\n") {
		v, ok := strings.CutPrefix(l, "Environment=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = strings.ReplaceAll(u, "%%", "%")
		}
		if k, val, ok := strings.Cut(v, "="); ok {
			env[k] = val
		}
	}
	return env
}
