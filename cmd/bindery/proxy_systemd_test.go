package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The proxy's user unit verifies, and its sandbox stays tight for a
// service that needs the network: systemd-analyze rates its exposure at
// most 2.5 (1.5 with systemd 252). Skipped where systemd-analyze is not installed.
func TestSystemdProxyUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	unit, err := filepath.Abs("../../systemd/bindery-proxy.service")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	runtime := filepath.Join(home, "run")
	os.MkdirAll(runtime, 0o700)
	os.MkdirAll(filepath.Join(home, ".local", "bin"), 0o755)
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
	m := regexp.MustCompile(`Overall exposure level for bindery-proxy.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if x, _ := strconv.ParseFloat(m[1], 64); x > 2.5 {
		t.Errorf("exposure %s > 2.5:\n%s", m[1], out)
	}
	t.Logf("exposure %s", m[1])
}
