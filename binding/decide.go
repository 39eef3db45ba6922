package binding

import (
	"fmt"
	"slices"
)

// The decision, per compile (design/binding.md "The decision, per compile"):
// individual verdicts, the kept set (run rule, latest assistant message,
// choice: choose.go, with the decisions it takes), emptied messages
// dropped, attribution by prefix before deciding, and cache.firstChange
// against the branch owner.
//
// Since issue 31 (binding.md "Then the kept set is chosen", revised): the
// longest valid chain is kept, no longer the latest assistant message's
// run whenever a chain keeps it (that stripped, and released for good, the
// older chain after every request a host sent without thinking; one
// exception: manual thinking in an open tool-use cycle); a target that
// does not bind has no run rule, and no gap release is recorded for it or
// reaches it (finish; ReachInput.NotBinding); and a turn kept through
// several on-demand compactions in a row is vouched for when each one was
// (keptChains, Compaction.Through).
//
// Decisions taken where the design and research are [INF], [CONFLICT] or
// silent (each pinned by a test):
//   - Verdicts compare a stamp with chain(b) as SENT: after a message the
//     strip empties is dropped, the chain after it is recomputed, and the
//     verdicts, the kept set and the drops are iterated to a fixed point
//     (bounded; past the bound every thinking block is stripped, which the
//     provider always accepts).
//   - A thinking block with an empty signature (redacted: empty data) is
//     stripped as "unsigned" on every target, never released.
//   - A repeated key in one request (the same block twice) is a reordering:
//     the repeat is stripped as "gap" and not released (the first stays).
//   - A valid block the target cannot read (only possible when the target
//     does not bind) is kept and stands outside the run: the provider drops
//     it unread, it links nothing and breaks nothing, and it is never
//     released, so it comes back for a model that reads it.
//   - An unstamped block's predecessor (only used before engagement or for
//     a target that does not bind) is the previous block of the request the
//     target can read, released or not.
//   - A compile marked Refused (the host reported its 400) minted nothing:
//     attribution ignores it.
//   - Attribution by prefix matches the remembered compile's sent chain
//     against the chain before the reply both as the host gave it and as
//     this compile sends it; qualifying compiles must agree on seed, sent
//     chain, last block read and model, else stamp-skipped.
//   - On-demand compaction (research 6 over binding.md's restart, see
//     keptChains): a block after a compaction block is valid by the chain
//     that restarts at the block (thinking minted with the block in place)
//     or, for a kept turn, by the recorded chain of the messages the block
//     replaced (thinking minted before the swap), the latter only with a
//     Compaction record, in the documented shape, and under that record's
//     seed. A turn kept through several compactions in a row is vouched
//     for when each compaction in the row was, when the request that
//     compacted it was decided (Compaction.Through, at most MaxThrough);
//     a compaction request holding the earlier block alone vouches through
//     it only when that block's last replaced message was an assistant's
//     (see swap).
//   - Account binding (research 1.5, 3: Sonnet 5.5 and Haiku 5.5 blocks
//     are read only in the account that minted them; the provider drops
//     them elsewhere as organization_binding_mismatch): a block of an
//     account-bound model whose stamp names another credential than the
//     request's (CompileInput.Account, a salted fingerprint) is stripped
//     as account-mismatch, ahead of every verdict but released, unsigned
//     and a repeat (the provider's precedence puts the organization first),
//     and is not a release: it comes back under its own credential. A
//     stamp or a request with no account is not compared. Two credentials
//     are one account when their fingerprints are equal or alias one
//     account (CompileInput.AccountAliases: keys of one organization, as
//     the provider's answers name it); Haiku 5.5's "linked accounts" are
//     not known here. Attribution by prefix takes
//     the attributed compile's account; compiles at one head under two
//     accounts disagree (TestAccountAttribution).
//   - cache.firstChange: "system" when the seed (system or tools) differs;
//     a position inside the owner's request otherwise; "" when this request
//     only appends to the owner's (a block appended to the owner's last
//     message is an append).

