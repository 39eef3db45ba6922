// Package pisessiontest writes realistic pi session files for tests and
// benchmarks: the JSONL shapes pi 0.58+ writes (v3) and the legacy v1 shape,
// with signed thinking, tool loops, usage with cost, compactions, branches,
// custom entries (pi-condense's included), labels, names and aborted turns.
// Output is deterministic for a given seed.
//
// It also has the file operations tests need to imitate pi: appending a
// line (whole or in two halves) and rewriting a file in place on the same
// inode, as pi's migration does with writeFileSync.
//
// Test-only (the "test" suffix, as in net/http/httptest): no package's own
// code imports it, which binding/deps_test.go checks.
package pisessiontest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

// Options shape a generated session. Zero values take the defaults.
type Options struct {
	Seed    uint64
	Version int    // 3 (default) or 1 (no ids, firstKeptEntryIndex, legacy header)
	Cwd     string // default /home/dev/src/app
	// Turns is the number of user turns (default 6). When TargetBytes is
	// set, turns are added until the file reaches it instead.
	Turns       int
	TargetBytes int
	// ToolResultBytes is the typical size of a tool result (default 1200);
	// one result in 25 is 40x larger, as real read results are.
	ToolResultBytes int
	// Start is the header's time (default 2026-03-01T10:00:00Z).
	Start time.Time
	// Plain leaves out compactions, branches, custom entries, labels and
	// names: a linear session of messages only.
	Plain bool
	// Pi16 writes what pi 1.6 adds (v3 only): usage with cacheWrite1h and
	// reasoning, usage entries for cache warms (kind "cache_warm"; a usage
	// entry is a child of the leaf and becomes the leaf), persisted
	// role "system" messages, and context_edit entries: an aborted reply
	// omitted (replacement null, as pi's recovery does), a tool result or
	// an assistant reply's content replaced.
	Pi16 bool
}

// Line describes one generated line, so tests can check a parser against
// what was written.
type Line struct {
	Type       string // "session" for the header
	Role       string // message role
	ID         string // v3 entry id ("" in v1 files and for the header)
	ParentID   string
	Index      int // pi's entry index (the header is 0); v1 ids derive from it
	Thinking   []Thinking
	ToolCalls  int
	UserText   bool
	CustomType string
	StopReason string
	// FirstKept is a compaction's first kept entry: its id (v3) or its
	// index (v1, as firstKeptEntryIndex).
	FirstKeptID    string
	FirstKeptIndex int
	HasTotalTokens bool
	// pi 1.6: a usage entry's kind; a context_edit's target and whether it
	// omits it (its replacement's thinking is in Thinking); Usage16 says
	// the usage carries cacheWrite1h and reasoning, whose values these are.
	UsageKind    string
	TargetID     string
	EditOmit     bool
	Usage16      bool
	CacheWrite1h int
	Reasoning    int
	obj          obj
}

// Thinking is one thinking block as written.
type Thinking struct {
	Index     int // position in the message's content
	Signature string
	Redacted  bool
	Chars     int // code points of the thinking text
}

// Session is a generated session file.
type Session struct {
	ID      string
	Version int
	Lines   []Line
	Data    []byte // the file's bytes, every line ending in '\n'
	Offsets []int  // byte offset of each line
}

// Generate writes a session in memory.
func Generate(o Options) *Session {
	s := &Session{}
	g := newGen(o, func(l Line, b []byte) {
		s.Offsets = append(s.Offsets, len(s.Data))
		s.Data = append(s.Data, b...)
		s.Lines = append(s.Lines, l)
	})
	g.run()
	s.ID, s.Version = g.sessionID, g.version
	return s
}

// Write streams a session to w without keeping it, for large archives, and
// returns the bytes written.
func Write(w io.Writer, o Options) (int64, error) {
	var n int64
	var werr error
	g := newGen(o, func(_ Line, b []byte) {
		if werr != nil {
			return
		}
		m, err := w.Write(b)
		n += int64(m)
		werr = err
	})
	g.run()
	return n, werr
}

