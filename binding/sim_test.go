package binding_test

// A host simulator that drives bindery's pure core (Compile, Rewrite,
// Accept, releases) through long, messy conversations and sends every
// rewritten request to package judge, an independent model of the provider
// written from the research alone. After every step it checks:
//
//   - the judge never refuses (400, drop, or mismatch-allowed) a block
//     bindery kept;
//   - bindery never strips a block the judge would have accepted, unless the
//     run rule, the latest-message rule, the first compile after engagement
//     or an unattributable reply forced it (each counted per reason), or a
//     release whose own strip was justified;
//   - the latest assistant message's thinking run is never partially trimmed.
//
// The daemon's role (stamps, releases, remembered compiles, owner,
// engagement) is played here in memory, the way design/binding.md describes
// it; no I/O.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/binding/judgetest"
)

// chooser is the simulator's only source of decisions: a PRNG in the normal
// test, fuzz bytes in FuzzConversation.
type chooser interface {
	Intn(n int) int
	Done() bool
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}
func (c randChooser) Done() bool { return false }

type byteChooser struct {
	b []byte
	i int
}

func (c *byteChooser) Intn(n int) int {
	if n <= 1 || c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	return v % n
}
func (c *byteChooser) Done() bool { return c.i >= len(c.b) }

// pct is true with probability p percent.
func pct(c chooser, p int) bool { return c.Intn(100) < p }

// simStats aggregates what the simulation saw.
type simStats struct {
	mu            sync.Mutex
	conversations int
	steps         int
	compiles      int
	accepts       map[string]int // now, now-no-reply, late, late-no-reply, never, forgotten
	ops           map[string]int
	strips        map[string]int // every strip, by bindery's reason
	necessary     map[string]int // strips of blocks the judge would not have accepted either
	forced        map[string]int // strips of judge-valid blocks, by the allowed cause
	conservative  map[string]int // strips of judge-valid blocks where bindery took the safe side of an [INF]/[CONFLICT] reading
	expected400   int            // refusals of a block the host corrupted (bad signature)
	preEngagement map[string]int // what the judge did to blocks bindery passed through before engagement
	// readingDependent: violations under the dropped-counts-as-read reading
	// after the provider dropped a block (see violation).
	readingDependent map[string]int
	exampleKinds     map[string]int
	violations       map[string]int
	examples         []string
	readings         map[judgetest.Reading]bool
	// read and max: blocks the judge read in what bindery sent, against
	// the most the provider would read of the host's request
	// (judgetest.Max), by whether the target runs the prefix check.
	read, max map[string]int
}

func newSimStats() *simStats {
	return &simStats{accepts: map[string]int{}, ops: map[string]int{}, strips: map[string]int{}, necessary: map[string]int{},
		forced: map[string]int{}, conservative: map[string]int{}, violations: map[string]int{}, preEngagement: map[string]int{}, readingDependent: map[string]int{}, exampleKinds: map[string]int{}, readings: map[judgetest.Reading]bool{},
		read: map[string]int{}, max: map[string]int{}}
}

func (s *simStats) merge(o *simStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conversations += o.conversations
	s.steps += o.steps
	s.compiles += o.compiles
	s.expected400 += o.expected400
	for _, p := range []struct{ dst, src map[string]int }{{s.accepts, o.accepts}, {s.ops, o.ops}, {s.strips, o.strips},
		{s.necessary, o.necessary}, {s.forced, o.forced}, {s.conservative, o.conservative}, {s.violations, o.violations},
		{s.preEngagement, o.preEngagement}, {s.readingDependent, o.readingDependent}, {s.read, o.read}, {s.max, o.max}} {
		for k, v := range p.src {
			p.dst[k] += v
		}
	}
	for r := range o.readings {
		s.readings[r] = true
	}
	for _, e := range o.examples {
		if len(s.examples) < 30 {
			s.examples = append(s.examples, e)
		}
	}
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, m[k])
	}
	return b.String()
}

// kept is the blocks read against the maximum, per kind of target and
// in all.
func (s *simStats) kept() string {
	var b strings.Builder
	read, mx := 0, 0
	for _, k := range []string{"checks", "no-check"} {
		read, mx = read+s.read[k], mx+s.max[k]
		fmt.Fprintf(&b, " %s=%d/%d (%.2f%%)", k, s.read[k], s.max[k], 100*float64(s.read[k])/float64(max(1, s.max[k])))
	}
	fmt.Fprintf(&b, " all=%d/%d (%.2f%%)", read, mx, 100*float64(read)/float64(max(1, mx)))
	return b.String()
}

func (s *simStats) String() string {
	return "blocks read against the judge's maximum:" + s.kept() + "\n" + s.string()
}

func (s *simStats) string() string {
	return fmt.Sprintf("conversations=%d steps=%d compiles=%d readings=%d expected-bad-signature-400=%d\n accepts:%s\n ops:%s\n strips:%s\n   necessary (judge refuses too):%s\n   forced (judge accepts; allowed cause):%s\n   conservative (judge accepts under this reading; bindery's documented safe side):%s\n before engagement (passed through by design):%s\n after an earlier provider drop bindery could not account for:%s\n violations:%s",
		s.conversations, s.steps, s.compiles, len(s.readings), s.expected400, fmtCounts(s.accepts), fmtCounts(s.ops),
		fmtCounts(s.strips), fmtCounts(s.necessary), fmtCounts(s.forced), fmtCounts(s.conservative), fmtCounts(s.preEngagement), fmtCounts(s.readingDependent), fmtCounts(s.violations))
}

// ---------------------------------------------------------------------------
// The host: a conversation as plain JSON values, edited the ways real hosts do.

type host struct {
	system    []any
	tools     []any
	msgs      []any
	model     string // the conversation's model (base id)
	switched  string // a temporary model ("" when none)
	switchFor int
	heartbeat bool // this request only: system differs
	effort    string
	openTools []string
	reminder  int // message index holding a reminder to remove on the next turn, -1 if none

	// noThinking: this request only, the host sends its history without
	// any thinking (pi's compaction request, a retry without thinking):
	// the reply is minted reading none
	noThinking bool
}

func cloneJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	out, err := decodeJSON(b)
	if err != nil {
		panic(err)
	}
	return out
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func (h *host) clone() *host {
	c := *h
	c.system = cloneJSON(h.system).([]any)
	c.tools = cloneJSON(h.tools).([]any)
	if len(h.msgs) > 0 {
		c.msgs = cloneJSON(h.msgs).([]any)
	} else {
		c.msgs = nil
	}
	c.openTools = append([]string(nil), h.openTools...)
	return &c
}

func msgOf(v any) map[string]any { return v.(map[string]any) }

func contentOf(v any) []any {
	c, _ := msgOf(v)["content"].([]any)
	return c
}

func isThinkingBlock(v any) bool {
	b, ok := v.(map[string]any)
	return ok && (b["type"] == "thinking" || b["type"] == "redacted_thinking")
}

// ---------------------------------------------------------------------------
// Conversations, branches and the daemon's state.

type branch struct {
	name       string
	h          *host
	parent     *branch // the branch this one was forked from (nil: the first)
	forkedAt   int64   // the conversation's release order when it was forked
	remembered []*binding.CompileRecord
	owner      *binding.CompileRecord
	pending    []pendingAccept
}

type pendingAccept struct {
	due       int
	id        string
	reply     []byte
	transform []binding.InputTransformation
	kind      string
}

type simConv struct {
	t        testing.TB
	mem      binding.DecideMemory // reused by every compile, as the daemon's per conversation
	c        chooser
	st       *simStats
	j        *judgetest.Judge
	reading  judgetest.Reading
	route    func(string) string
	id       string
	behavior string // "", "error", "drop_block"
	beta     bool
	manual   bool // thinking.type "enabled" (else "adaptive")
	engaged  bool
	stamps   map[binding.Digest]*binding.Stamp
	// compactions: what accepts recorded of on-demand compaction blocks.
	compactions map[binding.Digest]binding.Compaction
	seq         int64
	branches    []*branch
	releases    []binding.BranchRelease // the conversation's, in the order recorded
	cur         *branch
	corrupt     map[[32]byte]bool // keys of signatures the host corrupted
	// providerDropped: the judge has dropped a block for its prefix in this
	// conversation; unreportedDrop: one such drop never reached bindery
	// before the reply was stamped (see violation).
	providerDropped, unreportedDrop bool
	dropThisStep                    bool
	// blind: replies minted after a request whose last kept block had no
	// stamp (its minter unknown to bindery, so whether the model read it too):
	// bindery can only guess their predecessor.
	blind map[[32]byte]bool
	toolN int
	step  int
}