// CompileInput is everything one compile decision reads. The daemon loads:
//   - Stamps: the stamps of StampKeys(Request), in its order (nil: no stamp);
//   - Released: the keys released on this branch (ReleasedOn decides
//     which releases apply to a branch);
//   - Remembered: the branch's remembered compiles (Retain bounds them), for
//     attribution by prefix; accepted ones included;
//   - Owner: the branch's last accepted compile, for cache.firstChange;
//   - Engaged: the conversation's engagement (or its parent's, for a fork);
//   - Compactions: the records for CompactionKeys(Request) (a missing key
//     means bindery cannot vouch for the block: the chain restarts there).
type CompileInput struct {
	ID           string // the compile id the daemon chose
	Conversation string
	Branch       string // pi: leaf entry id; other hosts: branch name
	Seq          int64  // the daemon's monotonic compile sequence

	Request       *Request // parsed (ParseRequest); Bound false gives an empty plan
	BindsThinking *bool    // the host's override; nil: Models.Binds(Request.Model)
	DryRun        bool
	Engaged       bool
	// Account is the salted fingerprint of the credential this request is
	// sent under; "" when the host did not say. A block of an account-bound
	// model (ModelTable.AccountBound) stamped under another known account
	// is stripped as account-mismatch.
	Account string
	// AccountAliases maps a fingerprint to the account it is known to
	// belong to (a key to its organization, learned from the provider's
	// answers); both sides of a comparison are read through it, one level.
	AccountAliases map[string]string

	// Stamps is, for each key StampKeys(Request) lists, in that order,
	// the block's recorded stamp, nil when it has none; nil when no block
	// has one. In request order, not a map: the daemon finds each key in
	// its cache anyway, and the decision's own lookup of every block in a
	// map was a second random read per block of a long history. By
	// pointer: stamps inline made each read touch five times the memory.
	// The decision never writes through them. StampsFor builds it from a
	// map.
	Stamps      []*Stamp
	Released    map[Digest]bool
	Remembered  []*CompileRecord
	Owner       *CompileRecord
	Models      *ModelTable // nil: DefaultModelTable()
	Compactions map[Digest]Compaction

	// Memory, when set, is scratch the decision may reuse (DecideMemory);
	// the decision is the same with or without it.
	Memory *DecideMemory

	// Share, when set, is what the record shares (ShareTail): the
	// decision builds the record's arrays in Memory's scratch and keeps of
	// them only what Share.Base does not hold, where ShareTail would. A
	// long history's record was built whole, then shared, each turn: a few
	// hundred KB allocated and dropped. The record is exactly the one
	// ShareTail(record, Share.Base, Share.Tip) makes.
	Share *RecordShare
}

// RecordShare is ShareTail's inputs for a compile's record: the record it
// most likely repeats (nil: none) and the conversation's tip.
type RecordShare struct {
	Base *CompileRecord
	Tip  *ShareTip
}

// Strip is one thinking block the compile removes, at its position in the
// request as the host gave it.
type Strip struct {
	Pos
	Key    Digest
	Reason Reason
	Tokens int
}

// Cache causes (api.md cache.cause).
const (
	CauseNone    = "none"
	CauseHost    = "host"
	CauseBindery = "bindery"
)

// CacheChange is cache.firstChange: the first position at which the request
// as sent differs from the branch owner's request as sent ("system" when the
// seed, system or tools, differs; "" when nothing before the end of the
// owner's request changed), and whether the host's own request already
// differed there (host) or only bindery's strip made it differ (bindery).
type CacheChange struct {
	Path  string
	Cause string
}

// StampSkip is a reply bindery could not attribute: two remembered compiles
// whose sent messages end where the reply's message begins disagree on what
// the reply was minted under, and no accept said which (an event,
// stamp-skipped). Its thinking is stripped (no-stamp).
type StampSkip struct {
	Message  int      // the reply's message index in the request as the host gave it
	Compiles []string // the compiles that qualified
}

// CompilePersist is what a compile must make durable before it answers:
// its record and the stamps attribution made. Empty for a dry run and for a
// request that is not bound.
type CompilePersist struct {
	Record *CompileRecord
	Stamps []Stamp
}

// Compiled is the decision for one compile.
type Compiled struct {
	ID      string
	Bound   bool // false: not a Messages body; nothing stripped, nothing to persist
	Binds   bool // the target binds thinking (the resolved bindsThinking)
	Engaged bool
	// FirstAfterEngagement: the first compile of the branch since the
	// conversation engaged; its no-stamp strips are the one-time strip of
	// unstamped history.
	FirstAfterEngagement bool

	Strips  []Strip // in request order
	Dropped []int   // messages the strip emptied, original indices
	Kept    []Digest
	Cache   CacheChange
	Skipped []StampSkip
	Stamped int // stamps made by attribution

	// Record is the compile record (also for a dry run, so a caller can
	// inspect it); Persist says what to store.
	Record  *CompileRecord
	Persist CompilePersist
}

// StampKeys lists the keys of the request's signed thinking blocks, in
// request order: the stamps the daemon must load for a compile. A key the
// request repeats is listed again (every use is by set or map): making
// the list unique took a set of every key, a fifth of a long
// conversation's gathering, for a repeat no real request holds.
func StampKeys(r *Request) []Digest {
	keys := AppendStampKeys(nil, r)
	if len(keys) == 0 {
		return nil
	}
	return keys
}

// AppendStampKeys is StampKeys appended to dst: a caller that compiles
// turn after turn reuses one array for a long history's keys.
func AppendStampKeys(dst []Digest, r *Request) []Digest {
	if r == nil {
		return dst
	}
	th := r.thinkingBlocks()
	dst = slices.Grow(dst, len(th))
	for _, at := range th {
		if b := &r.Messages[at.msg].Blocks[at.blk]; b.Signed {
			dst = append(dst, b.Key)
		}
	}
	return dst
}

// StampsFor is CompileInput.Stamps for r from known, which holds the
// stamps by key (it may hold others).
func StampsFor(r *Request, known map[Digest]*Stamp) []*Stamp {
	keys := StampKeys(r)
	if len(keys) == 0 || len(known) == 0 {
		return nil
	}
	out := make([]*Stamp, len(keys))
	for i, k := range keys {
		out[i] = known[k]
	}
	return out
}

// CompactionKeys lists the compaction records a compile may use: the key of
// a signed compaction block that is the only block of the first message
// (where an on-demand block goes). Empty for any other request.
func CompactionKeys(r *Request) []Digest {
	if m := swapMessage(r); m != nil {
		return []Digest{m.Blocks[0].Digest}
	}
	return nil
}

