// Package judgetest is a model of the Anthropic Messages API's thinking-block
// binding, written from shared/research/preserved-thinking.md alone, for use
// as the judge of bindery's decisions in tests. It mints signatures that bind
// each thinking block to its prefix, its predecessor and its model, and it
// judges requests the way the research says the API does: the model check,
// the prefix check, the run rule, the latest-assistant-message rule, and the
// four outcomes (enforced 400, drop_block, record-only, no check).
//
// It deliberately shares no code with package binding: it is a second,
// independent reading of the same rules. Test-only (the "test" suffix, as in
// net/http/httptest): no package's own code imports it, which
// binding/deps_test.go checks.
package judgetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// Options configure a Judge.
type Options struct {
	Reading Reading
	// NewAccount: the account was created on or after 2026-08-31 00:00 UTC,
	// so Fable 5.1 / Opus 5.5 enforce by default (research 1.6).
	NewAccount bool
	// Secret keys the signatures' HMAC; nil uses a fixed test key.
	Secret []byte
	// StringIsTextBlock: a message's string content is read as one text
	// block ("content":"x" is [{"type":"text","text":"x"}]) [INF]. The docs
	// say only values are compared and call string content shorthand for a
	// text block; Claude Code (2.1.332) flips the message carrying its
	// cache breakpoint between the two forms every turn and works on
	// enforced accounts, which it could not if the flip failed the check
	// (research/gateways.md, 2.3). Off, the judge holds bindery to the
	// stricter reading its own canonical form takes.
	StringIsTextBlock bool
}

// Judge plays the provider. It is safe for concurrent use.
type Judge struct {
	mu         sync.Mutex
	cache      map[string]*msgInfo
	heads      map[string]headInfo
	opened     map[string]record   // signatures that opened, by their exact text
	comps      map[[32]byte]record // compaction blocks met, by key: the earlier ones of a row
	reading    Reading
	newAccount bool
	stringText bool
	secret     []byte
	replies    atomic.Uint64
}

// New returns a judge under the given options.
func New(o Options) *Judge {
	s := o.Secret
	if s == nil {
		s = []byte("judge: fixed test secret")
	}
	return &Judge{cache: map[string]*msgInfo{}, heads: map[string]headInfo{}, opened: map[string]record{}, comps: map[[32]byte]record{}, reading: o.Reading, newAccount: o.NewAccount, stringText: o.StringIsTextBlock, secret: append([]byte(nil), s...)}
}

// Reading returns the reading the judge runs under.
func (j *Judge) Reading() Reading { return j.reading }

// RunsCheck reports whether the model runs the prefix check under the judge's reading.
func (j *Judge) RunsCheck(modelName string) bool {
	m, ok := lookup(modelName)
	return ok && j.reading.runsCheck(m)
}

// Reads reports whether reader can read blocks minted by minter.
func (j *Judge) Reads(reader, minter string) bool {
	r, ok1 := lookup(reader)
	m, ok2 := lookup(minter)
	return ok1 && ok2 && j.reading.reads(r, m)
}

// Call is one request as sent.
type Call struct {
	Body []byte
	// Beta: the anthropic-beta header carries thinking-binding-controls-2026-08-01.
	Beta bool
	// Account names the account the request is authenticated as ("" is
	// one account like any other). Blocks of an account-bound model
	// (Sonnet 5.5, Haiku 5.5: research 1.5, 3) minted in another account
	// are dropped unread, reported as organization_binding_mismatch.
	Account string
}

// Mode is how the request's prefix failures are treated.
type Mode uint8

const (
	ModeNoCheck  Mode = iota // the model does not run the prefix check (NB)
	ModeEnforced             // 400 at the first failing block (ENF)
	ModeDrop                 // failing blocks removed and reported (DROP)
	ModeRecord               // failing blocks shown to the model and reported with the beta (REC)
)

func (m Mode) String() string {
	return [...]string{"no-check", "enforced", "drop_block", "record-only"}[m]
}

// Fate is what happened to one thinking block of a request.
type Fate uint8