var simModels = []string{"claude-fable-5-1", "claude-fable-5-1", "claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5-2", "claude-opus-5-5", "claude-sonnet-5"}

// switchTargets: where a router sends a turn from each model.
var switchTargets = map[string][]string{
	"claude-fable-5-1":  {"claude-opus-5-5", "claude-sonnet-5", "claude-mythos-5-1", "claude-fable-5-2"},
	"claude-mythos-5-1": {"claude-fable-5-1", "claude-opus-5-5"},
	"claude-fable-5-2":  {"claude-fable-5-1", "claude-mythos-5-2"},
	"claude-opus-5-5":   {"claude-sonnet-5", "claude-fable-5-1"},
	"claude-sonnet-5":   {"claude-opus-5-5", "claude-fable-5-1"},
}

func newSimConv(t testing.TB, c chooser, st *simStats, n int, reading judgetest.Reading) *simConv {
	s := &simConv{t: t, c: c, st: st, reading: reading, id: fmt.Sprintf("conv%d", n),
		stamps: map[binding.Digest]*binding.Stamp{}, corrupt: map[[32]byte]bool{}, blind: map[[32]byte]bool{}}
	s.route = func(m string) string { return m }
	if !reading.Opus55ToFable51 {
		// The reading where Fable 5.1 does not read Opus 5.5 is the
		// Bedrock/Vertex one: the host names models the Bedrock way, which is
		// how bindery learns the route.
		s.route = func(m string) string { return "anthropic." + m + "-v1:0" }
	}
	newAccount := true
	switch c.Intn(5) {
	case 0: // ENF: new account, field unset, no beta
	case 1: // ENF: explicit error with the beta
		s.behavior, s.beta = "error", true
	case 2: // DROP
		s.behavior, s.beta = "drop_block", true
	case 3: // REC: old account, beta
		newAccount, s.beta = false, true
	case 4: // REC without the beta: nothing reported
		newAccount = false
	}
	s.manual = pct(c, 25)
	s.j = judgetest.New(judgetest.Options{Reading: reading, NewAccount: newAccount, Secret: []byte(s.id)})
	h := &host{
		system: []any{map[string]any{"type": "text", "text": "You are pi, a coding agent. Date: 2026-11-29."},
			map[string]any{"type": "text", "text": "AGENTS.md: keep diffs small.", "cache_control": map[string]any{"type": "ephemeral"}}},
		tools: []any{
			map[string]any{"name": "read", "description": "Read a file.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
			map[string]any{"name": "bash", "description": "Run a shell command.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}, "cache_control": map[string]any{"type": "string", "description": "a payload key, not a marker"}}}},
		},
		model:    simModels[c.Intn(len(simModels))],
		reminder: -1,
	}
	b := &branch{name: "main", h: h}
	s.branches = []*branch{b}
	s.cur = b
	st.readings[reading] = true
	return s
}

func (s *simConv) op(name string) { s.st.ops[name]++ }

// body builds the request the host is about to send on branch b.
func (s *simConv) body(b *branch) []byte {
	h := b.h
	model := h.model
	if h.switched != "" {
		model = h.switched
	}
	system := h.system
	if h.heartbeat {
		system = append(append([]any{}, system...), map[string]any{"type": "text", "text": "Heartbeat: check the inbox."})
	}
	th := map[string]any{"type": "adaptive"}
	if s.manual {
		th = map[string]any{"type": "enabled", "budget_tokens": 4096}
	}
	if s.behavior != "" {
		th["block_binding"] = map[string]any{"prefix_mismatch_behavior": s.behavior}
	}
	msgs := h.msgs
	if h.noThinking {
		msgs = make([]any, len(h.msgs))
		for i, mv := range h.msgs {
			m := msgOf(mv)
			cont, ok := m["content"].([]any)
			if !ok {
				msgs[i] = m
				continue
			}
			c := map[string]any{}
			for k, v := range m {
				c[k] = v
			}
			var kept []any
			for _, bv := range cont {
				if !isThinkingBlock(bv) {
					kept = append(kept, bv)
				}
			}
			c["content"] = kept
			msgs[i] = c
		}
	}
	top := map[string]any{"model": s.route(model), "max_tokens": 8192, "system": system, "tools": h.tools, "thinking": th, "messages": msgs}
	if h.effort != "" {
		top["output_config"] = map[string]any{"effort": h.effort}
	}
	body, err := json.Marshal(top)
	if err != nil {
		s.t.Fatal(err)
	}
	return body
}

// prepare applies this step's host-side changes before the request.
func (s *simConv) prepare(b *branch) {
	h, c := b.h, s.c
	h.heartbeat, h.noThinking = false, false
	if h.switched != "" {
		h.switchFor--
		if h.switchFor <= 0 {
			h.switched = ""
			s.op("model-back")
		}
	}
	if h.reminder >= 0 && h.reminder < len(h.msgs) {
		// research 41: a reminder appended on request k, removed on k+1.
		m := msgOf(h.msgs[h.reminder])
		if cont, ok := m["content"].([]any); ok && len(cont) > 1 {
			m["content"] = cont[:len(cont)-1]
			s.op("reminder-removed")
		}
	}
	h.reminder = -1
	// Edits of earlier content (each rare).
	if pct(c, 8) && s.stubToolResult(h) {
		s.op("stub-tool-result")
	}
	if pct(c, 3) && s.editUserText(h) {
		s.op("edit-user-text")
	}
	if pct(c, 6) {
		h.heartbeat = true
		s.op("heartbeat")
	}
	if pct(c, 2) {
		h.system[0].(map[string]any)["text"] = fmt.Sprintf("You are pi, a coding agent. Date: 2026-11-%02d.", 29+c.Intn(2))
		s.op("system-changed")
	}
	if pct(c, 2) {
		t0 := h.tools[c.Intn(len(h.tools))].(map[string]any)
		if t0["defer_loading"] != true {
			t0["description"] = t0["description"].(string) + " Be careful."
			s.op("tool-edited")
		}
	}
	if pct(c, 2) {
		h.tools = append(h.tools, map[string]any{"name": fmt.Sprintf("mcp_%d", len(h.tools)), "description": "A deferred tool.", "input_schema": map[string]any{"type": "object"}, "defer_loading": true})
		s.op("deferred-tool-added")
	}
	if pct(c, 1) {
		h.tools = append(h.tools, map[string]any{"name": fmt.Sprintf("tool_%d", len(h.tools)), "description": "A new tool.", "input_schema": map[string]any{"type": "object"}})
		s.op("tool-added")
	}
	if h.switched == "" && pct(c, 5) {
		ts := switchTargets[h.model]
		h.switched, h.switchFor = ts[c.Intn(len(ts))], 1+c.Intn(3)
		s.op("model-switch")
	}
	if pct(c, 3) {
		h.effort = []string{"", "low", "medium", "high"}[c.Intn(4)]
		s.op("effort")
	}
	if len(h.openTools) == 0 && len(h.msgs) > 2 && pct(c, 3) {
		s.compact(h)
	}
	if len(h.openTools) == 0 && pct(c, 4) && s.compactKeepTail(b) {
		s.op("compaction-keep-tail")
	}
	if pct(c, 3) {
		h.noThinking = true
		s.op("host-sends-no-thinking-once")
	}
	if pct(c, 4) && s.pruneBeforeCompaction(h) {
		s.op("prune-before-compaction")
	}
	if pct(c, 2) && s.summarize(h) {
		s.op("summarize-keep-tail")
	}
	if pct(c, 3) && s.dropThinking(h, true) {
		s.op("host-drops-oldest-thinking")
	}
	if pct(c, 1) && s.dropThinking(h, false) {
		s.op("host-drops-middle-thinking")
	}
	if pct(c, 1) && s.corruptSignature(h) {
		s.op("host-corrupts-signature")
	}
	// The new message: tool results for an open tool round, else a user turn.
	if len(h.openTools) > 0 {
		var res []any
		for _, id := range h.openTools {
			res = append(res, map[string]any{"type": "tool_result", "tool_use_id": id, "content": strings.Repeat("output line\n", 1+c.Intn(5))})
		}
		h.openTools = nil
		h.msgs = append(h.msgs, map[string]any{"role": "user", "content": res})
		if pct(c, 8) {
			h.msgs = append(h.msgs, map[string]any{"role": "system", "content": "The file watcher saw a change."})
			s.op("system-message")
		}
	} else {
		text := fmt.Sprintf("user turn %d", s.step)
		switch {
		case pct(c, 10):
			h.msgs = append(h.msgs, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": text}, map[string]any{"type": "text", "text": "<reminder>stay on task</reminder>"}}})
			h.reminder = len(h.msgs) - 1
			s.op("reminder")
		case pct(c, 50):
			h.msgs = append(h.msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}})
		default:
			h.msgs = append(h.msgs, map[string]any{"role": "user", "content": text})
		}
	}
	if pct(c, 50) {
		s.moveCacheMarker(h)
	}
}

func (s *simConv) stubToolResult(h *host) bool {
	var cands []map[string]any
	for i := 0; i+1 < len(h.msgs); i++ {
		for _, bv := range contentOf(h.msgs[i]) {
			if b, ok := bv.(map[string]any); ok && b["type"] == "tool_result" && b["content"] != "[stubbed]" {
				cands = append(cands, b)
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	cands[s.c.Intn(len(cands))]["content"] = "[stubbed]"
	return true
}

func (s *simConv) editUserText(h *host) bool {
	var cands []map[string]any
	for i := 0; i+1 < len(h.msgs); i++ {
		if m := msgOf(h.msgs[i]); m["role"] == "user" {
			if _, ok := m["content"].(string); ok {
				cands = append(cands, m)
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	m := cands[s.c.Intn(len(cands))]
	m["content"] = m["content"].(string) + " (edited)"
	return true
}

// compact appends an on-demand compaction block that stands for the whole
// history so far (the summary the API returned, sent back as an assistant
// message); the history before it stays until pruned.
func (s *simConv) compact(h *host) {
	body := s.body(s.cur)
	comp, err := s.j.Compaction(body, len(h.msgs), fmt.Sprintf("Summary of %d messages.", len(h.msgs)))
	if err != nil {
		s.t.Fatal(err)
	}
	h.msgs = append(h.msgs, map[string]any{"role": "assistant", "content": []any{comp}})
	s.op("compaction")
}

// compactKeepTail is an on-demand compaction sent through bindery: the
// history up to a cut is the compaction request, and the block it returns
// is sent in place of those messages, the later ones kept (their thinking
// stays valid under the provider's conditions; bindery vouches for it when
// it accepted the request). The cut falls where the kept tail begins with a
// message of another role than the last summarized one and not "system".
func (s *simConv) compactKeepTail(b *branch) bool {
	h := b.h
	var cuts []int
	for k := 1; k+1 < len(h.msgs); k++ {
		r0, r1 := msgOf(h.msgs[k-1])["role"], msgOf(h.msgs[k])["role"]
		if r0 != r1 && r1 != "system" && (r0 != "user" || k < 2 || !isResults(h.msgs[k-1])) {
			cuts = append(cuts, k)
		}
	}
	if len(cuts) == 0 {
		return false
	}
	k := cuts[s.c.Intn(len(cuts))]
	full := h.msgs
	h.msgs = full[:k]
	body := s.body(b)
	h.msgs = full
	// The host never sends as the latest assistant message one whose
	// thinking it trimmed itself (host-drops-*-thinking keep the latest
	// message whole, but a cut can make an older one the latest).
	facts, err := s.j.Facts(body)
	if err != nil {
		s.t.Fatal(err)
	}
	last := latestAssistant(full[:k])
	n := 0
	for _, f := range facts {
		if f.Path.Message == last {
			if !f.SigOK || f.Index != n || f.Count != len(thinkingSitesOf(full[last])) {
				return false
			}
			n++
		}
	}
	req, out := s.compile(b, body)
	res := s.j.Compact(judgetest.Call{Body: out.Rewrite(body, req), Beta: s.beta}, fmt.Sprintf("Summary of %d messages.", k))
	if res.Status != 200 {
		// a signature the host corrupted (host-corrupts-signature) is its own
		// 400: "messages.N.content.M: Invalid `signature` in `thinking` block"
		if badSignature := strings.HasSuffix(res.Error, "` block"); out.Engaged && !badSignature {
			s.violation("compaction-request-refused", res.Error)
		}
		return false
	}
	s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, kind: "now"})
	v, err := decodeJSON(res.Reply)
	if err != nil {
		s.t.Fatal(err)
	}
	h.msgs = append([]any{v}, full[k:]...)
	if h.reminder >= 0 {
		h.reminder -= k - 1
	}
	return true
}

// thinkingSitesOf lists the thinking blocks of one message.
func thinkingSitesOf(m any) []any {
	var out []any
	for _, bv := range contentOf(m) {
		if isThinkingBlock(bv) {
			out = append(out, bv)
		}
	}
	return out
}

// isResults: a user message of tool results (a cut after it would leave
// the tool_use that asked for them summarized and the cycle open).
func isResults(m any) bool {
	for _, bv := range contentOf(m) {
		if b, ok := bv.(map[string]any); ok && b["type"] == "tool_result" {
			return true
		}
	}
	return false
}

func (s *simConv) pruneBeforeCompaction(h *host) bool {
	for i := len(h.msgs) - 1; i > 0; i-- {
		for _, bv := range contentOf(h.msgs[i]) {
			if b, ok := bv.(map[string]any); ok && b["type"] == "compaction" {
				h.msgs = h.msgs[i:]
				if h.reminder >= 0 {
					h.reminder -= i
				}
				return true
			}
		}
	}
	return false
}

// summarize replaces messages[0:k) with the host's own summary (a keep-tail
// client compaction): the kept turns' thinking is bound to the old prefix.
func (s *simConv) summarize(h *host) bool {
	var ks []int
	for k := 2; k+2 < len(h.msgs); k++ {
		if msgOf(h.msgs[k])["role"] == "assistant" {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return false
	}
	k := ks[s.c.Intn(len(ks))]
	h.msgs = append([]any{map[string]any{"role": "user", "content": fmt.Sprintf("Summary of %d messages.", k)}}, h.msgs[k:]...)
	if h.reminder >= 0 {
		h.reminder -= k - 1
	}
	return true
}

// thinkingSites lists the thinking blocks of the host's history.
func thinkingSites(msgs []any) []binding.Pos {
	var out []binding.Pos
	for i, mv := range msgs {
		for k, bv := range contentOf(mv) {
			if isThinkingBlock(bv) {
				out = append(out, binding.Pos{Message: i, Block: k})
			}
		}
	}
	return out
}

func latestAssistant(msgs []any) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgOf(msgs[i])["role"] == "assistant" {
			return i
		}
	}
	return -1
}

// dropThinking removes the oldest (or a middle) thinking block from the
// host's own history, never part of the latest assistant message's run.
func (s *simConv) dropThinking(h *host, oldest bool) bool {
	sites := thinkingSites(h.msgs)
	latest := latestAssistant(h.msgs)
	var cands []binding.Pos
	for _, p := range sites {
		if p.Message != latest {
			cands = append(cands, p)
		}
	}
	if len(cands) < 2 {
		return false
	}
	p := cands[0]
	if !oldest {
		p = cands[1+s.c.Intn(len(cands)-1)]
	}
	m := msgOf(h.msgs[p.Message])
	cont := m["content"].([]any)
	m["content"] = append(append([]any{}, cont[:p.Block]...), cont[p.Block+1:]...)
	return true
}

func (s *simConv) corruptSignature(h *host) bool {
	sites := thinkingSites(h.msgs)
	if len(sites) == 0 {
		return false
	}
	p := sites[s.c.Intn(len(sites))]
	b := contentOf(h.msgs[p.Message])[p.Block].(map[string]any)
	field := "signature"
	if b["type"] == "redacted_thinking" {
		field = "data"
	}
	sig := []byte(b[field].(string))
	if len(sig) == 0 {
		return false
	}
	at := s.c.Intn(len(sig))
	if sig[at] == 'A' {
		sig[at] = 'B'
	} else {
		sig[at] = 'A'
	}
	b[field] = string(sig)
	s.corrupt[judgetest.KeyOf(string(sig))] = true
	return true
}

// moveCacheMarker removes every marker from message content blocks and puts
// one on the last block of the last message (pi's habit).
func (s *simConv) moveCacheMarker(h *host) {
	for _, mv := range h.msgs {
		for _, bv := range contentOf(mv) {
			if b, ok := bv.(map[string]any); ok {
				delete(b, "cache_control")
			}
		}
	}
	if n := len(h.msgs); n > 0 {
		if cont := contentOf(h.msgs[n-1]); len(cont) > 0 {
			if b, ok := cont[len(cont)-1].(map[string]any); ok && !isThinkingBlock(b) && b["type"] != "compaction" {
				b["cache_control"] = map[string]any{"type": "ephemeral"}
			}
		}
	}
	s.op("cache-marker-moved")
}

// replySpec draws the reply the model gives.
func (s *simConv) replySpec() []judgetest.ReplyBlock {
	c := s.c
	var out []judgetest.ReplyBlock
	n := []int{0, 1, 1, 1, 1, 1, 1, 2, 2, 3}[c.Intn(10)]
	for i := 0; i < n; i++ {
		switch {
		case pct(c, 10):
			out = append(out, judgetest.ReplyBlock{Type: "redacted_thinking"})
		case pct(c, 10):
			out = append(out, judgetest.ReplyBlock{Type: "thinking", Text: ""})
		default:
			out = append(out, judgetest.ReplyBlock{Type: "thinking", Text: fmt.Sprintf("thinking %d.%d", s.step, i)})
		}
	}
	if pct(c, 35) {
		for k := 0; k < 1+c.Intn(2); k++ {
			s.toolN++
			out = append(out, judgetest.ReplyBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_%s_%d", s.id, s.toolN), Name: "bash",
				Input: map[string]any{"cmd": "go test ./...", "timeout": 120, "ratio": 0.5}})
		}
	} else {
		out = append(out, judgetest.ReplyBlock{Type: "text", Text: fmt.Sprintf("answer %d", s.step)})
	}
	return out
}

// ---------------------------------------------------------------------------
// The daemon's side: compile, accept, releases, forks.

func (s *simConv) compile(b *branch, body []byte) (*binding.Request, *binding.Compiled) {
	req, err := binding.ParseRequest(body)
	if err != nil {
		s.t.Fatalf("ParseRequest: %v", err)
	}
	stamps := map[binding.Digest]*binding.Stamp{}
	for _, k := range binding.StampKeys(req) {
		if st, ok := s.stamps[k]; ok {
			stamps[k] = st
		}
	}
	reach := s.reach(b)
	reach.NotBinding = !binding.TargetBinds(nil, req.Model, nil)
	released := binding.ReleasedOn(reach, binding.StampKeys(req))
	comps := map[binding.Digest]binding.Compaction{}
	for _, k := range binding.CompactionKeys(req) {
		if c, ok := s.compactions[k]; ok {
			comps[k] = c
		}
	}
	s.seq++
	id := fmt.Sprintf("%s-c%d", s.id, s.seq)
	in := binding.CompileInput{ID: id, Conversation: s.id, Branch: b.name, Seq: s.seq, Request: req,
		Engaged: s.engaged, Stamps: binding.StampsFor(req, stamps), Released: released, Remembered: b.remembered, Owner: b.owner, Compactions: comps}
	out, err := binding.Compile(in)
	if err != nil {
		s.t.Fatalf("Compile: %v", err)
	}
	// The same decision in the memory every earlier compile used.
	in.Memory = &s.mem
	if again, err := binding.Compile(in); err != nil || !reflect.DeepEqual(again, out) {
		s.t.Fatalf("Compile %s in reused DecideMemory differs from a fresh one (err %v)", id, err)
	}
	for _, st := range out.Persist.Stamps {
		if simTrace != nil {
			simTrace("attributed stamp %x pred %x", st.Key[:3], st.Pred[:3])
		}
		if _, ok := s.stamps[st.Key]; !ok {
			s.stamps[st.Key] = &st
		}
	}
	if out.Persist.Record != nil {
		b.remembered = append(b.remembered, out.Persist.Record)
		s.retain(b)
	}
	s.st.compiles++
	return req, out
}

// retain applies the daemon's retention policy, with the design's minimum
// per branch, to every branch of the conversation.
func (s *simConv) retain(b *branch) {
	if len(b.remembered) == 0 {
		return
	}
	var rc []binding.RememberedCompile
	for _, br := range s.branches {
		for _, r := range br.remembered {
			rc = append(rc, binding.RememberedCompile{ID: r.ID, Seq: r.Seq, Branch: br.name, Accepted: r.Accepted, Record: true})
		}
	}
	own := ""
	if b.owner != nil {
		own = b.owner.ID
	}
	last := b.remembered[len(b.remembered)-1]
	next := binding.RememberedCompile{ID: last.ID, Seq: last.Seq, Branch: b.name, Accepted: last.Accepted, Record: true}
	plan := binding.Retain(simRetention, slices.Values(rc), next, own)
	forget := map[string]bool{}
	for _, id := range append(plan.DropRecords, plan.Forget...) {
		forget[id] = true // the simulator keeps no tombstones: a forgotten accept is counted as such
	}
	for _, br := range s.branches {
		kept := br.remembered[:0]
		for _, r := range br.remembered {
			if !forget[r.ID] {
				kept = append(kept, r)
			}
		}
		br.remembered = kept
	}
}

// simRetention is the daemon's default policy at the design's minimum per
// branch, so the simulator's forks run into it.
var simRetention = binding.Retention{PerBranch: binding.MinRemembered, PerConversation: binding.DefaultRetention.PerConversation}

func (s *simConv) record(b *branch, id string) (int, *binding.CompileRecord) {
	for i, r := range b.remembered {
		if r.ID == id {
			return i, r
		}
	}
	return -1, nil
}

func (s *simConv) accept(b *branch, pa pendingAccept) {
	if simTrace != nil {
		simTrace("accept %s kind %s", pa.id, pa.kind)
	}
	i, rec := s.record(b, pa.id)
	if rec == nil {
		s.st.accepts["forgotten"]++
		return
	}
	out, err := binding.Accept(binding.AcceptInput{Record: rec, Owner: b.owner, Engaged: s.engaged, Reply: pa.reply, Transformations: pa.transform, Stamps: s.stamps})
	if err != nil {
		s.t.Fatalf("Accept %s: %v", pa.id, err)
	}
	s.st.accepts[pa.kind]++
	if out.Noop {
		return
	}
	b.remembered[i] = out.Record
	if out.Owner {
		b.owner = out.Record
	}
	if out.Engage {
		s.engaged = true
	}
	for _, st := range out.Stamps {
		if _, ok := s.stamps[st.Key]; !ok {
			s.stamps[st.Key] = &st
		}
	}
	for _, r := range out.Releases {
		s.release(b.name, r)
	}
	for _, c := range out.Compactions {
		if s.compactions == nil {
			s.compactions = map[binding.Digest]binding.Compaction{}
		}
		if _, ok := s.compactions[c.Key]; !ok {
			s.compactions[c.Key] = c
		}
	}
}

// release records a release as the daemon does: on the branch it was made
// on (binding.SignatureBranch for a release by signature), in order.
func (s *simConv) release(branch string, r binding.Release) {
	s.releases = append(s.releases, binding.BranchRelease{Release: r, Branch: branch, Order: int64(len(s.releases) + 1)})
}

// reach is what binding.ReleasedOn decides b's releases from, as the
// daemon gathers it for a host that names forks with parent.
func (s *simConv) reach(b *branch) binding.ReachInput {
	in := binding.ReachInput{Branch: b.name, Releases: s.releases}
	var fork func(b *branch) *binding.Fork
	fork = func(b *branch) *binding.Fork {
		if b.parent == nil {
			return nil
		}
		return &binding.Fork{Branch: b.parent.name, UpTo: b.forkedAt, Releases: s.releases, Parent: fork(b.parent)}
	}
	if f := fork(b); f != nil {
		in.Forks = []*binding.Fork{f}
	}
	return in
}

// releasedBecause is the reason of the first release of key in force on b.
func (s *simConv) releasedBecause(b *branch, key binding.Digest) (string, bool) {
	if !binding.ReleasedOn(s.reach(b), []binding.Digest{key})[key] {
		return "", false
	}
	for _, r := range s.releases {
		if r.Key == key {
			return r.Reason, true
		}
	}
	return "", false
}

func (s *simConv) fork() {
	p := s.cur
	nb := &branch{name: fmt.Sprintf("fork%d", len(s.branches)), h: p.h.clone(), parent: p, forkedAt: int64(len(s.releases))}
	s.branches = append(s.branches, nb)
	s.cur = nb
	s.op("fork")
}

// ---------------------------------------------------------------------------
// One step: prepare, compile, rewrite, judge, check, accept.

func (s *simConv) runStep() {
	s.step++
	s.st.steps++
	c := s.c
	if len(s.branches) < 4 && pct(c, 3) {
		s.fork()
	} else if len(s.branches) > 1 && pct(c, 20) {
		s.cur = s.branches[c.Intn(len(s.branches))]
	}
	b := s.cur
	s.prepare(b)
	for attempt := 0; attempt < 4; attempt++ {
		body := s.body(b)
		req, out := s.compile(b, body)
		sent := out.Rewrite(body, req)
		res := s.j.Answer(judgetest.Call{Body: sent, Beta: s.beta}, s.replySpec())
		if simTrace != nil {
			simTrace("step %d branch %s engaged=%v model=%s body=%s\n strips=%+v\n kept=%d status=%d %s\n verdicts=%+v\n transformations=%v", s.step, b.name, s.engaged, req.Model, body, out.Strips, len(out.Kept), res.Status, res.Error, res.Blocks, res.Transformations)
		}
		retry := s.check(b, body, req, out, res)
		// Late accepts land between this compile and the next: after the
		// check, which must see bindery's state as the compile saw it.
		s.deliverAccepts(b)
		if res.Status == 200 {
			if lr := out.Record.LastRead; !lr.IsZero() {
				if _, ok := s.stamps[lr]; !ok {
					s.markBlind(res.Reply)
				}
			}
			s.afterReply(b, out, res)
			return
		}
		if !retry {
			return
		}
	}
	s.violation("retry-loop", "four refusals in a row")
}

func (s *simConv) deliverAccepts(b *branch) {
	var keep []pendingAccept
	for _, pa := range b.pending {
		if pa.due <= s.step {
			s.accept(b, pa)
		} else {
			keep = append(keep, pa)
		}
	}
	b.pending = keep
}

func (s *simConv) afterReply(b *branch, out *binding.Compiled, res judgetest.Result) {
	v, err := decodeJSON(res.Reply)
	if err != nil {
		s.t.Fatal(err)
	}
	b.h.msgs = append(b.h.msgs, v)
	for _, bv := range contentOf(v) {
		if blk := bv.(map[string]any); blk["type"] == "tool_use" {
			b.h.openTools = append(b.h.openTools, blk["id"].(string))
		}
	}
	var trs []binding.InputTransformation
	for _, tr := range res.Transformations {
		trs = append(trs, binding.InputTransformation{Type: tr.Type, Path: tr.Path, Reason: tr.Reason})
	}
	pa := pendingAccept{id: out.ID, reply: res.Reply, transform: trs}
	r := s.c.Intn(100)
	if s.dropThisStep && (r >= 65 || !s.beta) {
		s.unreportedDrop = true
	}
	switch {
	case r < 55:
		pa.kind = "now"
		s.accept(b, pa)
	case r < 65:
		pa.kind, pa.reply = "now-no-reply", nil
		s.accept(b, pa)
	case r < 78:
		pa.kind, pa.due = "late", s.step+1+s.c.Intn(3)
		b.pending = append(b.pending, pa)
	case r < 85:
		pa.kind, pa.due, pa.reply = "late-no-reply", s.step+1+s.c.Intn(3), nil
		b.pending = append(b.pending, pa)
	default:
		s.st.accepts["never"]++
	}
}

func (s *simConv) violation(kind, detail string) {
	// After the provider dropped a block (the first drop is itself counted:
	// a violation, or a pass-through before engagement), the replies that
	// follow may be stamped with a predecessor the provider did not use, in
	// two cases bindery cannot see through: under the reading where a
	// dropped block still counts as read (bindery subtracts reported drops,
	// a decision [INF]), and when the drop was never reported to it (no beta
	// header, or the accept came late or never, after attribution by prefix
	// had stamped the reply). Counted apart; a reported drop under the
	// documented reading still counts as a violation.
	switch {
	case s.providerDropped && s.reading.DroppedCountsAsRead:
		s.st.readingDependent["dropped-counts-as-read/"+kind]++
		return
	case s.unreportedDrop:
		s.st.readingDependent["unreported-drop/"+kind]++
		return
	}
	s.st.violations[kind]++
	if s.st.exampleKinds[kind] < 3 {
		s.st.exampleKinds[kind]++
		s.st.examples = append(s.st.examples, fmt.Sprintf("%s step %d [%s] %s: %s", s.id, s.step, s.reading, kind, detail))
	}
}

// check runs the invariants on one compile and the judge's answer. It
// returns true when the host should retry after a refusal it released.
func (s *simConv) check(b *branch, body []byte, req *binding.Request, out *binding.Compiled, res judgetest.Result) bool {
	facts, err := s.j.Facts(body)
	if err != nil {
		s.t.Fatalf("Facts: %v", err)
	}
	if simTrace != nil {
		for _, f := range facts {
			st, stamped := s.stamps[binding.Digest(f.Key)]
			simTrace("  fact %s key=%x pred=%x haspred=%v minter=%s valid=%v readable=%v stamped=%v stamp.pred=%x", f.Path, f.Key[:3], f.Pred[:3], f.HasPred, f.Minter, f.Valid(), f.Readable, stamped, st.Pred[:3])
		}
	}
	mx, err := s.j.Max(body)
	if err != nil {
		s.t.Fatalf("Max: %v", err)
	}
	target := "no-check"
	if s.j.RunsCheck(req.Model) {
		target = "checks"
	}
	s.st.max[target] += mx
	for _, v := range res.Blocks {
		if v.Fate == judgetest.FateRead {
			s.st.read[target]++
		}
	}
	at := map[binding.Pos]int{}
	for i, f := range facts {
		at[binding.Pos{Message: f.Path.Message, Block: f.Path.Block}] = i
	}
	strips := map[binding.Pos]binding.Strip{}
	for _, st := range out.Strips {
		strips[st.Pos] = st
		s.st.strips[string(st.Reason)]++
	}
	var kept []int
	for i, f := range facts {
		if _, ok := strips[binding.Pos{Message: f.Path.Message, Block: f.Path.Block}]; !ok {
			kept = append(kept, i)
		}
	}
	latest := -1
	for i := range req.Messages {
		if req.Messages[i].Role == "assistant" {
			latest = i
		}
	}
	var latestIdx []int
	for i, f := range facts {
		if f.Path.Message == latest {
			latestIdx = append(latestIdx, i)
		}
	}

	// Invariant 3: the latest assistant message's run is all or nothing.
	nStripped := 0
	for _, i := range latestIdx {
		if _, ok := strips[binding.Pos{Message: facts[i].Path.Message, Block: facts[i].Path.Block}]; ok {
			nStripped++
		}
	}
	if nStripped > 0 && nStripped < len(latestIdx) {
		s.violation("latest-partially-trimmed", fmt.Sprintf("%d of %d blocks of messages.%d stripped", nStripped, len(latestIdx), latest))
	}

	// Invariant 1: the judge never refuses a block bindery kept. Before the
	// conversation engages bindery passes every block through by design
	// (binding.md verdict 1): what the judge does to those is counted apart.
	flag := s.violation
	if !out.Engaged {
		flag = func(kind, detail string) { s.st.preEngagement[kind]++ }
	}
	toOrig := map[judgetest.Path]binding.Pos{}
	for _, k := range out.Record.Kept {
		toOrig[judgetest.Path{Message: k.Sent.Message, Block: k.Sent.Block}] = k.Orig
	}
	retry := false
	defer func() {
		s.dropThisStep = false
		for _, v := range res.Blocks {
			if v.Fate == judgetest.FateDroppedPrefix {
				s.providerDropped, s.dropThisStep = true, true
			}
		}
	}()
	for _, v := range res.Blocks {
		orig, ok := toOrig[v.Path]
		switch v.Fate {
		case judgetest.FateBadSignature:
			if ok && s.corrupt[v.Key] {
				s.st.expected400++
				// A bad signature is not a binding refusal: the host releases
				// that block by its signature and resends.
				s.release(binding.SignatureBranch, binding.SignatureRelease(sigOf(body, orig)))
				retry = true
				continue
			}
			flag("refused-bad-signature", fmt.Sprintf("%s (orig %s): %s", v.Path, orig.Path(), res.Error))
		case judgetest.FateRefused:
			flag("refused", fmt.Sprintf("%s (orig %s): %s", v.Path, orig.Path(), res.Error))
			if ok {
				rels, err := binding.ReleaseAtPath(out.Record, v.Path.String())
				if err == nil {
					for _, r := range rels {
						s.release(b.name, r)
					}
					retry = true
				}
			}
		case judgetest.FateDroppedPrefix:
			flag("dropped-by-provider", fmt.Sprintf("%s (orig %s) cause %s", v.Path, orig.Path(), v.Cause))
		case judgetest.FateAllowed:
			flag("mismatch-allowed", fmt.Sprintf("%s (orig %s) cause %s", v.Path, orig.Path(), v.Cause))
		case judgetest.FateDroppedModel:
			if out.Binds {
				flag("kept-unreadable", fmt.Sprintf("%s (orig %s) minted by %s", v.Path, orig.Path(), v.Minter))
			}
		}
	}
	if res.Status != 200 && !retry && !strings.Contains(res.Error, "Invalid `") {
		flag("refused-other", res.Error)
	}

	// Invariant 2: no strip of a block the judge would accept, beyond the allowed causes.
	for _, st := range out.Strips {
		i, ok := at[st.Pos]
		if !ok {
			s.violation("strip-of-no-block", st.Pos.Path())
			continue
		}
		f := facts[i]
		if !f.Valid() {
			s.st.necessary[string(st.Reason)]++
			continue
		}
		switch st.Reason {
		case binding.ReasonGap:
			if cause, forced := gapForced(facts, kept, latestIdx, i); forced {
				s.st.forced[cause]++
			} else if s.unstamped(facts, append([]int{i}, kept...)) {
				// Without a stamp bindery can only assume the block before it
				// in the request is its predecessor (no accept, no attribution:
				// an unattributable reply, on a target that does not bind).
				s.st.forced["unattributable (gap on an assumed predecessor)"]++
			} else {
				s.violation("unforced-gap", st.Pos.Path())
			}
		case binding.ReasonNoStamp:
			if out.FirstAfterEngagement {
				s.st.forced["first-compile-after-engagement"]++
			} else {
				s.st.forced["unattributable"]++
			}
		case binding.ReasonReleased:
			cause, ok := s.releasedBecause(b, st.Key)
			switch {
			case !ok:
				s.violation("released-without-release", st.Pos.Path())
			case cause == string(binding.ReasonSeedChanged) || cause == string(binding.ReasonModelUnreadable) || cause == string(binding.ReasonReleased):
				s.violation("unjustified-release", fmt.Sprintf("%s released for %s", st.Pos.Path(), cause))
			default:
				s.st.forced["released/"+cause]++
			}
		case binding.ReasonModelUnreadable:
			if s.readingConservativeRead(req.Model) {
				s.st.conservative["model-unreadable (unlisted read)"]++
			} else {
				s.violation("unforced-model-unreadable", fmt.Sprintf("%s minted by %s", st.Pos.Path(), f.Minter))
			}
		default:
			if !f.Checked {
				s.st.conservative[string(st.Reason)+" (target not checking under this reading)"]++
			} else {
				s.violation("unforced-"+string(st.Reason), fmt.Sprintf("%s minted by %s", st.Pos.Path(), f.Minter))
			}
		}
	}
	return retry
}

// unstamped reports whether any of the blocks has no stamp yet, or was
// minted after a request whose last kept block bindery had no stamp for.
func (s *simConv) unstamped(facts []judgetest.BlockFacts, idx []int) bool {
	for _, i := range idx {
		if _, ok := s.stamps[binding.Digest(facts[i].Key)]; !ok || s.blind[facts[i].Key] {
			return true
		}
	}
	return false
}

func (s *simConv) markBlind(reply []byte) {
	v, err := decodeJSON(reply)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, bv := range contentOf(v) {
		b := bv.(map[string]any)
		switch b["type"] {
		case "thinking":
			s.blind[judgetest.KeyOf(b["signature"].(string))] = true
		case "redacted_thinking":
			s.blind[judgetest.KeyOf(b["data"].(string))] = true
		}
	}
}

// readingConservativeRead: the judge reads the block only under a reading of
// an [INF] read set (Fable 5.2 reading older models, Sonnet 5.5's set).
func (s *simConv) readingConservativeRead(model string) bool {
	r := s.reading
	return (r.Fable52ReadsOlder && (strings.Contains(model, "fable-5-2") || strings.Contains(model, "mythos-5-2"))) ||
		(r.Sonnet55ReadsOlder && strings.Contains(model, "sonnet-5-5"))
}

// gapForced reports whether keeping block b as well (or, for a block of the
// latest assistant message, that message's whole run) would break the run
// rule or the latest-message rule, or would keep a block the judge refuses.
func gapForced(facts []judgetest.BlockFacts, kept, latest []int, b int) (string, bool) {
	inLatest := false
	for _, i := range latest {
		if i == b {
			inLatest = true
		}
	}
	if !runValid(facts, union(kept, []int{b}), latest) {
		if inLatest && len(latest) > 1 {
			all := union(kept, latest)
			for _, i := range latest {
				if !facts[i].Valid() {
					return "latest-message", true
				}
			}
			if runValid(facts, all, latest) {
				return "", false
			}
			return "latest-message", true
		}
		return "run-rule", true
	}
	return "", false
}

func union(a, b []int) []int {
	m := map[int]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		m[x] = true
	}
	out := make([]int, 0, len(m))
	for x := range m {
		out = append(out, x)
	}
	sort.Ints(out)
	return out
}

// runValid: the blocks of set, in request order, form one run (each read
// block names the previous read one as its predecessor; the first may name
// any), and the latest assistant message's blocks are all in or all out.
func runValid(facts []judgetest.BlockFacts, set, latest []int) bool {
	var prev *judgetest.BlockFacts
	in := map[int]bool{}
	for _, i := range set {
		in[i] = true
		f := &facts[i]
		if !f.Readable {
			continue
		}
		if prev != nil && (!f.HasPred || f.Pred != prev.Key) {
			return false
		}
		prev = f
	}
	n := 0
	for _, i := range latest {
		if in[i] {
			n++
		}
	}
	return n == 0 || n == len(latest)
}

// sigOf returns the signature (or data) of the block at p in body.
func sigOf(body []byte, p binding.Pos) string {
	v, err := decodeJSON(body)
	if err != nil {
		panic(err)
	}
	b := contentOf(v.(map[string]any)["messages"].([]any)[p.Message])[p.Block].(map[string]any)
	if s, ok := b["signature"].(string); ok {
		return s
	}
	s, _ := b["data"].(string)
	return s
}

// simTrace, when set, logs every step (SIM_CONV replays).
var simTrace func(format string, args ...any)

// runConversation drives one conversation to its end.
func runConversation(t testing.TB, c chooser, st *simStats, n int, reading judgetest.Reading, maxSteps int) {
	s := newSimConv(t, c, st, n, reading)
	st.conversations++
	for i := 0; i < maxSteps && !c.Done(); i++ {
		s.runStep()
	}
	// Late accepts that never came due: deliver them (the host caught up).
	for _, b := range s.branches {
		s.step += 10
		s.deliverAccepts(b)
	}
}

// ---------------------------------------------------------------------------

func TestSimulatedConversations(t *testing.T) {
	if n, err := strconv.Atoi(os.Getenv("SIM_CONV")); err == nil {
		// Replay one conversation with a trace: SIM_CONV=310 go test -run TestSimulatedConversations -v
		st := newSimStats()
		c := randChooser{rand.New(rand.NewPCG(uint64(n), 0x5eed))}
		simTrace = t.Logf
		defer func() { simTrace = nil }()
		runConversation(t, c, st, n, judgetest.Readings()[n%len(judgetest.Readings())], 24)
		t.Logf("%s\n  %s", st, strings.Join(st.examples, "\n  "))
		return
	}
	conversations, steps := 1024, 16
	if testing.Short() {
		conversations, steps = 256, 16
	}
	// SIM_SCALE=N runs N times as many conversations, 1.5x as long (deeper runs by hand).
	if k, err := strconv.Atoi(os.Getenv("SIM_SCALE")); err == nil && k > 0 {
		conversations, steps = conversations*k, steps*3/2
	}
	readings := judgetest.Readings()
	total := newSimStats()
	const workers = 2
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			st := newSimStats()
			for n := w; n < conversations; n += workers {
				c := randChooser{rand.New(rand.NewPCG(uint64(n), 0x5eed))}
				runConversation(t, c, st, n, readings[n%len(readings)], steps)
			}
			total.merge(st)
		}(w)
	}
	wg.Wait()
	t.Logf("simulation:\n%s", total)
	if len(total.violations) > 0 {
		t.Errorf("invariant violations:%s\nexamples:\n  %s", fmtCounts(total.violations), strings.Join(total.examples, "\n  "))
	}
	// The simulation must exercise what it claims to.
	for _, op := range []string{"stub-tool-result", "heartbeat", "system-changed", "model-switch", "fork", "compaction",
		"prune-before-compaction", "summarize-keep-tail", "host-drops-oldest-thinking", "host-corrupts-signature", "reminder"} {
		if total.ops[op] == 0 && !testing.Short() {
			t.Errorf("op %s never happened", op)
		}
	}
	for _, k := range []string{"now", "now-no-reply", "late", "late-no-reply", "never"} {
		if total.accepts[k] == 0 {
			t.Errorf("accept kind %s never happened", k)
		}
	}
	if !testing.Short() && len(total.readings) != len(readings) {
		t.Errorf("ran %d readings of %d", len(total.readings), len(readings))
	}
}