// assistantFrame is Message.Frame of an assistant message with array content
// and no other field: the shape of the message a compaction request returns.
var assistantFrame = func() Digest {
	r, err := ParseRequest([]byte(`{"messages":[{"role":"assistant","content":[]}]}`))
	if err != nil {
		panic("binding: assistantFrame: " + err.Error())
	}
	return r.Messages[0].Frame
}()

// swapMessage returns the request's first message when it is an on-demand
// compaction swapped in as documented: the returned assistant message, sent
// unchanged (role and content only), its one block a signed compaction
// block. nil otherwise. Decision: the provider also takes the block as the
// first block of a longer first message; bindery does not vouch for that
// shape (the chain restarts there, which is safe).
func swapMessage(r *Request) *Message {
	if r == nil || len(r.Messages) == 0 {
		return nil
	}
	m := &r.Messages[0]
	if m.Role != "assistant" || m.Frame != assistantFrame || len(m.Blocks) != 1 {
		return nil
	}
	if b := &m.Blocks[0]; b.Kind != KindCompaction || !b.Signed {
		return nil
	}
	return m
}

func isThinking(k BlockKind) bool { return k == KindThinking || k == KindRedacted }

// contentCount is the number of m's blocks that are content (not markers).
func contentCount(m *Message) int {
	n := len(m.Blocks)
	for j := range m.Blocks {
		if m.Blocks[j].Kind == KindMarker {
			n--
		}
	}
	return n
}

// tblock is one thinking block of the request being decided.
type tblock struct {
	msg, blk int
	key      Digest
	signed   bool
	dup      bool // an earlier block of the request has the same key
	tokens   int
	hostPrev Digest // assumed predecessor without a stamp (see verdicts)

	// in is the block's stamp among the input's, nil when it has none
	// (looked up once, in collect: a long conversation's stamps are a
	// large map, and each round of the decision asked it again for every
	// block)
	in *Stamp

	chain      Digest // chain(b) as sent (recomputed after dropped messages)
	kept0      bool   // the stamp's chain is chain(b) as sent with the compaction block expanded to what it replaced (keptChains)
	reason     Reason // "" while valid
	pred       Digest
	stamped    bool
	unreadable bool // stamped by a model the target cannot read
	kept       bool
}

// maxDropRounds bounds the fixed point between dropped messages and the
// chains after them; beyond it every thinking block is stripped (always
// safe: the provider accepts a request with no thinking).
const maxDropRounds = 8

// Compile decides one compile. It reads only its input; it returns an error
// only for a missing request.
func Compile(in CompileInput) (*Compiled, error) {
	req := in.Request
	if req == nil {
		return nil, ErrNoRequest
	}
	models := in.Models
	if models == nil {
		models = DefaultModelTable()
	}
	binds := TargetBinds(models, req.Model, in.BindsThinking)
	out := &Compiled{ID: in.ID, Bound: req.Bound, Binds: binds, Engaged: in.Engaged}
	out.FirstAfterEngagement = in.Engaged && (in.Owner == nil || !in.Owner.Engaged)
	if !req.Bound {
		out.Cache = CacheChange{Cause: CauseNone}
		return out, nil
	}
	mem := in.Memory
	if mem == nil {
		mem = &DecideMemory{}
	}
	mem.keepMaps() // emptied before use: a decision that panicked left them as they were
	d := decider{in: &in, req: req, models: models, binds: binds, attributed: map[Digest]*Stamp{}, mem: mem, msgStart: mem.msgStart}
	if err := d.collect(); err != nil {
		return nil, err
	}
	d.decide()
	d.finish(out)
	mem.tb, mem.dropped, mem.msgStart = d.tb[:0], d.dropped, d.msgStart
	return out, nil
}

type decider struct {
	in     *CompileInput
	req    *Request
	models *ModelTable
	binds  bool

	mem        *DecideMemory
	tb         []tblock
	latest     int // index of the latest assistant message, -1 if none
	dropped    []bool
	msgStart   []Digest // chain before each message, as sent
	end        Digest   // chain after the last sent message
	attributed map[Digest]*Stamp
	attrOrder  []Digest
	skipped    map[int][]string
	// minters memoizes minter's facts (minter), last the last one asked
	minters    map[string]minterFacts
	lastMinter string
	lastKnown  bool
	last       minterFacts

	// through is throughChains as the last keptChains found it, fresh
	// while the messages dropped are those it saw (drop)
	through      []Digest
	throughFresh bool
}

// minterFacts is what the decision asks of a block's minting model.
type minterFacts struct {
	reads   bool // the target reads its blocks (models.Reads)
	binds   bool // it binds its blocks to their prefix (models.Binds)
	account bool // its blocks are read only in their account (models.AccountBound)
}