const (
	FateRead           Fate = iota // passed and read by the model
	FateAllowed                    // failed the check, read anyway (thinking_mismatch_allowed)
	FateDroppedModel               // unreadable by the target model (model_binding_mismatch)
	FateDroppedPrefix              // failed the check, removed (prefix_binding_mismatch)
	FateRefused                    // the block the 400 names
	FateBadSignature               // tampered, foreign or empty signature: a 400 in every mode
	FateUnjudged                   // the request failed before the judge reached it
	FateDroppedAccount             // minted in another account by an account-bound model (organization_binding_mismatch)
)

func (f Fate) String() string {
	return [...]string{"read", "mismatch-allowed", "dropped-model", "dropped-prefix", "refused", "bad-signature", "unjudged", "dropped-account"}[f]
}

// Cause says why a block failed the prefix check.
type Cause uint8

const (
	CauseNone        Cause = iota
	CauseSystem            // top-level system differs
	CauseTools             // non-deferred tools differ
	CauseMessages          // earlier message content differs
	CausePredecessor       // the block read just before it is not the one it was minted after
	CauseUnbound           // the block carries no conversation record
	CauseScope             // removed with an earlier failing block by drop_block's scope
)

func (c Cause) String() string {
	return [...]string{"", "system", "tools", "messages", "predecessor", "unbound", "scope"}[c]
}

// Path addresses a content block: messages.Message.content.Block.
type Path struct{ Message, Block int }

func (p Path) String() string { return fmt.Sprintf("messages.%d.content.%d", p.Message, p.Block) }

// BlockVerdict is the judge's verdict on one thinking block of a request.
type BlockVerdict struct {
	Path   Path
	Key    [32]byte // SHA-256 of the signature (thinking) or data (redacted)
	Minter string   // minting model ("" when the signature did not open)
	Fate   Fate
	Cause  Cause
}

