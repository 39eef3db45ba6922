package main

// bindery service install|uninstall|status --proxy: bindery proxy as its
// own systemd user unit (systemd/bindery-proxy.service, embedded), beside
// the daemon's: the daemon keeps its sandbox without network, the proxy
// has the network and none of bindery's state. On macOS there is no
// launchd agent for the proxy yet: it says so and names the foreground
// command.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/my-pi/bindery/proxy"
	"github.com/my-pi/bindery/systemd"
)

// proxyUpstreamDefault is the proxy's default upstream, for service's
// usage text.
const proxyUpstreamDefault = proxy.DefaultUpstream

// proxySpec is what the proxy's unit runs: the binary, and the listen
// address and upstream when they are not the defaults.
type proxySpec struct {
	bin      string
	listen   string
	upstream string
}

func (h *serviceHost) proxyUnitPath() string {
	return filepath.Join(filepath.Dir(h.unitPath()), "bindery-proxy.service")
}

// proxyUnitText is systemd/bindery-proxy.service with the binary's path
// and the proxy's settings written in.
func proxyUnitText(s proxySpec) string {
	u := systemd.ProxyUnit
	if i := strings.Index(u, "[Unit]"); i >= 0 {
		u = u[i:]
	}
	env := fmt.Sprintf("Environment=%s\n", systemdQuote("BINDERY_PROXY_LISTEN="+s.listen, false))
	if s.upstream != "" {
		env += fmt.Sprintf("Environment=%s\n", systemdQuote("BINDERY_UPSTREAM="+s.upstream, false))
	}
	u = strings.Replace(u, "ExecStart=%h/.local/bin/bindery proxy\n", "ExecStart="+systemdQuote(s.bin, true)+" proxy\n"+env, 1)
	return "# Written by `bindery service install --proxy`; `bindery service\n" +
		"# uninstall --proxy` removes it. Each option's reason:\n" +
		"# systemd/bindery-proxy.service in bindery's repository.\n" + u
}

func (h *serviceHost) proxySpec(listen, upstream, bin string) (proxySpec, error) {
	s := proxySpec{listen: listen, upstream: upstream}
	if s.listen == "" {
		s.listen = defaultProxyListen
	}
	if err := proxy.Loopback(s.listen); err != nil {
		return s, fmt.Errorf("service install --proxy: %w", err)
	}
	if _, port, _ := net.SplitHostPort(s.listen); port == "0" {
		return s, errors.New("service install --proxy: --listen needs a fixed port: clients are told it once")
	}
	if bin != "" {
		p, err := filepath.Abs(bin)
		if err != nil {
			return s, fmt.Errorf("service install --proxy: --bin: %w", err)
		}
		s.bin = p
	} else {
		s.bin = filepath.Join(h.home, ".local", "bin", "bindery")
	}
	return s, nil
}

func (h *serviceHost) installProxy(s proxySpec, copyBin bool) error {
	if h.goos != "linux" {
		return fmt.Errorf("service install --proxy: bindery installs the proxy as a systemd user unit only; on %s run it from a login item:\n  bindery proxy", h.goos)
	}
	if err := h.systemdReachable(); err != nil {
		return err
	}
	fmt.Fprintln(h.out, "bindery service install --proxy:")
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
	if err := h.writeAndStart("service install --proxy", h.proxyUnitPath(), proxyUnitText(s), "bindery-proxy"); err != nil {
		return err
	}
	// Listening is what a client needs; the daemon is the daemon unit's.
	if err := waitListening(s.listen, 15*time.Second); err != nil {
		return fmt.Errorf("the proxy's unit was installed but nothing listens on %s: %w\n(journalctl --user -u bindery-proxy shows why)", s.listen, err)
	}
	fmt.Fprintf(h.out, "\nbindery proxy listens on %s and will start at every login.\n", s.listen)
	fmt.Fprintf(h.out, "Claude Code, the SDKs: ANTHROPIC_BASE_URL=http://%s\n", s.listen)
	fmt.Fprintf(h.out, "opencode: provider.anthropic.options.baseURL \"http://%s/v1\"\n", s.listen)
	if _, err := os.Stat(h.unitPath()); err != nil {
		fmt.Fprintln(h.out, "The daemon is not installed as a service: until it runs, requests go")
		fmt.Fprintln(h.out, "upstream unchanged. Install it too: bindery service install")
	}
	fmt.Fprintln(h.out, "Undo: bindery service uninstall --proxy")
	return nil
}

// waitListening dials addr until something accepts.
func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *serviceHost) uninstallProxy() error {
	if h.goos != "linux" {
		return fmt.Errorf("service uninstall --proxy: no proxy unit on %s", h.goos)
	}
	if err := h.systemdReachable(); err != nil {
		return err
	}
	path := h.proxyUnitPath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(h.out, "bindery service uninstall --proxy: nothing to do (%s does not exist)\n", h.tilde(path))
		return nil
	}
	fmt.Fprintln(h.out, "bindery service uninstall --proxy:")
	for _, step := range []func() (string, error){
		func() (string, error) {
			args := []string{"--user", "disable", "--now", "bindery-proxy.service"}
			_, err := h.runCmd("systemctl", args...)
			return "systemctl " + strings.Join(args, " "), err
		},
		func() (string, error) { return h.tilde(path), os.Remove(path) },
		func() (string, error) {
			_, err := h.runCmd("systemctl", "--user", "daemon-reload")
			return "systemctl --user daemon-reload", err
		},
	} {
		what, err := step()
		if err != nil {
			return fmt.Errorf("service uninstall --proxy: %w", err)
		}
		verb := "ran"
		if !strings.HasPrefix(what, "systemctl") {
			verb = "removed"
		}
		h.did(verb, what)
	}
	return nil
}

func (h *serviceHost) statusProxy() error {
	if h.goos != "linux" {
		return fmt.Errorf("service status --proxy: no proxy unit on %s", h.goos)
	}
	path := h.proxyUnitPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("not installed (no %s); bindery service install --proxy installs it", h.tilde(path))
	}
	if err != nil {
		return fmt.Errorf("service status --proxy: %w", err)
	}
	if err := h.systemdReachable(); err != nil {
		return err
	}
	env := unitEnv(string(b))
	enabled, _ := h.runCmd("systemctl", "--user", "is-enabled", "bindery-proxy.service")
	active, _ := h.runCmd("systemctl", "--user", "is-active", "bindery-proxy.service")
	listen := env["BINDERY_PROXY_LISTEN"]
	if listen == "" {
		listen = defaultProxyListen
	}
	upstream := env["BINDERY_UPSTREAM"]
	if upstream == "" {
		upstream = proxy.DefaultUpstream + " (the default)"
	}
	fmt.Fprintf(h.out, "service   %s\n", h.tilde(path))
	fmt.Fprintf(h.out, "state     %s, %s\n", strings.TrimSpace(active), strings.TrimSpace(enabled))
	fmt.Fprintf(h.out, "listens   %s\n", listen)
	fmt.Fprintf(h.out, "upstream  %s\n", upstream)
	if err := waitListening(listen, 0); err != nil {
		return fmt.Errorf("nothing listens on %s: %w", listen, err)
	}
	fmt.Fprintf(h.out, "clients   ANTHROPIC_BASE_URL=http://%s\n", listen)
	return nil
}