// minter is minter's facts, worked out once per minter: a long
// conversation's blocks were minted by one or two models, and normalizing
// both names again for every block was a third of a compile's decision.
// The last minter asked is answered without the map: all but a few of a
// conversation's blocks name one.
func (d *decider) minter(name string) minterFacts {
	if d.lastKnown && d.lastMinter == name {
		return d.last
	}
	f, ok := d.minters[name]
	if !ok {
		f = minterFacts{reads: d.models.Reads(d.req.Model, name), binds: d.models.Binds(name), account: d.models.AccountBound(name)}
		if d.minters == nil {
			d.minters = map[string]minterFacts{}
		}
		d.minters[name] = f
	}
	d.lastMinter, d.lastKnown, d.last = name, true, f
	return f
}

func (d *decider) collect() error {
	d.latest = -1
	for i := len(d.req.Messages) - 1; i >= 0; i-- {
		if d.req.Messages[i].Role == "assistant" {
			d.latest = i
			break
		}
	}
	th := d.req.thinkingBlocks()
	n := len(th)
	d.tb = slices.Grow(d.mem.tb[:0], n)
	seen := &d.mem.seen
	seen.reset(n)
	stamps, si := d.in.Stamps, 0
	for _, at := range th {
		i, j := int(at.msg), int(at.blk)
		b := &d.req.Messages[i].Blocks[j]
		t := tblock{msg: i, blk: j, key: b.Key, signed: b.Signed, tokens: b.Tokens, chain: b.Chain}
		if b.Signed {
			t.dup = seen.add(&b.Key, len(d.tb), d.tb)
			if si < len(stamps) {
				t.in = stamps[si]
			}
			si++
		}
		d.tb = append(d.tb, t)
	}
	if stamps != nil && si != len(stamps) {
		return fmt.Errorf("binding: %d stamps given for the request's %d signed thinking blocks (StampKeys)", len(stamps), si)
	}
	d.dropped = slices.Grow(d.mem.dropped[:0], len(d.req.Messages))[:len(d.req.Messages)]
	clear(d.dropped)
	return nil
}

// stamp is the stamp of thinking block t: the input's, else the one
// attribution made; nil when it has none. Never written through.
func (d *decider) stamp(t *tblock) *Stamp {
	if t.in != nil {
		return t.in
	}
	return d.attributed[t.key]
}

// decide runs verdicts and the kept set to a fixed point with the dropped
// messages (a dropped message changes the chain of everything after it).
func (d *decider) decide() {
	d.sentChains()
	for round := 0; ; round++ {
		d.attribute()
		d.verdicts()
		d.choose()
		changed := d.drop()
		if !changed {
			return
		}
		d.sentChains()
		if round+1 >= maxDropRounds {
			break
		}
	}
	// No fixed point: strip everything (rare; always accepted).
	for i := range d.tb {
		t := &d.tb[i]
		if t.kept {
			t.kept = false
			t.reason = ReasonGap
		}
	}
	d.drop()
	d.sentChains()
}

// sentChains recomputes the message chain as sent, given d.dropped: the
// chain before every thinking block, before every message, and at the end.
func (d *decider) sentChains() {
	msgs := d.req.Messages
	if cap(d.msgStart) < len(msgs) {
		d.msgStart = make([]Digest, len(msgs), withRoom(len(msgs)))
	}
	d.msgStart = d.msgStart[:len(msgs)]
	first := -1
	for i, x := range d.dropped {
		if x {
			first = i
			break
		}
	}
	h := ChainStart()
	ti := 0
	for i := range msgs {
		m := &msgs[i]
		d.msgStart[i] = h
		if first < 0 || i < first {
			// Nothing dropped before: the host's chain is the chain as sent.
			for ti < len(d.tb) && d.tb[ti].msg == i {
				d.tb[ti].chain = m.Blocks[d.tb[ti].blk].Chain
				ti++
			}
			h = m.End
			continue
		}
		if d.dropped[i] {
			for ti < len(d.tb) && d.tb[ti].msg == i {
				ti++
			}
			continue
		}
		start := ti
		h = m.StepFrom(h, func(j int, before Digest) {
			for k := start; k < len(d.tb) && d.tb[k].msg == i; k++ {
				if d.tb[k].blk == j {
					d.tb[k].chain = before
				}
			}
		})
		for ti < len(d.tb) && d.tb[ti].msg == i {
			ti++
		}
	}
	d.end = h
}

// attribute stamps, from a remembered compile, the unstamped thinking of
// every assistant message whose preceding messages are exactly what that
// compile sent (binding.md "Attribution by prefix").
func (d *decider) attribute() {
	if len(d.in.Remembered) == 0 {
		return
	}
	for i := 0; i < len(d.tb); {
		msg := d.tb[i].msg
		j := i
		need := false
		for ; j < len(d.tb) && d.tb[j].msg == msg; j++ {
			t := &d.tb[j]
			if t.signed && !t.dup {
				if d.stamp(t) == nil {
					need = true
				}
			}
		}
		if need && msg > 0 && d.req.Messages[msg].Role == "assistant" {
			d.attributeMessage(i, j)
		}
		i = j
	}
}