// FileName is pi's file name for a session: the ISO start time with ':' and
// '.' replaced by '-', then '_' and the session id.
func FileName(start time.Time, id string) string {
	ts := start.UTC().Format("2006-01-02T15:04:05.000Z")
	ts = strings.NewReplacer(":", "-", ".", "-").Replace(ts)
	return ts + "_" + id + ".jsonl"
}

// ProjectDir is pi's folder name for a cwd under <agentDir>/sessions.
func ProjectDir(cwd string) string {
	cwd = strings.TrimPrefix(strings.TrimPrefix(cwd, "/"), "\\")
	return "--" + strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(cwd) + "--"
}

// WriteFile writes the session to path (0644).
func (s *Session) WriteFile(path string) error {
	return os.WriteFile(path, s.Data, 0o644)
}

// Migrated returns the session as pi's migration rewrites a v1 file: the
// header gains version 3, every entry gets a fresh 8-hex id and a parentId
// chaining it to the previous entry, and firstKeptEntryIndex becomes
// firstKeptEntryId. The ids come from seed. A v3 session is returned as is.
func (s *Session) Migrated(seed uint64) *Session {
	if s.Version >= 2 {
		return s
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ids := make([]string, len(s.Lines))
	out := &Session{ID: s.ID, Version: 3}
	prev := ""
	for i, l := range s.Lines {
		o := l.obj.clone()
		if l.Type == "session" {
			o = o.insertAfter("type", "version", 3)
		} else {
			ids[i] = hex8(rng)
			o = o.insertAfter("type", "id", ids[i])
			var parent any
			if prev != "" {
				parent = prev
			}
			o = o.insertAfter("id", "parentId", parent)
			l.ID, l.ParentID = ids[i], prev
			prev = ids[i]
			if l.Type == "compaction" {
				o = o.remove("firstKeptEntryIndex")
				if l.FirstKeptIndex > 0 && l.FirstKeptIndex < len(ids) {
					l.FirstKeptID = ids[l.FirstKeptIndex]
					o = o.insertAfter("summary", "firstKeptEntryId", l.FirstKeptID)
				}
			}
		}
		l.obj = o
		b := o.line()
		out.Offsets = append(out.Offsets, len(out.Data))
		out.Data = append(out.Data, b...)
		out.Lines = append(out.Lines, l)
	}
	return out
}

// AppendLine appends data to the file at path in one write, as pi's
// appendFileSync does.
func AppendLine(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// AppendHalves appends data in two writes split at its middle and calls
// between after the first, so a reader can be made to see a torn line.
func AppendHalves(path string, data []byte, between func()) error {
	mid := len(data) / 2
	if err := AppendLine(path, data[:mid]); err != nil {
		return err
	}
	if between != nil {
		between()
	}
	return AppendLine(path, data[mid:])
}

// RewriteInPlace replaces the file's content with data on the same inode,
// as pi's writeFileSync does when it migrates a file: truncate, then write.
func RewriteInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Line helpers for tests that append hand-made entries.

// UserLine is a v3 user message entry with the given text.
func UserLine(id, parentID, text string, ts time.Time) []byte {
	return entry("message", id, parentID, ts,
		kv{"message", obj{{"role", "user"}, {"content", []any{obj{{"type", "text"}, {"text", text}}}}, {"timestamp", ts.UnixMilli()}}}).line()
}

// AssistantLine is a v3 assistant message entry with one signed thinking
// block followed by text.
func AssistantLine(id, parentID, thinking, signature, text string, ts time.Time) []byte {
	content := []any{
		obj{{"type", "thinking"}, {"thinking", thinking}, {"thinkingSignature", signature}},
		obj{{"type", "text"}, {"text", text}},
	}
	return entry("message", id, parentID, ts, kv{"message", obj{
		{"role", "assistant"}, {"content", content}, {"api", "anthropic-messages"}, {"provider", "anthropic"},
		{"model", "claude-opus-4-5"}, {"usage", usage(10, 20, 300, 40, true)}, {"stopReason", "stop"}, {"timestamp", ts.UnixMilli()},
	}}).line()
}

// FrontierLine is a pi-condense context-prune-frontier custom entry.
func FrontierLine(id, parentID, toolCallID string, turn int, ts time.Time) []byte {
	return customEntry(id, parentID, ts, "context-prune-frontier", frontierData(toolCallID, turn, ts)).line()
}

// ---------------------------------------------------------------------------

type gen struct {
	o         Options
	rng       *rand.Rand
	emit      func(Line, []byte)
	version   int
	sessionID string
	now       time.Time
	size      int
	index     int      // pi entry index of the next line
	ids       []string // ids (v3) of entries so far, by index; "" for the header
	leaf      string   // current leaf id (v3)
	userIDs   []int    // indexes of user messages
	asstIDs   []int    // indexes of assistant messages
	model     string
	lastTool  string
	calls     []string // tool call ids of the last assistant message
	turn      int
	// signed (Pi16 only): each assistant entry's signed, unredacted
	// thinking block (signature, text), by entry index.
	signed map[int][2]string
}

func newGen(o Options, emit func(Line, []byte)) *gen {
	if o.Version != 1 {
		o.Version = 3
	}
	if o.Cwd == "" {
		o.Cwd = "/home/dev/src/app"
	}
	if o.Turns <= 0 {
		o.Turns = 6
	}
	if o.ToolResultBytes <= 0 {
		o.ToolResultBytes = 1200
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5851f42d4c957f2d))
	return &gen{o: o, rng: rng, emit: emit, version: o.Version, now: o.Start, model: "claude-opus-4-5"}
}

func (g *gen) tick(ms int) time.Time {
	g.now = g.now.Add(time.Duration(ms) * time.Millisecond)
	return g.now
}

// put emits one entry line. parent "" means the current leaf.
func (g *gen) put(l Line, o obj) {
	if l.Type != "session" && g.version >= 2 {
		id := hex8(g.rng)
		parent := l.ParentID
		if parent == "" {
			parent = g.leaf
		}
		var p any
		if parent != "" {
			p = parent
		}
		o = o.insertAfter("type", "id", id).insertAfter("id", "parentId", p)
		if l.Type == "custom" || l.Type == "custom_message" {
			// pi's custom entries put customType first.
			o = o.moveFirst("customType")
		}
		l.ID, l.ParentID = id, parent
		g.leaf = id
	} else if l.Type != "session" {
		l.ParentID = ""
	}
	l.Index = g.index
	l.obj = o
	g.index++
	if l.Type == "session" {
		g.ids = append(g.ids, "")
	} else {
		g.ids = append(g.ids, l.ID)
	}
	b := o.line()
	g.size += len(b)
	g.emit(l, b)
}

func (g *gen) run() {
	g.sessionID = uuid(g.rng)
	h := obj{{"type", "session"}}
	if g.version >= 2 {
		h = append(h, kv{"version", g.version})
	}
	h = append(h, kv{"id", g.sessionID}, kv{"timestamp", iso(g.now)}, kv{"cwd", g.o.Cwd})
	if g.version == 1 {
		h = append(h, kv{"provider", "anthropic"}, kv{"modelId", "claude-sonnet-4-5"}, kv{"thinkingLevel", "off"})
		if g.rng.IntN(2) == 0 {
			h = append(h, kv{"branchedFrom", "/home/dev/.pi/agent/sessions/--home-dev-src-app--/old.jsonl"})
		}
	}
	g.put(Line{Type: "session"}, h)
	ts := g.tick(5)
	g.put(Line{Type: "model_change"}, entry("model_change", "", "", ts, kv{"provider", "anthropic"}, kv{"modelId", g.model}))
	g.put(Line{Type: "thinking_level_change"}, entry("thinking_level_change", "", "", g.tick(1), kv{"thinkingLevel", "high"}))
	if !g.o.Plain {
		g.put(Line{Type: "session_info"}, entry("session_info", "", "", g.tick(1), kv{"name", "fix the " + g.word() + " tests"}))
	}
	for g.turn = 0; ; g.turn++ {
		if g.o.TargetBytes > 0 {
			if g.size >= g.o.TargetBytes {
				break
			}
		} else if g.turn >= g.o.Turns {
			break
		}
		g.userTurn()
	}
}

func (g *gen) userTurn() {
	parent := ""
	extras := !g.o.Plain
	// Branch: continue from an earlier assistant entry (a /tree jump), in
	// v3 sometimes with a branch summary.
	if extras && g.version >= 2 && len(g.asstIDs) > 3 && g.rng.IntN(6) == 0 {
		target := g.ids[g.asstIDs[g.rng.IntN(len(g.asstIDs)-1)]]
		if g.rng.IntN(2) == 0 {
			g.put(Line{Type: "branch_summary", ParentID: target, UserText: true},
				entry("branch_summary", "", "", g.tick(50), kv{"fromId", target}, kv{"summary", "Tried " + g.sentence(8) + " and abandoned it."},
					kv{"details", obj{{"readFiles", []any{"a.go"}}, {"modifiedFiles", []any{}}}}))
		} else {
			parent = target
		}
	}
	if extras && g.turn > 0 && g.turn%7 == 0 && len(g.userIDs) > 2 {
		kept := g.userIDs[len(g.userIDs)-2]
		l := Line{Type: "compaction"}
		c := entry("compaction", "", "", g.tick(20), kv{"summary", "## Goal\n" + g.sentence(30)})
		if g.version >= 2 {
			l.FirstKeptID = g.ids[kept]
			c = append(c, kv{"firstKeptEntryId", l.FirstKeptID})
		} else {
			l.FirstKeptIndex = kept
			c = append(c, kv{"firstKeptEntryIndex", kept})
		}
		c = append(c, kv{"tokensBefore", 150000 + g.rng.IntN(20000)}, kv{"details", obj{{"readFiles", []any{"main.go"}}, {"modifiedFiles", []any{"main.go"}}}})
		g.put(l, c)
	}
	if extras && g.rng.IntN(5) == 0 {
		g.put(Line{Type: "thinking_level_change"}, entry("thinking_level_change", "", "", g.tick(1), kv{"thinkingLevel", []string{"low", "medium", "high", "xhigh"}[g.rng.IntN(4)]}))
	}
	if g.pi16() && g.rng.IntN(4) == 0 {
		// A persisted mid-conversation system message (pi 1.6): an
		// instruction added from here on. It is not a user turn.
		sts := g.tick(1)
		g.put(Line{Type: "message", Role: "system"}, entry("message", "", "", sts, kv{"message", obj{
			{"role", "system"}, {"content", "The date is now " + iso(sts)[:10] + "."}, {"timestamp", sts.UnixMilli()}}}))
	}
	ts := g.tick(1000 + g.rng.IntN(60000))
	var content any = []any{obj{{"type", "text"}, {"text", g.userText()}}}
	if g.rng.IntN(4) == 0 {
		content = g.userText() // a plain string, as some writers leave it
	}
	l := Line{Type: "message", Role: "user", ParentID: parent, UserText: true}
	g.userIDs = append(g.userIDs, g.index)
	g.put(l, entry("message", "", "", ts, kv{"message", obj{{"role", "user"}, {"content", content}, {"timestamp", ts.UnixMilli()}}}))

	if extras && g.rng.IntN(8) == 0 {
		g.put(Line{Type: "message", Role: "bashExecution", UserText: true}, entry("message", "", "", g.tick(500), kv{"message", obj{
			{"role", "bashExecution"}, {"command", "git status"}, {"output", "On branch main\nnothing to commit"}, {"exitCode", 0},
			{"cancelled", false}, {"truncated", false}, {"timestamp", g.now.UnixMilli()}}}))
	}

	steps := 1 + g.rng.IntN(5)
	for s := 0; s < steps; s++ {
		last := s == steps-1
		aborted := !last && g.rng.IntN(25) == 0
		calls := 0
		if !last && !aborted {
			calls = 1 + g.rng.IntN(3)
		}
		g.assistant(calls, aborted)
		if aborted {
			break
		}
		for c := 0; c < calls; c++ {
			g.toolResult(c)
			if g.pi16() && g.rng.IntN(6) == 0 {
				// A pruner shortens the result in what the model sees;
				// pi normalizes a string replacement to one text block.
				g.put(Line{Type: "context_edit", TargetID: g.leaf}, entry("context_edit", "", "", g.tick(1),
					kv{"targetId", g.leaf}, kv{"replacement", obj{{"content", []any{obj{{"type", "text"}, {"text", "[pruned]"}}}}}}))
			}
		}
		if extras && g.version >= 2 && calls > 0 && g.rng.IntN(4) == 0 {
			g.condense()
		}
	}
	if g.pi16() && len(g.asstIDs) > 1 && g.rng.IntN(5) == 0 {
		// An extension replaces an earlier reply's content, keeping its
		// signed thinking block when it had one: what the model sees of it.
		at := g.asstIDs[len(g.asstIDs)-2]
		content := []any{obj{{"type", "text"}, {"text", "[earlier reply condensed]"}}}
		var thinking []Thinking
		if b, ok := g.signed[at]; ok && g.rng.IntN(2) == 0 {
			content = append([]any{obj{{"type", "thinking"}, {"thinking", b[1]}, {"thinkingSignature", b[0]}}}, content...)
			thinking = []Thinking{{Index: 0, Signature: b[0], Chars: len([]rune(b[1]))}}
		}
		g.put(Line{Type: "context_edit", TargetID: g.ids[at], Thinking: thinking}, entry("context_edit", "", "", g.tick(1),
			kv{"targetId", g.ids[at]}, kv{"replacement", obj{{"content", content}}}))
	}
	if g.pi16() && g.rng.IntN(3) == 0 {
		g.cacheWarm()
	}
	if extras && g.rng.IntN(10) == 0 && len(g.asstIDs) > 0 {
		target := g.ids[g.asstIDs[len(g.asstIDs)-1]]
		lb := entry("label", "", "", g.tick(1), kv{"targetId", target})
		if g.rng.IntN(3) > 0 {
			lb = append(lb, kv{"label", "checkpoint-" + g.word()})
		}
		if g.version >= 2 {
			g.put(Line{Type: "label"}, lb)
		}
	}
	if extras && g.turn%17 == 3 {
		g.put(Line{Type: "some_future_entry"}, entry("some_future_entry", "", "", g.tick(1), kv{"payload", obj{{"x", 1}}}))
	}
}

func (g *gen) assistant(calls int, aborted bool) {
	ts := g.tick(3000 + g.rng.IntN(30000))
	var content []any
	var thinking []Thinking
	if g.rng.IntN(10) > 0 || aborted {
		text := g.sentence(20 + g.rng.IntN(200))
		sig := ""
		if !aborted {
			sig = g.signature()
		}
		redacted := !aborted && g.rng.IntN(40) == 0
		blk := obj{{"type", "thinking"}, {"thinking", text}, {"thinkingSignature", sig}}
		if redacted {
			text = "[Reasoning redacted]"
			blk = obj{{"type", "thinking"}, {"thinking", text}, {"thinkingSignature", sig}, {"redacted", true}}
		}
		thinking = append(thinking, Thinking{Index: len(content), Signature: sig, Redacted: redacted, Chars: len([]rune(text))})
		if g.pi16() && sig != "" && !redacted {
			if g.signed == nil {
				g.signed = map[int][2]string{}
			}
			g.signed[g.index] = [2]string{sig, text}
		}
		content = append(content, blk)
	}
	if !aborted {
		content = append(content, obj{{"type", "text"}, {"text", g.sentence(5 + g.rng.IntN(60))}})
	}
	g.calls = g.calls[:0]
	for c := 0; c < calls; c++ {
		tool := []string{"read", "bash", "edit", "write"}[g.rng.IntN(4)]
		var args obj
		switch tool {
		case "bash":
			args = obj{{"command", "go test ./... -run " + g.word()}}
		case "edit":
			args = obj{{"path", g.word() + ".go"}, {"oldText", g.sentence(6)}, {"newText", g.sentence(7)}}
		default:
			args = obj{{"path", "internal/" + g.word() + ".go"}}
		}
		id := g.toolID()
		g.calls = append(g.calls, id)
		content = append(content, obj{{"type", "toolCall"}, {"id", id}, {"name", tool}, {"arguments", args}})
		g.lastTool = tool
	}
	stop := "stop"
	switch {
	case aborted:
		stop = "aborted"
	case calls > 0:
		stop = "toolUse"
	}
	u := usage(3+g.rng.IntN(10), 50+g.rng.IntN(2000), 20000+g.rng.IntN(100000), g.rng.IntN(5000), g.version >= 2)
	var w1h, reasoning int
	if g.pi16() {
		u, w1h, reasoning = g.usage16(u)
	}
	m := obj{{"role", "assistant"}, {"content", content}, {"api", "anthropic-messages"}, {"provider", "anthropic"},
		{"model", g.model}, {"usage", u}, {"stopReason", stop}}
	if aborted {
		m = append(m, kv{"errorMessage", "Request was aborted."})
	}
	m = append(m, kv{"timestamp", ts.UnixMilli()})
	g.asstIDs = append(g.asstIDs, g.index)
	g.put(Line{Type: "message", Role: "assistant", Thinking: thinking, ToolCalls: calls, StopReason: stop, HasTotalTokens: g.version >= 2,
		Usage16: g.pi16(), CacheWrite1h: w1h, Reasoning: reasoning},
		entry("message", "", "", ts, kv{"message", m}))
	if aborted && g.pi16() {
		// pi's recovery omits the failed attempt from what the model sees.
		g.put(Line{Type: "context_edit", TargetID: g.leaf, EditOmit: true},
			entry("context_edit", "", "", g.tick(1), kv{"targetId", g.leaf}, kv{"replacement", nil}))
	}
}

func (g *gen) pi16() bool { return g.o.Pi16 && g.version >= 2 }

// usage16 adds pi 1.6's cacheWrite1h (part of cacheWrite) and reasoning
// (part of output) to a usage object.
func (g *gen) usage16(u obj) (obj, int, int) {
	var cw, out int
	for _, f := range u {
		switch f.k {
		case "cacheWrite":
			cw = f.v.(int)
		case "output":
			out = f.v.(int)
		}
	}
	w1h, reasoning := 0, out/2
	if cw > 0 && g.rng.IntN(3) == 0 {
		w1h = g.rng.IntN(cw + 1)
	}
	return u.insertAfter("cacheWrite", "cacheWrite1h", w1h).insertAfter("totalTokens", "reasoning", reasoning), w1h, reasoning
}

// cacheWarm writes the usage entry pi 1.6's cache warmer appends after a
// warm request (max_tokens 1): it reads the prompt from the cache.
func (g *gen) cacheWarm() {
	u, w1h, reasoning := g.usage16(usage(2+g.rng.IntN(5), 1, 20000+g.rng.IntN(100000), g.rng.IntN(200), true))
	g.put(Line{Type: "usage", UsageKind: "cache_warm", HasTotalTokens: true, Usage16: true, CacheWrite1h: w1h, Reasoning: reasoning},
		entry("usage", "", "", g.tick(240000), kv{"kind", "cache_warm"}, kv{"provider", "anthropic"}, kv{"model", g.model}, kv{"usage", u}))
}

func (g *gen) toolResult(i int) {
	ts := g.tick(100 + g.rng.IntN(3000))
	n := g.o.ToolResultBytes/2 + g.rng.IntN(g.o.ToolResultBytes)
	if g.rng.IntN(25) == 0 {
		n *= 40
	}
	m := obj{{"role", "toolResult"}, {"toolCallId", g.calls[i]}, {"toolName", g.lastTool},
		{"content", []any{obj{{"type", "text"}, {"text", g.output(n)}}}}}
	if g.lastTool == "edit" {
		m = append(m, kv{"details", obj{{"diff", "-" + g.sentence(5) + "\n+" + g.sentence(5)}}})
	}
	m = append(m, kv{"isError", g.rng.IntN(20) == 0}, kv{"timestamp", ts.UnixMilli()})
	g.put(Line{Type: "message", Role: "toolResult"}, entry("message", "", "", ts, kv{"message", m}))
}

// condense writes what pi-condense leaves after a flush: an index entry, a
// summary message, a frontier snapshot and stats.
func (g *gen) condense() {
	ts := g.tick(10)
	call := g.toolID()
	g.put(Line{Type: "custom", CustomType: "context-prune-index"}, customEntry("", "", ts, "context-prune-index",
		obj{{"toolCalls", []any{obj{{"toolCallId", call}, {"toolName", g.lastTool}, {"resultText", g.sentence(12)}, {"turnIndex", g.turn}}}}}))
	g.put(Line{Type: "custom_message", CustomType: "context-prune-summary", UserText: true}, obj{
		{"type", "custom_message"}, {"customType", "context-prune-summary"}, {"content", "- " + g.sentence(10) + "\n\n**Summarized tool refs**"},
		{"display", false}, {"details", obj{{"toolCallRefs", []any{obj{{"shortId", "a1"}, {"toolCallId", call}}}}}}, {"timestamp", iso(g.tick(1))}})
	g.put(Line{Type: "custom", CustomType: "context-prune-frontier"}, customEntry("", "", g.tick(1), "context-prune-frontier", frontierData(call, g.turn, g.now)))
	g.put(Line{Type: "custom", CustomType: "context-prune-stats"}, customEntry("", "", g.tick(1), "context-prune-stats",
		obj{{"totalInputTokens", 1000 * g.turn}, {"totalOutputTokens", 100 * g.turn}, {"totalCost", 0.25}, {"callCount", g.turn}}))
}

func frontierData(toolCallID string, turn int, ts time.Time) obj {
	return obj{{"lastAttemptedToolCallId", toolCallID}, {"lastAttemptedToolName", "bash"}, {"lastAttemptedTurnIndex", turn},
		{"lastAttemptedTimestamp", ts.UnixMilli()}, {"attemptedBatchCount", 1}, {"attemptedToolCallCount", 2},
		{"rawCharCount", 5120}, {"summaryCharCount", 300}, {"outcome", "summarized"}}
}

func customEntry(id, parentID string, ts time.Time, customType string, data obj) obj {
	o := obj{{"type", "custom"}, {"customType", customType}}
	if id != "" {
		o = append(o, kv{"id", id}, kv{"parentId", nullable(parentID)})
	}
	return append(o, kv{"data", data}, kv{"timestamp", iso(ts)})
}

func entry(typ, id, parentID string, ts time.Time, fields ...kv) obj {
	o := obj{{"type", typ}}
	if id != "" {
		o = append(o, kv{"id", id}, kv{"parentId", nullable(parentID)})
	}
	o = append(o, kv{"timestamp", iso(ts)})
	return append(o, fields...)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func usage(in, out, cacheRead, cacheWrite int, total bool) obj {
	u := obj{{"input", in}, {"output", out}, {"cacheRead", cacheRead}, {"cacheWrite", cacheWrite}}
	if total {
		u = append(u, kv{"totalTokens", in + out + cacheRead + cacheWrite})
	}
	ci, co, cr, cw := float64(in)*5e-6, float64(out)*25e-6, float64(cacheRead)*5e-7, float64(cacheWrite)*6.25e-6
	return append(u, kv{"cost", obj{{"input", ci}, {"output", co}, {"cacheRead", cr}, {"cacheWrite", cw}, {"total", ci + co + cr + cw}}})
}

var words = strings.Fields(`the a watcher session file line offset cursor thinking block signature cache prefix
request model branch leaf entry compaction summary tool result bash read edit write test error retry inode
rewrite migrate header version parse buffer batch sink commit daemon socket sqlite schema index frontier
prune stamp chain seed release engaged ✓ naïve café 数据 "quoted" back\slash tab	inside`)

func (g *gen) word() string { return words[g.rng.IntN(len(words))] }

func (g *gen) sentence(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			if g.rng.IntN(12) == 0 {
				b.WriteString("\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(g.word())
	}
	if g.rng.IntN(50) == 0 {
		b.WriteString(" 🙂")
	}
	return b.String()
}

func (g *gen) userText() string {
	return g.sentence(5 + g.rng.IntN(40))
}

// output is tool output of about n bytes: code-like lines.
func (g *gen) output(n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%4d\tfunc %s%d(ctx context.Context) error { return %q }\n", b.Len()/40, g.word(), g.rng.IntN(100), g.word())
	}
	return b.String()
}

// signature is a base64 string of 300 to 10,600 characters, like
// Anthropic's thinking signatures.
func (g *gen) signature() string {
	n := 225 + g.rng.IntN(600)
	if g.rng.IntN(10) == 0 {
		n *= 10
	}
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(g.rng.Uint32())
	}
	return "Eq" + base64.StdEncoding.EncodeToString(raw)
}

func (g *gen) toolID() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := []byte("toolu_01")
	for i := 0; i < 22; i++ {
		b = append(b, alnum[g.rng.IntN(len(alnum))])
	}
	return string(b)
}

