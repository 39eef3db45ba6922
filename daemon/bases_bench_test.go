package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// growingConversation is a host's long conversation compiled by reference
// turn after turn, as the pi extension does: each turn sends only the
// messages after those it shares with its last compile, then accepts the
// reply (durable, fsynced).
type growingConversation struct {
	e        *bindingEnv
	conv     string
	msgs     []json.RawMessage
	last     string
	lastN    int
	turns    int
	bytes    int           // the whole request's, last turn
	wall     time.Duration // in Compile and Accept alone
	cpu      time.Duration // the process's CPU during them
	measured int

	// the host's running digest of msgs[:hashed] and their bytes: the
	// harness itself must not rebuild the history each turn, or its
	// garbage is collected during (and counted in) the daemon's turn
	hash   hash.Hash
	hashed int
	size   int

	// pi, when set, makes the conversation a pi session: before each
	// turn its new messages are ingested as the session file's entries
	// (one per message, each the child of the one before), and the
	// compile names the last as its leaf, as the pi extension does.
	pi *piSession
}

// piSession is the session file a pi conversation's messages are written
// to, as far as ingested.
type piSession struct {
	path     string
	ingested int // messages written as entries
	leaf     string
}

// ingest writes g's messages not yet in the session file as its entries.
func (s *piSession) ingest(tb testing.TB, g *growingConversation) {
	var es []db.Entry
	for i := s.ingested; i < len(g.msgs); i++ {
		var m struct{ Role string }
		if err := json.Unmarshal(g.msgs[i], &m); err != nil {
			tb.Fatal(err)
		}
		id := fmt.Sprintf("%s-e%d", g.conv, i)
		es = append(es, db.Entry{Line: i + 2, Offset: int64(1000 * (i + 2)), Length: 1000, Type: "message", Role: m.Role, ID: id, ParentID: s.leaf})
		s.leaf = id
	}
	b := db.Batch{Kind: db.Grew, Path: s.path, Entries: es,
		Cursor: db.Cursor{Path: s.path, Ino: 1, Offset: int64(1000 * (len(g.msgs) + 2)), Lines: len(g.msgs) + 1}}
	if s.ingested == 0 {
		b.Kind, b.Header = db.Found, &db.Header{ID: g.conv, Version: 3, Cwd: "/"}
	}
	if _, err := g.e.db.Ingest(tb.Context(), b); err != nil {
		tb.Fatal(err)
	}
	s.ingested = len(g.msgs)
}

// digestUpTo is digestOf(g.msgs[:n]) for n never below the last call's.
func (g *growingConversation) digestUpTo(n int) string {
	if g.hash == nil {
		g.hash = sha256.New()
	}
	for ; g.hashed < n; g.hashed++ {
		if g.hashed > 0 {
			g.hash.Write([]byte{','})
		}
		g.hash.Write(g.msgs[g.hashed])
	}
	return hex.EncodeToString(g.hash.Sum(nil))
}

func (g *growingConversation) add(m json.RawMessage) {
	g.msgs = append(g.msgs, m)
	g.size += len(m) + 1
}

var turnPad = strings.Repeat("package main\n", 60)

// turn compiles and accepts one more turn: the history, a reply with a
// signed thinking block and a tool result (about 1.5 KB).
func (g *growingConversation) turn(tb testing.TB) {
	call := &api.CompileCall{Conversation: g.conv, Branch: "main", Return: api.ReturnPlan}
	if g.pi != nil {
		g.pi.ingest(tb, g)
		call.Branch = g.pi.leaf
	}
	if g.last != "" && g.lastN > 1 {
		call.Base = &api.CompileBase{CompileID: g.last, Messages: g.lastN - 1, Digest: g.digestUpTo(g.lastN - 1)}
		call.Request = bodyWith(g.msgs[g.lastN-1:])
	} else {
		call.Request = bodyWith(g.msgs)
	}
	sig := fmt.Sprintf("sig-%s-%d-%s", g.conv, g.turns, strings.Repeat("s", 400))
	r := reply(sig)
	ctx := tb.Context()
	t0, c0 := time.Now(), processCPU()
	ans, err := g.e.b.Compile(ctx, call)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := g.e.b.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: r}); err != nil {
		tb.Fatal(err)
	}
	g.wall += time.Since(t0)
	g.cpu += processCPU() - c0
	g.measured++
	if ans.ThinkingStripped != 0 {
		tb.Fatalf("%s turn %d stripped %d blocks", g.conv, g.turns, ans.ThinkingStripped)
	}
	g.last, g.lastN, g.bytes = ans.CompileID, len(g.msgs), g.size+len(bodyWith(nil))
	g.add(reply(sig))
	g.add(json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":%q}]}`, g.turns, turnPad)))
	g.turns++
}

