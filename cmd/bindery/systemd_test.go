package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The daemon's user unit verifies, and systemd-analyze rates its sandbox
// at an exposure of at most 3 (issue 13: it was 9.6 UNSAFE).
func TestSystemdUnit(t *testing.T) { checkUnit(t, "bindery.service", 3) }

// The proxy's user unit verifies, and its sandbox stays tight for a
// service that needs the network: at most 2.5 (1.5 with systemd 252).
func TestSystemdProxyUnit(t *testing.T) { checkUnit(t, "bindery-proxy.service", 2.5) }

// checkUnit runs systemd-analyze verify and security on systemd/name, the
// binary installed where the unit expects it, in a temporary HOME.
// Skipped where systemd-analyze is not installed.
func checkUnit(t *testing.T, name string, maxExposure float64) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	unit, err := filepath.Abs(filepath.Join("..", "..", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	runtime := filepath.Join(home, "run")
	os.MkdirAll(runtime, 0o700)
	if err := os.MkdirAll(filepath.Join(home, ".local", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(buildBindery(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".local", "bin", "bindery"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command(sa, args...)
		cmd.Env = []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + runtime, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("--user", "verify", unit); out != "" {
		t.Errorf("verify: %s", out)
	}
	out := run("security", "--offline=true", "--user", unit)
	m := regexp.MustCompile(`Overall exposure level for ` + regexp.QuoteMeta(name) + `: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if x, _ := strconv.ParseFloat(m[1], 64); x > maxExposure {
		t.Errorf("exposure %s > %v:\n%s", m[1], maxExposure, out)
	}
	t.Logf("%s: exposure %s", name, m[1])
}