func FuzzConversation(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(bytes.Repeat([]byte{7, 200, 13, 99, 1, 250, 42}, 60))
	f.Add(bytes.Repeat([]byte{255, 0, 128, 3}, 120))
	readings := judgetest.Readings()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		st := newSimStats()
		c := &byteChooser{b: data[1:]}
		runConversation(t, c, st, 0, readings[int(data[0])%len(readings)], 40)
		if len(st.violations) > 0 {
			t.Fatalf("violations:%s\n  %s", fmtCounts(st.violations), strings.Join(st.examples, "\n  "))
		}
	})
}

// fixedChooser always answers 0 (the first choice) and never runs out.
type fixedChooser struct{}

func (fixedChooser) Intn(int) int { return 0 }
func (fixedChooser) Done() bool   { return false }

// TestJudgedSteadyState drives scripted conversations through bindery and
// the judge: after the first accept, a plain append-only conversation keeps
// every thinking block the judge accepts, however its replies are accepted
// (with the reply, without it, late, or never: attribution by prefix), and
// with cache markers moving and a one-turn heartbeat system prompt.
func TestJudgedSteadyState(t *testing.T) {
	for _, how := range []string{"now", "now-no-reply", "late", "never"} {
		t.Run(how, func(t *testing.T) {
			st := newSimStats()
			s := newSimConv(t, fixedChooser{}, st, 0, judgetest.Documented())
			s.behavior, s.beta = "", false
			s.j = judgetest.New(judgetest.Options{Reading: judgetest.Documented(), NewAccount: true, Secret: []byte("steady")})
			b := s.cur
			b.h.model = "claude-fable-5-1"
			var lateQueue []pendingAccept
			for turn := 1; turn <= 8; turn++ {
				s.step = turn
				b.h.heartbeat = turn == 5
				b.h.msgs = append(b.h.msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("turn %d", turn)}}})
				s.moveCacheMarker(b.h)
				body := s.body(b)
				req, out := s.compile(b, body)
				res := s.j.Answer(judgetest.Call{Body: out.Rewrite(body, req)}, []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprintf("t%d", turn)}, {Type: "text", Text: "ok"}})
				if res.Status != 200 {
					t.Fatalf("turn %d: %d %s", turn, res.Status, res.Error)
				}
				s.check(b, body, req, out, res)
				if len(st.violations) > 0 {
					t.Fatalf("turn %d: violations %v: %v", turn, st.violations, st.examples)
				}
				// The heartbeat (turn 5) reads no earlier thinking (seed-changed,
				// not released); its own reply (messages.9) is bound to the
				// heartbeat's system prompt from then on; the rest comes back.
				wantStrips, wantRead := []string{}, turn-1
				switch {
				case turn == 5:
					wantStrips, wantRead = []string{"messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed", "messages.5.content.0 seed-changed", "messages.7.content.0 seed-changed"}, 0
				case turn > 5:
					wantStrips, wantRead = []string{"messages.9.content.0 seed-changed"}, turn-2
				}
				got := []string{}
				for _, x := range out.Strips {
					got = append(got, x.Pos.Path()+" "+string(x.Reason))
				}
				if fmt.Sprint(got) != fmt.Sprint(wantStrips) || len(res.Read()) != wantRead {
					t.Errorf("turn %d: strips %v read %d, want %v read %d", turn, got, len(res.Read()), wantStrips, wantRead)
				}
				var v any
				v, _ = decodeJSON(res.Reply)
				b.h.msgs = append(b.h.msgs, v)
				pa := pendingAccept{id: out.ID, reply: res.Reply, kind: how}
				switch {
				case turn == 1:
					pa.kind = "now"
					s.accept(b, pa)
				case how == "now":
					s.accept(b, pa)
				case how == "now-no-reply":
					pa.reply = nil
					s.accept(b, pa)
				case how == "late":
					for _, q := range lateQueue {
						s.accept(b, q)
					}
					lateQueue = []pendingAccept{pa}
				}
			}
			if st.forced["unattributable"] != 0 {
				t.Errorf("%d strips for want of a stamp: attribution by prefix did not stamp the unaccepted replies", st.forced["unattributable"])
			}
		})
	}
}