func (g *growingConversation) reset() { g.wall, g.cpu, g.measured = 0, 0, 0 }

func (g *growingConversation) perTurn() (wallMs, cpuMs float64) {
	n := float64(max(g.measured, 1))
	return float64(g.wall.Microseconds()) / 1e3 / n, float64(g.cpu.Microseconds()) / 1e3 / n
}

// BenchmarkTurnByReference: the daemon's work for one turn of a long
// conversation (compile by reference of the history plus one turn, then
// its accept, with its fsync), in two conversations grown first to 100 and
// to 1,000 turns, one turn of each per iteration (interleaved, so both see
// the same machine). Reported: each one's history, wall and CPU ms per turn
// in Compile and Accept alone (ns/op adds the test's own building of the
// bodies), and the slope between them: ms per MB of history, flat when 0.
//
//   - host: a host without pi's tree (one branch);
//   - pi: the conversations are pi sessions whose files are ingested
//     before each turn (outside the measured time), each compile naming its
//     leaf, as the pi extension does: the compile reads the leaf's path.
func BenchmarkTurnByReference(b *testing.B) {
	for _, pi := range []bool{false, true} {
		b.Run(map[bool]string{false: "host", true: "pi"}[pi], func(b *testing.B) { turnByReference(b, pi) })
	}
}

func turnByReference(b *testing.B, pi bool) {
	e := newBindingEnv(b, nil)
	short := &growingConversation{e: e, conv: "short"}
	long := &growingConversation{e: e, conv: "long"}
	if pi {
		short.pi, long.pi = &piSession{path: "/s/short.jsonl"}, &piSession{path: "/s/long.jsonl"}
	}
	short.add(json.RawMessage(`{"role":"user","content":"start"}`))
	long.add(json.RawMessage(`{"role":"user","content":"start"}`))
	for short.turns < 100 {
		short.turn(b)
	}
	for long.turns < 1000 {
		long.turn(b)
	}
	short.reset()
	long.reset()
	b.ResetTimer()
	for b.Loop() {
		short.turn(b)
		long.turn(b)
	}
	sw, sc := short.perTurn()
	lw, lc := long.perTurn()
	smb, lmb := float64(short.bytes)/1e6, float64(long.bytes)/1e6
	b.ReportMetric(smb, "MB-short")
	b.ReportMetric(lmb, "MB-long")
	b.ReportMetric(sw, "wall-ms/turn-short")
	b.ReportMetric(lw, "wall-ms/turn-long")
	b.ReportMetric(sc, "cpu-ms/turn-short")
	b.ReportMetric(lc, "cpu-ms/turn-long")
	b.ReportMetric((lw-sw)/(lmb-smb), "wall-ms/MB")
	b.ReportMetric((lc-sc)/(lmb-smb), "cpu-ms/MB")
}

// BenchmarkConversationMemory: what the daemon holds for one long
// conversation compiled by reference turn after turn, per byte of its
// history: the live heap after a GC at 500 and at 2,000 turns, and the
// slope between them (heap bytes per history byte; the simplest baseline,
// holding the history once, is 1). The remembered compile records each
// hold their whole sent history (Sent, Kept), so this grows with the
// number of records kept (binding.Retention), not only with the history.
func BenchmarkConversationMemory(b *testing.B) {
	for b.Loop() {
		e := newBindingEnv(b, nil)
		g := &growingConversation{e: e, conv: "long"}
		g.add(json.RawMessage(`{"role":"user","content":"start"}`))
		var heap, hist [2]float64
		for i, n := range []int{500, 2000} {
			for g.turns < n {
				g.turn(b)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap[i], hist[i] = float64(ms.HeapAlloc), float64(g.size)
		}
		b.ReportMetric(hist[1]/1e6, "MB-history")
		b.ReportMetric(heap[1]/1e6, "MB-heap")
		b.ReportMetric((heap[1]-heap[0])/(hist[1]-hist[0]), "heap-bytes/history-byte")
	}
}
