package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The user unit verifies, and systemd-analyze rates its sandbox at an
// exposure of at most 3 (issue 13: it was 9.6 UNSAFE). Skipped where
// systemd-analyze is not installed.
func TestSystemdUnit(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	unit, err := filepath.Abs("../../systemd/bindery.service")
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
	m := regexp.MustCompile(`Overall exposure level for bindery.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if x, _ := strconv.ParseFloat(m[1], 64); x > 3 {
		t.Errorf("exposure %s > 3:\n%s", m[1], out)
	}
}