// TestJudgedOnDemandCompactionKeepTail: an on-demand compaction block sent in
// place of the messages it summarizes, with the later turns kept. The
// research (preserved-thinking.md 1.1, 6, scenario 36: [DOC], probe [OBS])
// and the provider's compaction-thinking-blocks page say the kept turns'
// thinking stays valid. The compaction request goes through bindery like any
// request, and its accept (the reply is the block) records what the block
// replaced, so the kept turns' thinking is kept: no strip, no violation, in
// every mode the judge models.
func TestJudgedOnDemandCompactionKeepTail(t *testing.T) {
	for _, mode := range []struct {
		behavior string
		beta     bool
	}{{"", false}, {"error", true}, {"drop_block", true}} {
		for _, r := range judgetest.Readings() {
			if r.Scope != judgetest.Documented().Scope || r.ThinkingEditAccepted {
				continue // neither touches compaction; keep the run short
			}
			for _, variant := range []string{"", "heartbeat-compaction"} {
				t.Run(mode.behavior+"/"+variant+"/"+r.String(), func(t *testing.T) {
					judgedKeepTail(t, r, mode.behavior, mode.beta, variant)
				})
			}
		}
	}
}

// judgedKeepTail: variant "heartbeat-compaction" sends the compaction
// request with another system prompt, which breaks the kept turns' thinking
// (the page's conditions): bindery must strip it, and only it.
func judgedKeepTail(t *testing.T, r judgetest.Reading, behavior string, beta bool, variant string) {
	st := newSimStats()
	s := newSimConv(t, fixedChooser{}, st, 0, r)
	s.behavior, s.beta = behavior, beta
	s.j = judgetest.New(judgetest.Options{Reading: r, NewAccount: true, Secret: []byte("keep-tail")})
	b := s.cur
	b.h.model = "claude-fable-5-1"
	for turn := 1; turn <= 6; turn++ {
		s.step = turn
		if turn == 5 {
			// Messages 0..3 (two turns) summarized; turns 3 and 4 kept.
			full := b.h.msgs
			b.h.msgs = full[:4]
			b.h.heartbeat = variant == "heartbeat-compaction"
			body := s.body(b)
			b.h.heartbeat = false
			req, out := s.compile(b, body)
			if len(out.Strips) != 0 && variant == "" {
				t.Fatalf("compaction request: strips %v", out.Strips)
			}
			res := s.j.Compact(judgetest.Call{Body: out.Rewrite(body, req), Beta: s.beta}, "Summary of turns 1 and 2.")
			if res.Status != 200 {
				t.Fatalf("compaction request: %d %s", res.Status, res.Error)
			}
			s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, kind: "now"})
			if len(s.compactions) != 1 {
				t.Fatalf("the accept recorded %d compactions, want 1", len(s.compactions))
			}
			v, _ := decodeJSON(res.Reply)
			b.h.msgs = append([]any{v}, full[4:]...)
		}
		b.h.msgs = append(b.h.msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", turn)})
		body := s.body(b)
		req, out := s.compile(b, body)
		wantStrips := 0
		if variant == "heartbeat-compaction" {
			wantStrips = 2 // the kept turns' thinking: prefix-changed, then released (the provider refuses it from now on)
		}
		if turn >= 5 && len(out.Strips) != wantStrips {
			t.Fatalf("turn %d: strips %v after the swap, want %d", turn, out.Strips, wantStrips)
		}
		res := s.j.Answer(judgetest.Call{Body: out.Rewrite(body, req), Beta: s.beta}, []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprint(turn)}, {Type: "text", Text: "ok"}})
		if res.Status != 200 {
			t.Fatalf("turn %d: %d %s", turn, res.Status, res.Error)
		}
		if len(res.Transformations) != 0 {
			t.Fatalf("turn %d: provider transformations %v", turn, res.Transformations)
		}
		wantRead := turn - 3 // kept turns 3, 4 and every later one
		if variant == "heartbeat-compaction" {
			wantRead = turn - 5 // only those minted after the swap
		}
		if turn >= 5 && len(res.Read()) != wantRead {
			t.Fatalf("turn %d: the model read %d thinking blocks, want %d", turn, len(res.Read()), wantRead)
		}
		s.check(b, body, req, out, res)
		for kind, n := range st.violations {
			t.Fatalf("turn %d: %d violations of kind %s: %v", turn, n, kind, st.examples)
		}
		v, _ := decodeJSON(res.Reply)
		b.h.msgs = append(b.h.msgs, v)
		s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, kind: "now"})
	}
}

