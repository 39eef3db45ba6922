package main

// The macOS half of bindery service: a launchd agent in
// ~/Library/LaunchAgents, loaded into the user's GUI domain so it starts
// at every login, kept alive when it exits with an error.

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func (h *serviceHost) plistPath() string {
	return filepath.Join(h.home, "Library", "LaunchAgents", launchdLabel+".plist")
}

func (h *serviceHost) launchdLog() string {
	return filepath.Join(h.home, "Library", "Logs", "bindery.log")
}

// launchdDomain is the per-user GUI domain launchctl loads agents into.
func launchdDomain() string { return fmt.Sprintf("gui/%d", os.Getuid()) }

// xmlText escapes s for a plist <string>.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// plistText is the launchd agent. KeepAlive restarts bindery when it
// exits with an error (not after a clean stop), as Restart=on-failure does
// in the systemd unit; ProcessType Background lets macOS schedule it as a
// daemon that serves others; the log is where `serve` writes its slog.
func plistText(s serviceSpec, logPath string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by bindery service install; bindery service uninstall
     removes it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>` + launchdLabel + `</string>
	<key>ProgramArguments</key>
	<array>
		<string>` + xmlText(s.bin) + `</string>
		<string>serve</string>
	</array>
	<key>EnvironmentVariables</key>
	<dict>
`)
	for _, kv := range s.env {
		fmt.Fprintf(&b, "\t\t<key>%s</key>\n\t\t<string>%s</string>\n", xmlText(kv[0]), xmlText(kv[1]))
	}
	b.WriteString(`	</dict>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>2</integer>
	<key>ProcessType</key>
	<string>Background</string>
	<key>StandardErrorPath</key>
	<string>` + xmlText(logPath) + `</string>
	<key>StandardOutPath</key>
	<string>` + xmlText(logPath) + `</string>
</dict>
</plist>
`)
	return b.String()
}

func (h *serviceHost) installLaunchd(s serviceSpec) error {
	path := h.plistPath()
	if err := os.MkdirAll(filepath.Dir(h.launchdLog()), 0o755); err != nil {
		return fmt.Errorf("service install: %w", err)
	}
	if err := writeFileAtomic(path, plistText(s, h.launchdLog())); err != nil {
		return fmt.Errorf("service install: %w", err)
	}
	h.did("wrote", h.tilde(path))
	target := launchdDomain() + "/" + launchdLabel
	// bootout first: bootstrap refuses an agent already loaded, and a
	// reinstall must pick up the new binary and folders. Not loaded is fine.
	if _, err := h.runCmd("launchctl", "bootout", target); err == nil {
		h.did("ran", "launchctl bootout "+target)
	}
	if _, err := h.runCmd("launchctl", "bootstrap", launchdDomain(), path); err != nil {
		return fmt.Errorf("service install: %w", err)
	}
	h.did("ran", "launchctl bootstrap "+launchdDomain()+" "+h.tilde(path))
	return nil
}

func (h *serviceHost) uninstallLaunchd() error {
	path := h.plistPath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(h.out, "bindery service uninstall: nothing to do (%s does not exist)\n", h.tilde(path))
		return nil
	}
	fmt.Fprintln(h.out, "bindery service uninstall:")
	target := launchdDomain() + "/" + launchdLabel
	if _, err := h.runCmd("launchctl", "bootout", target); err == nil {
		h.did("ran", "launchctl bootout "+target)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("service uninstall: %w", err)
	}
	h.did("removed", h.tilde(path))
	h.leftBehind()
	return nil
}

func (h *serviceHost) statusLaunchd() (path, state string, env map[string]string, err error) {
	path = h.plistPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", nil, fmt.Errorf("not installed (no %s); bindery service install installs it", h.tilde(path))
	}
	if err != nil {
		return "", "", nil, fmt.Errorf("service status: %w", err)
	}
	env = plistEnv(b)
	state = "loaded"
	if _, err := h.runCmd("launchctl", "print", launchdDomain()+"/"+launchdLabel); err != nil {
		state = "not loaded (bindery service install loads it)"
	}
	return path, state, env, nil
}

// plistEnv reads the EnvironmentVariables the installer wrote: in a
// plist dict, each <key> is followed by its value.
func plistEnv(b []byte) map[string]string {
	type node struct {
		XMLName xml.Name
		Text    string `xml:",chardata"`
		Items   []node `xml:",any"`
	}
	var p struct {
		Dict node `xml:"dict"`
	}
	env := map[string]string{}
	if xml.Unmarshal(b, &p) != nil {
		return env
	}
	top := p.Dict.Items
	for i := 0; i+1 < len(top); i += 2 {
		if top[i].Text != "EnvironmentVariables" {
			continue
		}
		vars := top[i+1].Items
		for j := 0; j+1 < len(vars); j += 2 {
			env[vars[j].Text] = vars[j+1].Text
		}
	}
	return env
}
