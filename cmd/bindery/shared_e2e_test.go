package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db/pgtest"
)

// sharedPassword rides in the tests' DSN (the cluster trusts local
// connections, so any password works): it must appear nowhere bindery
// writes or shows.
const sharedPassword = "pw-NEVER-SHOWN-4f2a"

// machineSession is one pi session as a machine's bindery sees it.
type machineSession struct {
	d  *bindDaemon
	ps *piSession
}

// piRound is one pi turn on a machine: the user entry, the compile at it,
// the provider's (judge's) answer written to the session file as pi
// writes it, the accept; then the daemon has ingested both entries.
func piRound(t *testing.T, h *host, m machineSession, sid string, n int, parent string) (*api.CompileAnswer, string) {
	t.Helper()
	uid, aid := fmt.Sprintf("u%d", n), fmt.Sprintf("a%d", n)
	text := fmt.Sprintf("turn %d", n)
	m.ps.user(uid, parent, text)
	h.messages = append(h.messages, map[string]any{"role": "user", "content": text})
	waitEntries(t, m.d, sid, 2*n-1)
	ans := h.roundTrip(m.d, api.CompileCall{Conversation: sid, Branch: uid, SessionFile: m.ps.path}, func(reply json.RawMessage) {
		m.ps.assistant(aid, uid, reply, h.model)
	})
	waitEntries(t, m.d, sid, 2*n)
	return ans, aid
}

func waitEntries(t *testing.T, d *bindDaemon, sid string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d entries of %s ingested", n, sid), func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries >= n, sessionState(s, err)
	})
}

// waitShipped waits until the machine's outbox is empty.
func waitShipped(t *testing.T, d *bindDaemon) {
	t.Helper()
	waitFor(t, "the outbox shipped", func() (bool, string) {
		h, err := d.client.Health(ctxT(t))
		if err != nil || h.Shared == nil {
			return false, fmt.Sprint(err)
		}
		return h.Shared.Outbox == 0, fmt.Sprintf("%d stamps to ship", h.Shared.Outbox)
	})
}

// copySession puts the session file on another machine, as a sync or a
// copy does.
func copySession(t *testing.T, from *piSession, agent string) *piSession {
	t.Helper()
	b, err := os.ReadFile(from.path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(agent, "sessions", "--tmp-project--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &piSession{t: t, id: from.id, path: filepath.Join(dir, filepath.Base(from.path)), n: from.n}
	if err := os.WriteFile(p.path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSharedTierSecondMachine: a pi session continued on a second machine
// (its own daemon and SQLite, the same PostgreSQL) keeps every valid block:
// the first machine shipped the stamps its replies minted, and the second
// reads them through at its first compile. A machine that is not joined
// strips them all (no stamp: safe, and every block lost). A machine whose
// server is down keeps working alone, and its outbox ships once the server
// is back; a graceful stop ships what is left. The DSN's password is
// nowhere in logs, status or the state folder.
func TestSharedTierSecondMachine(t *testing.T) {
	dsn := pgtest.Database(t) + " password=" + sharedPassword
	laptop := newDaemon(t, "--shared", dsn, "--machine", "laptop")
	devbox := newDaemon(t, "--shared", dsn, "--machine", "devbox")
	alone := newDaemon(t)
	h := newHost(t)
	const sid = "0193e6c4-5a7e-7000-8000-000000000029"
	a := machineSession{laptop, newPiSession(t, laptop.agent, sid)}
	parent := ""
	for n := 1; n <= 3; n++ {
		ans, aid := piRound(t, h, a, sid, n, parent)
		if ans.ThinkingStripped != 0 {
			t.Fatalf("laptop turn %d stripped %d", n, ans.ThinkingStripped)
		}
		parent = aid
	}
	waitShipped(t, laptop)

	// The same history on a machine that is not joined: no stamps. Its
	// first compile is before the conversation engages there (nothing is
	// stripped before bindery has seen a reply), its next strips the three
	// unvouched blocks for good.
	c := machineSession{alone, copySession(t, a.ps, alone.agent)}
	hc := *h
	hc.messages = append([]any(nil), h.messages...)
	_, cparent := piRound(t, &hc, c, sid, 4, parent)
	ans, _ := piRound(t, &hc, c, sid, 5, cparent)
	if ans.ThinkingStripped != 3 || ans.ThinkingKept != 1 {
		t.Fatalf("a machine alone: stripped %d kept %d, want 3 and 1", ans.ThinkingStripped, ans.ThinkingKept)
	}

	// The devbox, joined: every block is kept, past its engagement too.
	b := machineSession{devbox, copySession(t, a.ps, devbox.agent)}
	kept := func(ans *api.CompileAnswer, want int, when string) {
		t.Helper()
		if ans.ThinkingStripped != 0 || ans.ThinkingKept != want {
			var why []string
			for _, st := range ans.Strips {
				why = append(why, st.Path+" "+st.Reason)
			}
			t.Fatalf("%s: stripped %d kept %d, want 0 and %d: %v", when, ans.ThinkingStripped, ans.ThinkingKept, want, why)
		}
	}
	ans, parent = piRound(t, h, b, sid, 4, parent)
	kept(ans, 3, "the second machine's first turn")
	ans, parent = piRound(t, h, b, sid, 5, parent)
	kept(ans, 4, "the second machine's second turn")

	// The server goes away: the devbox works alone (its next turn keeps
	// what it holds), and ships when the server is back.
	cluster := pgtest.Cluster(t)
	cluster.Stop(t)
	ans, parent = piRound(t, h, b, sid, 6, parent)
	kept(ans, 5, "with the server down")
	if hl, err := devbox.client.Health(ctxT(t)); err != nil || hl.Shared == nil || hl.Shared.Outbox == 0 {
		t.Fatalf("with the server down the outbox holds nothing: %+v %v", hl.Shared, err)
	}
	cluster.Start(t)
	waitShipped(t, devbox)
	// One more turn on the devbox, stopped gracefully at once: the stop
	// ships it, and the laptop continues with every block.
	_, parent = piRound(t, h, b, sid, 7, parent)
	devbox.stop(true)
	a.ps = copySession(t, b.ps, laptop.agent)
	ans, _ = piRound(t, h, a, sid, 8, parent)
	kept(ans, 7, "back on the laptop")

	// The password: not in any log, status or state file.
	out, _ := exec1(t, laptop, "status")
	if !strings.Contains(out, "shared") || !strings.Contains(out, "as laptop") {
		t.Errorf("status does not show the shared tier:\n%s", out)
	}
	// The laptop's one read-through, at turn 8, found the devbox's four
	// replies' stamps (turns 4 to 7).
	if !regexp.MustCompile(`read-through +1 compile, 4 stamps found, 0 missed, \d+ms waited`).MatchString(out) {
		t.Errorf("status does not show the laptop's read-through:\n%s", out)
	}
	for _, d := range []*bindDaemon{laptop, devbox} {
		filepath.Walk(d.dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), sharedPassword) {
					t.Errorf("%s holds the DSN's password", p)
				}
			}
			return nil
		})
	}
	if strings.Contains(out, sharedPassword) {
		t.Errorf("status shows the DSN's password")
	}
}

// exec1 runs a bindery command against d's socket.
func exec1(t *testing.T, d *bindDaemon, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(d.bin, append(args, "--socket", d.sock)...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
