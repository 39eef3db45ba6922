package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fresh install, before pi has ever run: no sessions folder. status is
// healthy (exit 0) and says it waits for pi; once pi makes the folder the
// line goes. A real problem (a FIFO) still exits 4, its count in the
// singular (issue 32: "1 problems", "1 things").
func TestFirstRunWaitsForPi(t *testing.T) {
	e := newE2E(t)
	if err := os.RemoveAll(filepath.Join(e.agent, "sessions")); err != nil {
		t.Fatal(err)
	}
	e.serve()
	out, serr, code := e.run("status")
	if code != 0 || !strings.Contains(out, "waiting for pi") || !strings.Contains(out, filepath.Join(e.agent, "sessions")) || strings.Contains(out, "degraded") {
		t.Errorf("status before pi's first session: exit %d\n%s%s", code, out, serr)
	}
	if _, _, code := e.run("status", "--json"); code != 0 {
		t.Errorf("status --json before pi's first session: exit %d", code)
	}

	if err := os.MkdirAll(e.sessions, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the folder to be followed", func() (bool, string) {
		out, _, code := e.run("status")
		return code == 0 && !strings.Contains(out, "waiting for pi"), out
	})

	fifo := filepath.Join(e.sessions, "2026-11-29T09-00-00-000Z_0193e6c4-ffff-7000-8000-00000000000f.jsonl")
	if err := mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the FIFO to be listed", func() (bool, string) {
		_, _, code := e.run("status")
		return code == 4, ""
	})
	out, serr, _ = e.run("status")
	if !strings.Contains(out, "degraded: 1 problem (below)") || !strings.Contains(serr, "1 thing is not followed") {
		t.Errorf("status with one FIFO:\n%s%s", out, serr)
	}
}