// Transformation is one input_transformations entry.
type Transformation struct {
	Type   string `json:"type"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result is the judge's answer to one request.
type Result struct {
	Status    int // 200, 400 or 404
	Error     string
	ErrorCode string // error.details.error_code when the API gives one
	Mode      Mode
	// Transformations is nil when the beta header was absent (the field is
	// absent from the response), and non-nil (possibly empty) otherwise.
	Transformations []Transformation
	Blocks          []BlockVerdict  // every thinking block of the request, in order
	Reply           json.RawMessage // the assistant message, from Answer on a 200
	lastRead        *[32]byte
}

// Read returns the paths of the thinking blocks the model read.
func (r Result) Read() []Path {
	var out []Path
	for _, b := range r.Blocks {
		if b.Fate == FateRead || b.Fate == FateAllowed {
			out = append(out, b.Path)
		}
	}
	return out
}

// Refused reports whether the request was refused (any 4xx).
func (r Result) Refused() bool { return r.Status != 200 }

// site is one thinking block found while walking the request.
type site struct {
	path  Path
	kind  string // "thinking" or "redacted_thinking"
	sig   string
	text  any // the "thinking" field (thinking blocks)
	chain chain
	rec   record
	ok    bool      // the signature opened
	comp  compState // the compaction block in effect before it, if any
}

// compState is the most recent compaction block of a request walk.
type compState struct {
	on     bool
	key    [32]byte // keyOf its signature
	rec    record
	merged bool   // the first message after it has the last summarized message's role, or is role "system": the API merges it into the summarized messages
	first  string // the role of the first message after it ("": none)
}

// keptHolds reports whether thinking minted before the compaction block c
// was swapped in (a kept turn) survives the swap, by the conditions of the
// provider's compaction-thinking-blocks page, for every compaction since
// the block was minted (research 6: "this applies to every compaction in
// the chain"): each compaction request ran on a model with preserved
// thinking (read: one whose blocks carry a conversation record), system
// and non-deferred tools were the same on it as when the block was minted,
// and the first message kept after it was not merged into the summarized
// ones. A row is followed back through each compaction request's own
// first block (record.Under).
func (j *Judge) keptHolds(c compState, r record) bool {
	for range 64 {
		if !c.rec.Bound || c.merged || c.rec.System != r.System || c.rec.Tools != r.Tools {
			return false
		}
		under := c.rec.Under
		if under == ([32]byte{}) {
			return r.Under == under // minted before any compaction of the row
		}
		if r.Under == under {
			return true // minted with the earlier block in place: its chain restarts there
		}
		j.mu.Lock()
		prev, ok := j.comps[under]
		j.mu.Unlock()
		if !ok {
			return false
		}
		merged := c.rec.UnderMerged
		if c.rec.UnderOpen {
			// nothing followed the earlier block in the compaction request:
			// the first message kept after this block followed it too
			merged = c.first == "" || c.first == prev.LastRole || c.first == "system"
		}
		c = compState{on: true, key: under, rec: prev, merged: merged, first: c.first}
	}
	return false
}

// chainOK: the block's message chain holds, including across compactions.
func (j *Judge) chainOK(s site) bool {
	if s.rec.Chain != s.chain {
		return false
	}
	return !s.comp.on || s.rec.Under == s.comp.key || j.keptHolds(s.comp, s.rec)
}

// parsed is a request walked once.
type parsed struct {
	model    model
	behavior string // "", "error" or "drop_block"
	hasBB    bool
	system   [32]byte
	tools    [32]byte
	sites    []site
	end      chain // the chain after every message
	latest   int   // index of the latest assistant message, -1 if none
	lastRole string
	comp     compState // the most recent compaction block
	// manual: thinking.type is "enabled"; open: the request continues a
	// tool-use cycle (research 4: every message after the latest assistant
	// message is a user message of tool_result blocks only, or a role
	// "system" message, and there is at least one tool_result message).
	manual, open bool
}

func fail(status int, msg string) Result { return Result{Status: status, Error: msg} }

// msgInfo is what one message contributes to the walk, independent of its
// position: the judge caches it by the message's raw bytes, since a
// conversation resends the same messages on every request.
type msgInfo struct {
	ok     bool // the message is an object
	role   string
	frame  [32]byte
	blocks []blockInfo
}

type blockInfo struct {
	kind    string   // the block's "type"
	digest  [32]byte // value digest without marker (non-thinking blocks)
	sig     string   // thinking: signature; redacted: data; compaction: signature
	text    any      // thinking: the "thinking" field
	content [32]byte // compaction: digest of its content
}

const maxCachedMessages = 1 << 14

// headInfo is the digests of system and tools, cached by their raw bytes.
type headInfo struct{ system, tools [32]byte }

func (j *Judge) head(top map[string][]byte) (headInfo, bool) {
	sysRaw, hasSys := top["system"]
	toolsRaw, hasTools := top["tools"]
	key := fmt.Sprintf("%v%d:%s%v%s", hasSys, len(sysRaw), sysRaw, hasTools, toolsRaw)
	j.mu.Lock()
	hd, ok := j.heads[key]
	j.mu.Unlock()
	if ok {
		return hd, true
	}
	m := map[string]any{}
	if hasSys {
		v, err := decode(sysRaw)
		if err != nil {
			return hd, false
		}
		m["system"] = v
	}
	if hasTools {
		v, err := decode(toolsRaw)
		if err != nil {
			return hd, false
		}
		m["tools"] = v
	}
	hd = headInfo{systemDigest(m), toolsDigest(m)}
	j.mu.Lock()
	if len(j.heads) >= 256 {
		clear(j.heads)
	}
	j.heads[key] = hd
	j.mu.Unlock()
	return hd, true
}

func (j *Judge) message(raw []byte) *msgInfo {
	j.mu.Lock()
	info, ok := j.cache[string(raw)]
	j.mu.Unlock()
	if ok {
		return info
	}
	info = &msgInfo{}
	v, err := decode(raw)
	if err != nil {
		return info // not cached: invalid JSON is refused, not remembered
	}
	if m, isObj := v.(map[string]any); err == nil && isObj {
		info.ok = true
		info.role, _ = m["role"].(string)
		if s, isStr := m["content"].(string); isStr && j.stringText {
			m["content"] = []any{map[string]any{"type": "text", "text": s}}
		}
		info.frame = digestOf("judge/frame", frame(m))
		content, _ := m["content"].([]any)
		for _, bv := range content {
			b, _ := bv.(map[string]any)
			bi := blockInfo{}
			if b != nil {
				bi.kind, _ = b["type"].(string)
			}
			switch {
			case bi.kind == "thinking":
				bi.sig, _ = b["signature"].(string)
				bi.text = b["thinking"]
			case bi.kind == "redacted_thinking":
				bi.sig, _ = b["data"].(string)
			case bi.kind == "compaction":
				bi.sig, _ = b["signature"].(string)
				bi.content = digestOf("judge/compaction", b["content"])
			default:
				bi.digest = digestOf("judge/block", withoutMarker(bv))
			}
			info.blocks = append(info.blocks, bi)
		}
	}
	j.mu.Lock()
	if len(j.cache) >= maxCachedMessages {
		clear(j.cache)
	}
	j.cache[string(raw)] = info
	j.mu.Unlock()
	return info
}

// parse walks a request body. A non-nil Result is an early refusal.
func (j *Judge) parse(body []byte) (*parsed, *Result) {
	top, err := splitObject(body)
	if err != nil {
		r := fail(400, "invalid JSON body: "+err.Error())
		return nil, &r
	}
	for k, raw := range top {
		if k != "messages" && k != "system" && k != "tools" && !json.Valid(raw) {
			r := fail(400, "invalid JSON body: field "+k)
			return nil, &r
		}
	}
	field := func(name string) any {
		raw, ok := top[name]
		if !ok {
			return nil
		}
		v, _ := decode(raw)
		return v
	}
	name, _ := field("model").(string)
	mdl, ok := lookup(name)
	if !ok {
		r := fail(404, fmt.Sprintf("model: %q not found", name))
		return nil, &r
	}
	hd, ok := j.head(top)
	if !ok {
		r := fail(400, "invalid JSON body: system or tools")
		return nil, &r
	}
	p := &parsed{model: mdl, system: hd.system, tools: hd.tools, latest: -1}
	if th, ok := field("thinking").(map[string]any); ok {
		p.manual = th["type"] == "enabled"
		if bb, ok := th["block_binding"]; ok {
			p.hasBB = true
			m, _ := bb.(map[string]any)
			switch b := m["prefix_mismatch_behavior"]; b {
			case nil, "error", "drop_block":
				p.behavior, _ = b.(string)
			default:
				r := fail(400, fmt.Sprintf("thinking.block_binding.prefix_mismatch_behavior: unknown value %v", b))
				return nil, &r
			}
		}
	}
	raw, ok := top["messages"]
	if !ok {
		r := fail(400, "messages: Field required")
		return nil, &r
	}
	msgs, err := splitArray(raw)
	if err != nil {
		r := fail(400, "messages: "+err.Error())
		return nil, &r
	}
	c := chainStart()
	afterComp := false
	results := 0 // tool_result-only user messages since the latest assistant message
	for i, raw := range msgs {
		m := j.message(raw)
		if !m.ok {
			r := fail(400, fmt.Sprintf("messages.%d: not an object", i))
			return nil, &r
		}
		switch {
		case m.role == "assistant":
			p.latest, p.open, results = i, true, 0
		case m.role == "user" && m.toolResults():
			results++
		case m.role != "system":
			p.open = false
		}
		if afterComp {
			p.comp.merged = m.role == p.comp.rec.LastRole || m.role == "system"
			p.comp.first = m.role
			afterComp = false
		}
		p.lastRole = m.role
		c = c.step("msg", m.frame)
		for k, b := range m.blocks {
			switch b.kind {
			case "thinking", "redacted_thinking":
				s := site{path: Path{i, k}, kind: b.kind, chain: c, text: b.text, sig: b.sig, comp: p.comp}
				s.rec, s.ok = j.open(s.sig)
				if s.ok && s.rec.Kind != s.kind {
					s.ok = false
				}
				p.sites = append(p.sites, s)
			case "compaction":
				rec, ok := j.open(b.sig)
				if !ok || rec.Kind != "compaction" || rec.Content != b.content {
					r := fail(400, fmt.Sprintf("messages.%d.content.%d: `compaction` block `content` does not match its `signature`", i, k))
					r.ErrorCode = "compaction_content_mismatch"
					return nil, &r
				}
				// The checked prefix restarts here: the block stands for the
				// exact content it summarized.
				c = rec.Covers
				p.comp = compState{on: true, key: keyOf(b.sig), rec: rec}
				j.mu.Lock()
				j.comps[p.comp.key] = rec
				j.mu.Unlock()
				afterComp = true
			default:
				c = c.step("block", b.digest)
			}
		}
	}
	p.end = c
	p.open = p.open && results > 0
	return p, nil
}

// toolResults reports whether the message's content is an array of
// tool_result blocks only (cache markers are fields, not blocks).
func (m *msgInfo) toolResults() bool {
	for _, b := range m.blocks {
		if b.kind != "tool_result" {
			return false
		}
	}
	return len(m.blocks) > 0
}

// Judge decides a request without producing a reply.
func (j *Judge) Judge(call Call) Result {
	res, _ := j.judge(call)
	return res
}

func (j *Judge) mode(p *parsed, beta bool) Mode {
	if !j.reading.runsCheck(p.model) {
		return ModeNoCheck
	}
	switch p.behavior {
	case "error":
		return ModeEnforced
	case "drop_block":
		return ModeDrop
	}
	if j.newAccount || p.model.enforcedAlways {
		return ModeEnforced
	}
	return ModeRecord
}

func (j *Judge) judge(call Call) (Result, *parsed) {
	p, early := j.parse(call.Body)
	if early != nil {
		return *early, nil
	}
	if p.hasBB && !call.Beta {
		return fail(400, "thinking.block_binding: Extra inputs are not permitted"), nil
	}
	res := Result{Status: 200, Mode: j.mode(p, call.Beta)}
	res.Blocks = make([]BlockVerdict, len(p.sites))
	for i, s := range p.sites {
		res.Blocks[i] = BlockVerdict{Path: s.path, Key: keyOf(s.sig), Fate: FateUnjudged}
		if s.ok {
			res.Blocks[i].Minter = s.rec.Model
		}
	}
	// Signatures first: a tampered or empty one is a 400 whatever the mode.
	for i, s := range p.sites {
		if !s.ok || !j.textIntact(s) {
			res.Status = 400
			res.Blocks[i].Fate = FateBadSignature
			res.Error = fmt.Sprintf("%s: Invalid `%s` in `%s` block", s.path, sigField(s.kind), s.kind)
			return res, p
		}
	}
	// The latest assistant message's thinking run must be exactly as emitted.
	if i, bad := latestModified(p); bad {
		res.Status = 400
		res.Blocks[i].Fate = FateRefused
		res.Error = fmt.Sprintf("%s: thinking or redacted_thinking blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.", p.sites[i].path)
		return res, p
	}
	var lastRead *[32]byte
	dropAll := false
	dropRun := -1 // rest-of-turn: drop sites up to this index
	for i, s := range p.sites {
		v := &res.Blocks[i]
		if !inAccount(s.rec, call.Account) {
			// Always dropped, never refused, and never read: the
			// organization check comes first (research 2.6's precedence).
			v.Fate = FateDroppedAccount
			continue
		}
		if !j.reading.reads(p.model, models[s.rec.Model]) {
			v.Fate = FateDroppedModel
			continue
		}
		if res.Mode == ModeNoCheck {
			v.Fate = FateRead
			lastRead = &v.Key
			continue
		}
		if dropAll || i <= dropRun {
			v.Fate, v.Cause = FateDroppedPrefix, CauseScope
			if j.reading.DroppedCountsAsRead {
				lastRead = &v.Key
			}
			continue
		}
		v.Cause = j.check(p, s, lastRead)
		if v.Cause == CauseNone {
			v.Fate = FateRead
			lastRead = &v.Key
			continue
		}
		switch res.Mode {
		case ModeEnforced:
			v.Fate = FateRefused
			res.Status = 400
			res.Error = prefixError(s, v.Cause, call.Beta)
			return res, p
		case ModeDrop:
			v.Fate = FateDroppedPrefix
			if j.reading.DroppedCountsAsRead {
				lastRead = &v.Key
			}
			if j.reading.Scope == DropAllLater {
				dropAll = true
			} else {
				dropRun = runEnd(p.sites, i)
			}
		case ModeRecord:
			v.Fate = FateAllowed
			lastRead = &v.Key
		}
	}
	res.lastRead = lastRead
	if call.Beta {
		res.Transformations = []Transformation{}
		for _, v := range res.Blocks {
			switch v.Fate {
			case FateDroppedAccount:
				res.Transformations = append(res.Transformations, Transformation{"thinking_dropped", v.Path.String(), "organization_binding_mismatch"})
			case FateDroppedModel:
				res.Transformations = append(res.Transformations, Transformation{"thinking_dropped", v.Path.String(), "model_binding_mismatch"})
			case FateDroppedPrefix:
				res.Transformations = append(res.Transformations, Transformation{"thinking_dropped", v.Path.String(), "prefix_binding_mismatch"})
			case FateAllowed:
				res.Transformations = append(res.Transformations, Transformation{"thinking_mismatch_allowed", v.Path.String(), "prefix_binding_mismatch"})
			}
		}
	}
	return res, p
}

func sigField(kind string) string {
	if kind == "redacted_thinking" {
		return "data"
	}
	return "signature"
}

// textIntact: the visible text of a thinking block is as minted, or the
// reading accepts edits, or the block was minted with an empty (omitted) text.
func (j *Judge) textIntact(s site) bool {
	if s.kind != "thinking" {
		return true
	}
	t, ok := s.text.(string)
	if !ok {
		return false
	}
	return s.rec.TextEmpty || j.reading.ThinkingEditAccepted || textDigest(t) == s.rec.Text
}

// latestModified checks the latest assistant message: its thinking blocks
// must be all of one reply's thinking, in order, or none.
func latestModified(p *parsed) (int, bool) {
	if p.latest < 0 {
		return 0, false
	}
	first, n := -1, 0
	for i, s := range p.sites {
		if s.path.Message != p.latest {
			continue
		}
		if first < 0 {
			first = i
		}
		r0 := p.sites[first].rec
		if s.rec.Reply != r0.Reply || s.rec.Index != n {
			return i, true
		}
		n++
	}
	if first >= 0 && n != p.sites[first].rec.Count {
		return first, true
	}
	return 0, false
}

// check runs the prefix and predecessor checks on one readable block.
func (j *Judge) check(p *parsed, s site, lastRead *[32]byte) Cause {
	switch {
	case !s.rec.Bound:
		return CauseUnbound
	case s.rec.System != p.system:
		return CauseSystem
	case s.rec.Tools != p.tools:
		return CauseTools
	case !j.chainOK(s):
		return CauseMessages
	case lastRead != nil && (!s.rec.HasPred || s.rec.Pred != *lastRead):
		// A gap, a reordering, or a block put back in front of one minted
		// while it was absent. With nothing read before it, any predecessor
		// is fine: removing from the start is allowed.
		return CausePredecessor
	}
	return CauseNone
}

// runEnd is the index of the last site in the same message's consecutive
// run of thinking blocks that starts at i.
func runEnd(sites []site, i int) int {
	e := i
	for e+1 < len(sites) && sites[e+1].path.Message == sites[i].path.Message && sites[e+1].path.Block == sites[e].path.Block+1 {
		e++
	}
	return e
}

func prefixError(s site, c Cause, beta bool) string {
	msg := fmt.Sprintf("%s: Invalid `%s` in `%s` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\".",
		s.path, sigField(s.kind), s.kind)
	if !beta {
		msg += " That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header."
	}
	switch c {
	case CauseSystem:
		msg += " The `system` prompt differs from the one this block was created with."
	case CauseTools:
		msg += " The `tools` differ from the ones this block was created with."
	case CauseMessages:
		msg += " Content before this block differs from when it was created."
	case CausePredecessor:
		msg += " The thinking before this block differs from when it was created."
	case CauseUnbound:
		msg += " This block carries no record of a conversation."
	}
	return msg
}

// ReplyBlock describes one content block of the reply Answer generates.
type ReplyBlock struct {
	Type  string // "thinking", "redacted_thinking", "text" or "tool_use"
	Text  string // thinking text (may be empty: omitted display) or text
	ID    string // tool_use id
	Name  string // tool_use name
	Input any    // tool_use input (marshalled with encoding/json)
}

// Answer judges a request and, when it succeeds, generates the assistant
// message the model replies with: each thinking block in it is signed with
// the request as sent as its prefix (extended by the reply's own earlier
// non-thinking blocks), the last block the model read (or the reply's
// previous thinking block) as its predecessor, and the request's model.
func (j *Judge) Answer(call Call, reply []ReplyBlock) Result {
	res, p := j.judge(call)
	if res.Status != 200 {
		return res
	}
	content := make([]any, len(reply))
	for i, b := range reply {
		switch b.Type {
		case "thinking":
			content[i] = map[string]any{"type": "thinking", "thinking": b.Text, "signature": ""}
		case "redacted_thinking":
			content[i] = map[string]any{"type": "redacted_thinking", "data": ""}
		case "text":
			content[i] = map[string]any{"type": "text", "text": b.Text}
		case "tool_use":
			content[i] = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.Input}
		default:
			panic("judge: unknown reply block type " + b.Type)
		}
	}
	// Round-trip through JSON so the chain sees exactly what the host will send back.
	raw, err := json.Marshal(map[string]any{"role": "assistant", "content": content})
	if err != nil {
		panic(fmt.Sprintf("judge: reply does not marshal: %v", err))
	}
	dv, _ := decode(raw)
	msg := dv.(map[string]any)
	blocks := msg["content"].([]any)
	info := j.message(raw)
	c := p.end.step("msg", info.frame)
	replyID := j.replies.Add(1)
	count := 0
	for _, b := range reply {
		if b.Type == "thinking" || b.Type == "redacted_thinking" {
			count++
		}
	}
	pred, hasPred := [32]byte{}, false
	if res.lastRead != nil {
		pred, hasPred = *res.lastRead, true
	}
	idx := 0
	for k, bv := range blocks {
		b := bv.(map[string]any)
		if !isThinking(b) {
			c = c.step("block", info.blocks[k].digest)
			continue
		}
		rec := record{Kind: b["type"].(string), Model: p.model.name, Account: call.Account, Bound: p.model.bound, System: p.system, Tools: p.tools,
			Chain: c, Pred: pred, HasPred: hasPred, Reply: replyID, Index: idx, Count: count}
		if p.comp.on {
			rec.Under = p.comp.key
		}
		if rec.Kind == "thinking" {
			t := b["thinking"].(string)
			rec.Text, rec.TextEmpty = textDigest(t), t == ""
			b["signature"] = j.seal(rec)
			pred = keyOf(b["signature"].(string))
		} else {
			b["data"] = j.seal(rec)
			pred = keyOf(b["data"].(string))
		}
		hasPred = true
		idx++
	}
	res.Reply, err = json.Marshal(msg)
	if err != nil {
		panic(fmt.Sprintf("judge: reply does not marshal: %v", err))
	}
	return res
}

// Compaction mints an on-demand compaction block that stands for
// messages[0:upto) of body: sent in place of those messages, it keeps the
// later blocks' prefixes as they were (research 1.1, 6).
func (j *Judge) Compaction(body []byte, upto int, summary string) (map[string]any, error) {
	v, err := decode(body)
	if err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	top, _ := v.(map[string]any)
	msgs, _ := top["messages"].([]any)
	if upto < 0 || upto > len(msgs) {
		return nil, fmt.Errorf("compaction: upto %d out of range [0,%d]", upto, len(msgs))
	}
	cut := make(map[string]any, len(top))
	for k, e := range top {
		cut[k] = e
	}
	cut["messages"] = msgs[:upto]
	raw, err := json.Marshal(cut)
	if err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	p, early := j.parse(raw)
	if early != nil {
		return nil, fmt.Errorf("compaction: %s", early.Error)
	}
	rec := compactionRecord(p, summary)
	return map[string]any{"type": "compaction", "content": summary, "signature": j.seal(rec)}, nil
}

// Compact answers an on-demand compaction request (the request's every
// message is summarized, provider page compaction-on-demand): the request is
// judged like any other (its thinking is checked), and on a 200 the reply is
// the returned assistant message holding one signed compaction block that
// stands for every message of the request as sent.
func (j *Judge) Compact(call Call, summary string) Result {
	res, p := j.judge(call)
	if res.Status != 200 {
		return res
	}
	rec := compactionRecord(p, summary)
	raw, err := json.Marshal(map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "compaction", "content": summary, "signature": j.seal(rec)}}})
	if err != nil {
		panic(fmt.Sprintf("judge: compaction reply does not marshal: %v", err))
	}
	res.Reply = raw
	return res
}

// compactionRecord is what a compaction block minted for the request p
// carries: the chain it stands for, and what the kept turns' conditions
// need (the request's model, system, tools and last message's role).
func compactionRecord(p *parsed, summary string) record {
	r := record{Kind: "compaction", Model: p.model.name, Bound: p.model.bound, System: p.system, Tools: p.tools,
		Covers: p.end, Content: digestOf("judge/compaction", summary), LastRole: p.lastRole}
	if p.comp.on {
		r.Under, r.UnderMerged, r.UnderOpen = p.comp.key, p.comp.merged, p.comp.first == ""
	}
	return r
}

// BlockFacts are the judge's individual facts about one thinking block,
// independent of the run it sits in and of the request's mode.
type BlockFacts struct {
	Path      Path
	Key       [32]byte
	SigOK     bool // signature opens and the text is intact
	Minter    string
	Readable  bool // the request's model reads the minter's blocks
	Checked   bool // the request's model runs the prefix check
	Bound     bool
	SystemOK  bool
	ToolsOK   bool
	MessageOK bool
	Pred      [32]byte
	HasPred   bool
	Reply     uint64
	Index     int
	Count     int
}

// Valid reports whether the block passes every individual check: it would be
// read if the run and latest-message rules allowed it.
func (f BlockFacts) Valid() bool {
	return f.SigOK && f.Readable && (!f.Checked || (f.Bound && f.SystemOK && f.ToolsOK && f.MessageOK))
}

// Facts returns the individual facts of every thinking block of body,
// sent in the default account ("").
func (j *Judge) Facts(body []byte) ([]BlockFacts, error) { return j.FactsAs("", body) }

// FactsAs is Facts for a request sent in account: a block minted in
// another account by an account-bound model is not Readable.
func (j *Judge) FactsAs(account string, body []byte) ([]BlockFacts, error) {
	p, early := j.parse(body)
	if early != nil {
		return nil, fmt.Errorf("facts: %s", early.Error)
	}
	out := make([]BlockFacts, len(p.sites))
	for i, s := range p.sites {
		f := BlockFacts{Path: s.path, Key: keyOf(s.sig), SigOK: s.ok && j.textIntact(s), Checked: j.reading.runsCheck(p.model)}
		if s.ok {
			f.Minter = s.rec.Model
			f.Readable = j.reading.reads(p.model, models[s.rec.Model]) && inAccount(s.rec, account)
			f.Bound = s.rec.Bound
			f.SystemOK, f.ToolsOK, f.MessageOK = s.rec.System == p.system, s.rec.Tools == p.tools, j.chainOK(s)
			f.Pred, f.HasPred = s.rec.Pred, s.rec.HasPred
			f.Reply, f.Index, f.Count = s.rec.Reply, s.rec.Index, s.rec.Count
		}
		out[i] = f
	}
	return out, nil
}

// KeyOf returns the key the judge identifies a block by: SHA-256 of its
// signature (thinking) or data (redacted_thinking).
func KeyOf(signatureOrData string) [32]byte { return sha256.Sum256([]byte(signatureOrData)) }

// inAccount reports whether a block the judge minted is read in account:
// always, unless its model binds its blocks to the minting account.
func inAccount(r record, account string) bool {
	return !accountBound[r.Model] || r.Account == account
}