// TestJudgedCompactionsInARow: two on-demand compactions in a row, the
// second summarizing the first block and the first kept message: the turns
// kept through both keep their thinking (issue 31; research 6: the
// conditions hold for every compaction in the row, which the judge checks),
// in every mode. The second compaction request sent under another system
// prompt breaks every block minted before it: stripped, and the judge
// agrees.
func TestJudgedCompactionsInARow(t *testing.T) {
	for _, mode := range []struct {
		behavior string
		beta     bool
	}{{"", false}, {"error", true}, {"drop_block", true}} {
		for _, variant := range []string{"", "heartbeat-second"} {
			t.Run(mode.behavior+"/"+variant, func(t *testing.T) {
				judgedInARow(t, judgetest.Documented(), mode.behavior, mode.beta, variant)
			})
		}
	}
}

func judgedInARow(t *testing.T, r judgetest.Reading, behavior string, beta bool, variant string) {
	st := newSimStats()
	s := newSimConv(t, fixedChooser{}, st, 0, r)
	s.behavior, s.beta = behavior, beta
	s.j = judgetest.New(judgetest.Options{Reading: r, NewAccount: true, Secret: []byte("in-a-row")})
	b := s.cur
	b.h.model = "claude-fable-5-1"
	compact := func(upto int, heartbeat bool, summary string) {
		full := b.h.msgs
		b.h.msgs = full[:upto]
		b.h.heartbeat = heartbeat
		body := s.body(b)
		b.h.heartbeat = false
		req, out := s.compile(b, body)
		res := s.j.Compact(judgetest.Call{Body: out.Rewrite(body, req), Beta: s.beta}, summary)
		if res.Status != 200 {
			t.Fatalf("compaction request: %d %s", res.Status, res.Error)
		}
		s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, kind: "now"})
		v, _ := decodeJSON(res.Reply)
		b.h.msgs = append([]any{v}, full[upto:]...)
	}
	for turn := 1; turn <= 8; turn++ {
		s.step = turn
		switch turn {
		case 5:
			compact(4, false, "Summary of turns 1 and 2.") // [C1, u3, a3, u4, a4]
		case 7:
			compact(2, variant == "heartbeat-second", "Summary of turns 1 to 3, asked.") // [C2, a3, u4, a4, u5, a5, u6, a6]
		}
		b.h.msgs = append(b.h.msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", turn)})
		body := s.body(b)
		req, out := s.compile(b, body)
		res := s.j.Answer(judgetest.Call{Body: out.Rewrite(body, req), Beta: s.beta}, []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprint(turn)}, {Type: "text", Text: "ok"}})
		if res.Status != 200 || len(res.Transformations) != 0 {
			t.Fatalf("turn %d: %d %s %v", turn, res.Status, res.Error, res.Transformations)
		}
		wantRead := turn - 1
		switch {
		case turn >= 5 && turn < 7:
			wantRead = turn - 3 // kept turns 3 and 4, and every later one
		case turn >= 7 && variant == "":
			wantRead = turn - 3 // the same, through both compactions
		case turn >= 7:
			wantRead = turn - 7 // only those minted after the second swap: every earlier one was minted under another system than it
		}
		if len(res.Read()) != wantRead {
			t.Fatalf("turn %d: the model read %d thinking blocks, want %d (strips %v)", turn, len(res.Read()), wantRead, out.Strips)
		}
		s.check(b, body, req, out, res)
		for kind, n := range st.violations {
			t.Fatalf("turn %d: %d violations of kind %s: %v", turn, n, kind, st.examples)
		}
		v, _ := decodeJSON(res.Reply)
		b.h.msgs = append(b.h.msgs, v)
		s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, kind: "now"})
	}
}