func (d *decider) attributeMessage(from, to int) {
	msg := d.tb[from].msg
	hostBefore := d.req.Messages[msg-1].End
	sentBefore := d.msgStart[msg]
	var cand *CompileRecord
	viaSent := false
	var ids []string
	agree := true
	for _, r := range d.in.Remembered {
		if r == nil || r.DryRun || r.Refused {
			continue
		}
		host := r.End == hostBefore
		sent := r.End == sentBefore
		if !host && !sent {
			continue
		}
		ids = append(ids, r.ID)
		if cand == nil {
			cand, viaSent = r, !host
			continue
		}
		if r.Seed != cand.Seed || r.LastRead != cand.LastRead || NormalizeModel(r.Model) != NormalizeModel(cand.Model) || r.End != cand.End || d.account(r.Account) != d.account(cand.Account) {
			agree = false
		}
	}
	if cand == nil {
		return
	}
	if !agree {
		if d.skipped == nil {
			d.skipped = map[int][]string{}
		}
		d.skipped[msg] = ids
		return
	}
	pred := cand.LastRead
	for k := from; k < to; k++ {
		t := &d.tb[k]
		if !t.signed {
			continue
		}
		if t.dup {
			pred = t.key
			continue
		}
		if d.stamp(t) == nil {
			chain := d.req.Messages[t.msg].Blocks[t.blk].Chain
			if viaSent {
				chain = t.chain
			}
			d.attributed[t.key] = &Stamp{Key: t.key, Seed: cand.Seed, Chain: chain, Pred: pred, Model: cand.Model, Account: cand.Account}
			d.attrOrder = append(d.attrOrder, t.key)
		}
		pred = t.key
	}
}

// keptChains marks the thinking blocks after an on-demand compaction block
// whose stamp matches their second chain: the chain as sent with the block
// expanded to the messages it replaced (Compaction.Chain), which is what a
// kept turn's stamp was minted under, or, for a turn kept through several
// compactions in a row, with each compaction in the row expanded in turn
// (Compaction.Through). binding.md restarts the chain at every compaction
// block; the provider accepts the swap for kept turns (preserved-thinking.md
// 6, scenario 36; the provider's compaction-thinking-blocks page), so such
// a block is as valid as one matching the restarted chain (thinking minted
// with the block in place). Only when all hold (the page's conditions,
// read conservatively, for every compaction in the row):
//   - the block is in the documented shape (swapMessage) and bindery
//     recorded it when it accepted the compaction request (an unknown block
//     keeps the restart: bindery cannot say what it replaced);
//   - the first message sent after it has a role other than the last
//     replaced message's and is not role "system" (else the API merges it
//     into the summarized messages);
//   - the stamp's seed is the compaction request's (system and tools the
//     same on the compaction request as on the requests that minted the
//     kept thinking); the request's own seed is then checked as for any
//     block (seed-changed, not a release).
//
// The earlier compactions of a row were checked when the compaction
// request that replaced them was decided (throughChains): its Through holds
// only what they vouched for. The compaction request's model must bind
// (Accept records nothing else). Only blocks that need it are checked: it
// costs one step per message and compaction up to the last of them.
func (d *decider) keptChains() {
	for i := range d.tb {
		d.tb[i].kept0 = false
	}
	d.through, d.throughFresh = nil, true
	c, first := d.swap()
	if c == nil {
		return
	}
	// The record's Through (throughChains) is the same walk taken to the
	// end: taken here, a compile after a compaction steps its chain once
	// per compaction, not twice.
	through := c.Seed == d.req.Seed
	last := -1
	for i := range d.tb {
		t := &d.tb[i]
		if !t.signed || t.dup {
			continue
		}
		if st := d.stamp(t); st != nil && st.Chain != t.chain && st.Seed == c.Seed {
			last = i
		}
	}
	if last < 0 && !through {
		return
	}
	var hs [1 + MaxThrough]Digest
	n := copy(hs[:], append([]Digest{c.Chain}, c.Through...))
	if through {
		n = min(n, MaxThrough)
	}
	msgs := d.req.Messages
	ti := 0
	for i := first; i < len(msgs) && (through || ti <= last); i++ {
		if d.dropped[i] {
			for ti < len(d.tb) && d.tb[ti].msg == i {
				ti++
			}
			continue
		}
		for ti < len(d.tb) && d.tb[ti].msg < i {
			ti++
		}
		start := ti
		for k := range n {
			hs[k] = msgs[i].StepFrom(hs[k], func(j int, before Digest) {
				for x := start; x < len(d.tb) && d.tb[x].msg == i; x++ {
					if t := &d.tb[x]; t.blk == j {
						if st := d.stamp(t); st != nil && st.Seed == c.Seed && st.Chain == before {
							t.kept0 = true
						}
					}
				}
			})
		}
		for ti < len(d.tb) && d.tb[ti].msg == i {
			ti++
		}
	}
	if through {
		d.through = slices.Clone(hs[:n])
	}
}

// MaxThrough bounds Compaction.Through: how many compactions in a row a
// kept turn is vouched for through (beyond it, stripped: safe). Each costs
// one more step of the chain per message of a request that starts with
// the latest compaction block.
const MaxThrough = 4