func hex8(rng *rand.Rand) string { return fmt.Sprintf("%08x", rng.Uint32()) }

func uuid(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, (b>>48)&0x3fff|0x8000, b&0xffffffffffff)
}

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// obj is a JSON object that keeps its key order, as JavaScript objects do.
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, f.k)
		b.WriteByte(':')
		writeJSON(&b, f.v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false) // JSON.stringify does not escape <, > or &
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	b.Truncate(b.Len() - 1) // Encode's newline
}

// line is the object as one JSONL line.
func (o obj) line() []byte {
	var b bytes.Buffer
	writeJSON(&b, o)
	b.WriteByte('\n')
	return b.Bytes()
}

func (o obj) clone() obj { return append(obj(nil), o...) }

func (o obj) insertAfter(after, k string, v any) obj {
	for i, f := range o {
		if f.k == after {
			out := append(obj(nil), o[:i+1]...)
			out = append(out, kv{k, v})
			return append(out, o[i+1:]...)
		}
	}
	return append(o, kv{k, v})
}

func (o obj) remove(k string) obj {
	out := o[:0:0]
	for _, f := range o {
		if f.k != k {
			out = append(out, f)
		}
	}
	return out
}

func (o obj) moveFirst(k string) obj {
	for i, f := range o {
		if f.k == k {
			out := obj{f}
			out = append(out, o[:i]...)
			return append(out, o[i+1:]...)
		}
	}
	return o
}