// TestJudgedProviderDropSubtracted: before engagement bindery passes an
// edited history through; with drop_block the provider drops the stale block
// and reports it. The accept must take the dropped block out of what the
// model read, so the reply's stamp names the block the model really read
// last (the [INF] decision, under the documented reading), and the next
// request keeps both.
func TestJudgedProviderDropSubtracted(t *testing.T) {
	st := newSimStats()
	s := newSimConv(t, fixedChooser{}, st, 0, judgetest.Documented())
	s.behavior, s.beta = "drop_block", true
	s.j = judgetest.New(judgetest.Options{Reading: judgetest.Documented(), NewAccount: true, Secret: []byte("drop")})
	b := s.cur
	b.h.model = "claude-fable-5-1"
	for turn := 1; turn <= 4; turn++ {
		s.step = turn
		if turn == 3 {
			msgOf(b.h.msgs[2])["content"] = "turn 2, edited" // between A (messages.1) and B (messages.3)
		}
		b.h.msgs = append(b.h.msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", turn)})
		body := s.body(b)
		req, out := s.compile(b, body)
		res := s.j.Answer(judgetest.Call{Body: out.Rewrite(body, req), Beta: true}, []judgetest.ReplyBlock{{Type: "thinking", Text: fmt.Sprint(turn)}, {Type: "text", Text: "ok"}})
		if res.Status != 200 {
			t.Fatalf("turn %d: %d %s", turn, res.Status, res.Error)
		}
		var strips []string
		for _, x := range out.Strips {
			strips = append(strips, x.Pos.Path()+" "+string(x.Reason))
		}
		switch turn {
		case 3:
			if len(res.Transformations) != 1 || res.Transformations[0].Path != "messages.3.content.0" {
				t.Fatalf("turn 3: the provider should drop B only: %v", res.Transformations)
			}
		case 4:
			if fmt.Sprint(strips) != "[messages.3.content.0 released]" || len(res.Read()) != 2 || len(res.Transformations) != 0 {
				t.Fatalf("turn 4: strips %v, read %v, transformations %v; want B released and A, C read", strips, res.Read(), res.Transformations)
			}
		}
		v, _ := decodeJSON(res.Reply)
		b.h.msgs = append(b.h.msgs, v)
		if turn >= 3 {
			var trs []binding.InputTransformation
			for _, tr := range res.Transformations {
				trs = append(trs, binding.InputTransformation{Type: tr.Type, Path: tr.Path, Reason: tr.Reason})
			}
			s.accept(b, pendingAccept{id: out.ID, reply: res.Reply, transform: trs, kind: "now"})
		}
	}
}