// swap returns the record of the request's on-demand compaction block and
// the index of the first message sent after it, when bindery vouches for
// kept turns across it (keptChains' conditions, the seed aside); nil
// otherwise.
func (d *decider) swap() (*Compaction, int) {
	m := swapMessage(d.req)
	if m == nil || len(d.in.Compactions) == 0 {
		return nil, 0
	}
	c, ok := d.in.Compactions[m.Blocks[0].Digest]
	if !ok {
		return nil, 0
	}
	msgs := d.req.Messages
	first := 1
	for first < len(msgs) && d.dropped[first] {
		first++
	}
	switch {
	case first >= len(msgs):
		// Nothing after the block: a compaction request that summarizes
		// the earlier block alone. The first message kept after the new
		// block is then the first kept after this one too, and is checked
		// only against the new block's last replaced role, the role of
		// this message: vouched for only when that is this block's own
		// (decision; the other way no message could pass both checks).
		if c.LastRole != msgs[0].Role {
			return nil, 0
		}
	case msgs[first].Role == c.LastRole || msgs[first].Role == "system":
		return nil, 0
	}
	return &c, first
}

// recordThrough is CompileRecord.Through: the last keptChains' when the
// messages dropped have not changed since, else worked out again.
func (d *decider) recordThrough() []Digest {
	if d.throughFresh {
		return d.through
	}
	return d.throughChains()
}

// throughChains is CompileRecord.Through: this request's chain as sent at
// its end with its compaction block expanded to what it replaced, then
// with each compaction of the row before it expanded too, nearest first;
// nil when bindery does not vouch for kept turns across the block, or when
// the request's seed is not the compaction request's (a kept turn's
// thinking must share its seed with every compaction in the row, so such
// a request, were it a compaction request, could vouch for none).
func (d *decider) throughChains() []Digest {
	c, first := d.swap()
	if c == nil || c.Seed != d.req.Seed {
		return nil
	}
	out := append([]Digest{c.Chain}, c.Through...)
	if len(out) > MaxThrough {
		out = out[:MaxThrough]
	}
	msgs := d.req.Messages
	for i := first; i < len(msgs); i++ {
		if d.dropped[i] {
			continue
		}
		for k := range out {
			out[k] = msgs[i].StepFrom(out[k], nil)
		}
	}
	return out
}

// verdicts gives every thinking block its individual verdict (binding.md
// steps 1 to 7).
//
// A block without a stamp (only valid when the conversation is not engaged
// or the target does not bind) is assumed to have been minted reading the
// previous signed thinking block of the request, released or not, skipping
// blocks the target cannot read (the model never read them). Decision: the
// host's history is the order the blocks were minted in; assuming a
// released block was skipped would keep an older block next to a block
// minted while the older one was stripped, which the provider refuses; the
// other way only costs retention.
func (d *decider) verdicts() {
	d.keptChains()
	var prev Digest
	for i := range d.tb {
		t := &d.tb[i]
		t.hostPrev = prev
		t.reason, t.kept, t.unreadable, t.stamped = "", false, false, false
		t.pred = t.hostPrev
		st := d.stamp(t)
		ok := st != nil
		if ok && t.signed {
			t.stamped = true
			t.pred = st.Pred
			t.unreadable = !d.minter(st.Model).reads
		}
		switch {
		case !t.signed:
			t.reason = ReasonUnsigned
		case d.in.Released[t.key]:
			t.reason = ReasonReleased
		case t.dup:
			t.reason = ReasonGap // a repeat of a block is a reordering
		case ok && d.otherAccount(st):
			t.reason = ReasonAccountMismatch
		case !d.in.Engaged || !d.binds:
			// valid unless released
		case !ok:
			t.reason = ReasonNoStamp
		case t.unreadable:
			t.reason = ReasonModelUnreadable
		case !d.minter(st.Model).binds:
			t.reason = ReasonModelUnbound
		case st.Chain != t.chain && !t.kept0:
			t.reason = ReasonPrefixChanged
		case st.Seed != d.req.Seed:
			t.reason = ReasonSeedChanged
		}
		if t.signed && !t.dup && !t.unreadable && t.reason != ReasonAccountMismatch {
			prev = t.key
		}
	}
}

// otherAccount reports whether st was minted by an account-bound model
// under a credential other than this request's. Both must be known: a
// stamp or a request without an account (pi's sessions, a host that does
// not say) is not compared, as before accounts were recorded.
func (d *decider) otherAccount(st *Stamp) bool {
	return st.Account != "" && d.in.Account != "" && d.account(st.Account) != d.account(d.in.Account) && d.minter(st.Model).account
}

// account is the account a fingerprint is known to belong to: its alias,
// else itself. Stamps keep the fingerprint they were minted under, so an
// alias learned later applies to them too.
func (d *decider) account(fp string) string {
	if a, ok := d.in.AccountAliases[fp]; ok && a != "" {
		return a
	}
	return fp
}

// drop marks the messages the strip empties; it reports whether the set
// changed.
func (d *decider) drop() bool {
	stripped := ints(d.mem.stripped, len(d.req.Messages))
	d.mem.stripped = stripped
	for i := range d.tb {
		if !d.tb[i].kept {
			stripped[d.tb[i].msg]++
		}
	}
	changed := false
	for i := range d.req.Messages {
		// Markers (Converse cachePoint) are not content: a message left
		// with only markers is empty. A message with nothing stripped is
		// never emptied, whatever it holds: only a message with a strip
		// has its content counted (counting every message's blocks each
		// round was most of drop, over a long history).
		x := stripped[i] > 0 && stripped[i] == contentCount(&d.req.Messages[i])
		if x != d.dropped[i] {
			d.dropped[i] = x
			changed = true
		}
	}
	if changed {
		d.throughFresh = false
	}
	return changed
}

// finish builds the answer and the compile record.
func (d *decider) finish(out *Compiled) {
	in := d.in
	rec := &CompileRecord{
		ID: in.ID, Conversation: in.Conversation, Branch: in.Branch, Seq: in.Seq,
		Model: d.req.Model, Account: in.Account, Binds: d.binds, Engaged: in.Engaged, DryRun: in.DryRun,
		Seed: d.req.Seed, End: d.end, Through: d.recordThrough(),
	}
	for i := len(d.req.Messages) - 1; i >= 0; i-- {
		if !d.dropped[i] {
			rec.LastRole = d.req.Messages[i].Role
			break
		}
	}
	kept := 0
	for i := range d.tb {
		if d.tb[i].kept {
			kept++
		}
	}
	if kept > 0 {
		out.Kept = make([]Digest, 0, kept) // a long history's keys: grown by append, copied several times over
	}
	for i := range d.tb {
		t := &d.tb[i]
		p := Pos{t.msg, t.blk}
		if t.kept {
			out.Kept = append(out.Kept, t.key)
			continue
		}
		out.Strips = append(out.Strips, Strip{Pos: p, Key: t.key, Reason: t.reason, Tokens: t.tokens})
		if t.reason.Releases() && t.signed && !t.dup && (d.binds || t.reason != ReasonGap) {
			rec.Strips = append(rec.Strips, Release{Key: t.key, Reason: string(t.reason), Compile: in.ID, Message: t.msg, Path: p.Path()})
		}
	}
	msgs := d.req.Messages
	blocks := 0
	for i := range msgs {
		if !d.dropped[i] {
			blocks += len(msgs[i].Blocks)
		}
	}
	var sent []uint64 // every message's sent blocks, one after another
	if in.Share != nil {
		// scratch: ShareTail below copies out what the record keeps
		rec.Sent = slices.Grow(d.mem.sent[:0], len(msgs))
		rec.Kept = slices.Grow(d.mem.kept[:0], kept)
		sent = slices.Grow(d.mem.blocks[:0], blocks)
	} else {
		rec.Sent = make([]SentMessage, 0, len(msgs))
		rec.Kept = make([]KeptBlock, 0, kept)
		sent = make([]uint64, 0, blocks)
	}
	ti := 0 // d.tb is in request order: the next thinking block's tblock
	for i := range msgs {
		if d.dropped[i] {
			out.Dropped = append(out.Dropped, i)
			continue
		}
		m := &msgs[i]
		sm := SentMessage{Orig: i, Frame: prefix64(m.Frame)}
		if m.Blocks != nil {
			sm.Blocks = sent[len(sent) : len(sent) : len(sent)+len(m.Blocks)]
		}
		for j := range m.Blocks {
			b := &m.Blocks[j]
			if b.Kind == KindMarker {
				continue // takes no place in what the provider reads (converse.go)
			}
			if isThinking(b.Kind) {
				for d.tb[ti].msg < i || (d.tb[ti].msg == i && d.tb[ti].blk < j) {
					ti++ // the thinking blocks of dropped messages
				}
				t := &d.tb[ti]
				if !t.kept {
					continue
				}
				rec.Kept = append(rec.Kept, KeptBlock{Key: t.key, Orig: Pos{i, j}, Sent: Pos{len(rec.Sent), len(sm.Blocks)}, Unreadable: t.unreadable})
				if !t.unreadable {
					rec.LastRead = t.key
				}
				sm.Blocks = append(sm.Blocks, prefix64(b.Key))
				continue
			}
			sm.Blocks = append(sm.Blocks, prefix64(b.Digest))
		}
		sent = sent[:len(sent)+len(sm.Blocks)]
		if sm.Blocks != nil {
			sm.Blocks = sm.Blocks[:len(sm.Blocks):len(sm.Blocks)] // an append elsewhere must not reach the next message's
		}
		rec.Sent = append(rec.Sent, sm)
	}
	out.Cache = firstChange(d.req, rec, in.Owner)
	if in.Share != nil {
		d.mem.sent, d.mem.kept, d.mem.blocks = rec.Sent[:0], rec.Kept[:0], sent[:0]
		ShareTail(rec, in.Share.Base, in.Share.Tip)
	}
	for msg, ids := range d.skipped {
		out.Skipped = append(out.Skipped, StampSkip{Message: msg, Compiles: ids})
	}
	sortSkips(out.Skipped)
	out.Record = rec
	if !in.DryRun {
		out.Persist.Record = rec
		for _, k := range d.attrOrder {
			out.Persist.Stamps = append(out.Persist.Stamps, *d.attributed[k])
		}
	}
	out.Stamped = len(d.attrOrder)
}

func sortSkips(s []StampSkip) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Message < s[j-1].Message; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func prefix64(d Digest) uint64 {
	return uint64(d[0])<<56 | uint64(d[1])<<48 | uint64(d[2])<<40 | uint64(d[3])<<32 |
		uint64(d[4])<<24 | uint64(d[5])<<16 | uint64(d[6])<<8 | uint64(d[7])
}

// position orders places in the request as the host gave it: a message's
// frame (Block -1) before its blocks; past the end is {len, -1}.
type position struct{ msg, blk int }

func (p position) less(q position) bool {
	return p.msg < q.msg || (p.msg == q.msg && p.blk < q.blk)
}

func (p position) path() string {
	if p.blk < 0 {
		return MessagePath(p.msg)
	}
	return Pos{p.msg, p.blk}.Path()
}

// firstChange compares the request as sent (rec) and as the host gave it
// (req) with the owner's request as sent.
func firstChange(req *Request, rec *CompileRecord, owner *CompileRecord) CacheChange {
	if owner == nil {
		return CacheChange{Cause: CauseNone}
	}
	if owner.Seed != req.Seed {
		return CacheChange{Path: "system", Cause: CauseHost}
	}
	sent, ok := firstSentDiff(req, rec, owner)
	if !ok {
		return CacheChange{Cause: CauseNone}
	}
	host, hok := firstHostDiff(req, owner)
	cause := CauseBindery
	if hok && !sent.less(host) {
		cause = CauseHost
	}
	return CacheChange{Path: sent.path(), Cause: cause}
}

// firstSentDiff finds the first difference between what this compile sends
// and what the owner sent, as a position in the host's request. ok is false
// when the owner's request is a prefix of this one (an append).
func firstSentDiff(req *Request, rec, owner *CompileRecord) (position, bool) {
	for si, om := range owner.Sent {
		if si >= len(rec.Sent) {
			return position{origMessage(rec, si), -1}, true
		}
		cm := rec.Sent[si]
		if cm.Frame != om.Frame || (cm.Blocks == nil) != (om.Blocks == nil) {
			return position{origMessage(rec, si), -1}, true
		}
		last := si == len(owner.Sent)-1
		for j, ob := range om.Blocks {
			if j >= len(cm.Blocks) {
				return position{cm.Orig, origBlock(req, rec, si, j)}, true
			}
			if cm.Blocks[j] != ob {
				return position{cm.Orig, origBlock(req, rec, si, j)}, true
			}
		}
		if !last && len(cm.Blocks) != len(om.Blocks) {
			return position{cm.Orig, origBlock(req, rec, si, len(om.Blocks))}, true
		}
	}
	return position{}, false
}

// origBlock is the host's index of the place where the j-th sent block of
// sent message si sits: right after the host block sent as block j-1 (so a
// stripped block is the change, not the block after it).
func origBlock(req *Request, rec *CompileRecord, si, j int) int {
	if j == 0 {
		return 0
	}
	m := &req.Messages[rec.Sent[si].Orig]
	sent := 0
	for k := range m.Blocks {
		b := &m.Blocks[k]
		if b.Kind == KindMarker || isThinking(b.Kind) && !keptIn(rec, Pos{rec.Sent[si].Orig, k}) {
			continue
		}
		sent++
		if sent == j {
			return k + 1
		}
	}
	return len(m.Blocks)
}

// origMessage is the host's index of the place of sent message si: right
// after the message sent before it (a dropped message is the change).
func origMessage(rec *CompileRecord, si int) int {
	if si == 0 {
		return 0
	}
	return rec.Sent[si-1].Orig + 1
}

func keptIn(rec *CompileRecord, p Pos) bool {
	for _, k := range rec.Kept {
		if k.Orig == p {
			return true
		}
	}
	return false
}

// firstHostDiff is firstSentDiff for the host's request before any strip.
func firstHostDiff(req *Request, owner *CompileRecord) (position, bool) {
	for si, om := range owner.Sent {
		if si >= len(req.Messages) {
			return position{len(req.Messages), -1}, true
		}
		m := &req.Messages[si]
		if prefix64(m.Frame) != om.Frame || (m.Blocks == nil) != (om.Blocks == nil) {
			return position{si, -1}, true
		}
		last := si == len(owner.Sent)-1
		// The owner's record leaves markers out; so does this walk (k
		// counts the host's blocks, j the compared ones).
		j, k := 0, 0
		for ; j < len(om.Blocks); j, k = j+1, k+1 {
			for k < len(m.Blocks) && m.Blocks[k].Kind == KindMarker {
				k++
			}
			if k >= len(m.Blocks) || blockID(&m.Blocks[k]) != om.Blocks[j] {
				return position{si, k}, true
			}
		}
		if !last && contentCount(m) != len(om.Blocks) {
			return position{si, k}, true
		}
	}
	return position{}, false
}

func blockID(b *Block) uint64 {
	if isThinking(b.Kind) {
		return prefix64(b.Key)
	}
	return prefix64(b.Digest)
}

// Rewrite returns body (the bytes req was parsed from) with this decision's
// strips and dropped messages cut out, every other byte as the host wrote it.
func (c *Compiled) Rewrite(body []byte, req *Request) []byte {
	if len(c.Strips) == 0 && len(c.Dropped) == 0 {
		return body
	}
	strip := make(map[Pos]bool, len(c.Strips))
	for _, s := range c.Strips {
		strip[s.Pos] = true
	}
	drop := make(map[int]bool, len(c.Dropped))
	for _, m := range c.Dropped {
		drop[m] = true
	}
	return Rewrite(body, req,
		func(m, b int) bool { return strip[Pos{m, b}] },
		func(m int) bool { return drop[m] })
}
