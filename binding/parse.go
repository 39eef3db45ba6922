package binding

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sort"
)

// Parser parses Messages request bodies, reusing its scratch buffers from one
// call to the next (so they grow to the largest body parsed). The zero value
// is ready to use. A Parser is not safe for concurrent use; the Requests it
// returns share nothing with it.
type Parser struct {
	c       canon
	scratch []byte
	blocks  []Block      // the current request's blocks (owned by the Request)
	bstart  []int        // per message: index of its first block in blocks, or -1
	memoOf  []*memoEntry // per message: its memo entry, if any
	msgs    []Message

	// foreign is why the body is not a Messages body ("" while it may be
	// one); msgForeign, that the message being parsed is another API's
	// (such a message is never remembered in the Memo).
	foreign    string
	msgForeign bool
	manual     bool // Converse: additionalModelRequestFields.thinking.type is "enabled"
	// converse: the body is being read as Bedrock Converse (converse.go);
	// untyped: a Messages read met a content block without a string type.
	converse bool
	untyped  bool
	fixed    bool // the shape is given: never switch
	known    int  // messages taken from Known in this parse (they start the array)
	// extend is Spare when it is the Known request's own memory, which
	// takeKnown extends in place (parse_known.go); inPlace, that it did.
	extend  RequestMemory
	inPlace bool

	// trace, when set (tests only), sees every framed canonical form:
	// kind and the canonical bytes (without the header); kind 0 (no
	// bytes) when a second pass starts, which frames the body anew.
	trace func(kind byte, canon []byte)

	// Memo, when set, lets Parse skip messages seen before (see Memo).
	Memo *Memo

	// Known, when set, names an earlier parse whose first messages the
	// body's messages array may begin with (parse_known.go): those are
	// taken from it, checked byte for byte, instead of parsed again. One
	// Parse uses it; the caller sets it before each.
	Known *KnownPrefix

	// Spare, when set, is memory of an earlier Request that nothing reads
	// any more (RequestMemory): the parse builds its Request in it where it
	// is large enough, instead of allocating (and the runtime zeroing) a
	// long conversation's messages and blocks again every turn. It must
	// not be the memory of any Request still read, with one exception: it
	// may be the Known request's own memory, when the caller gives up what
	// that Request holds after its first Known.Messages messages; the parse
	// then keeps those where they lie and builds the rest after them
	// (parse_known.go), or, when it cannot take them, leaves that memory
	// alone. One Parse uses it; the caller sets it before each.
	Spare RequestMemory
	built RequestMemory

	// MaxMessages, when positive, bounds the messages array: a longer one
	// fails with an error wrapping ErrTooManyMessages, before the work of
	// the messages past the bound is done.
	MaxMessages int

	// Done, when set, ends the parse early once it is closed (the caller's
	// context ended): Parse returns an error wrapping ErrCanceled. It is
	// checked every cancelCheck messages; one message costs at most its
	// bytes.
	Done <-chan struct{}

	hash hash.Hash // SHA-256, for lazyDigest
	hdr  [frameHeaderLen]byte
	sum  []byte
}

// ErrTooManyMessages is wrapped by Parse's error for a messages array longer
// than Parser.MaxMessages.
var ErrTooManyMessages = errors.New("too many messages")

// ErrCanceled is wrapped by Parse's error when Parser.Done closed.
var ErrCanceled = errors.New("parse canceled")

// cancelCheck is how many messages Parse handles between looks at Done.
const cancelCheck = 64

// ParseRequest parses an Anthropic Messages request body in one pass and
// computes its canonical digests (see Parser.Parse).
func ParseRequest(body []byte) (*Request, error) {
	var p Parser
	return p.Parse(body)
}

// Parse parses an Anthropic Messages request body in one pass over its bytes
// and computes the seed, every message frame, every block digest and the
// message chain.
//
// The body must be valid JSON (as json.Valid judges it, including its
// nesting limit) with no object anywhere holding two members whose keys
// decode to the same string (the provider refuses those; the error wraps
// ErrDuplicateKey), and its top-level value must be an object. A valid object
// without a "messages" array parses with Bound false and a nil error. Spans
// are byte offsets into body.
//
// Block.Tokens is an estimate for reports only: the block's bytes in the body
// divided by 4, rounded up.
//
// A Bedrock Converse body (converse.go) is read by the same pass into the
// same Request, with Converse set. Which shape a body has is known from its
// top-level members; when the first member that tells is met after the
// messages (or system, or tools) were read as Messages, the body is read
// again as Converse, so that a body is read in one pass in the usual member
// order (pi writes modelId first) and correctly in any order.
func (p *Parser) Parse(body []byte) (*Request, error) {
	return p.parseAs(body, false, false)
}

// parseAs parses body, as a Converse body from the start when converse is
// true; fixed keeps the shape it starts with (ParseReply knows the shape).
func (p *Parser) parseAs(body []byte, converse, fixed bool) (r *Request, err error) {
	defer func() { p.done(err == nil) }()
	p.converse, p.fixed = converse, fixed
	p.extend = RequestMemory{}
	if k := p.Known; k != nil && k.Request != nil && len(k.Request.Messages) > 0 &&
		cap(p.Spare.Messages) > 0 && &p.Spare.Messages[:1][0] == &k.Request.Messages[0] {
		p.extend, p.Spare = p.Spare, RequestMemory{} // never a spare to write over
	}
	r, err = p.parse(body)
	if err == errReadAsConverse {
		if p.trace != nil {
			p.trace(0, nil) // the frames seen so far were the first pass's
		}
		p.converse = true
		r, err = p.parse(body)
	}
	return r, err
}

// parse is one pass over body in the shape p.converse names (it may switch
// to Converse before anything shape-dependent is read, or ask for a second
// pass with errReadAsConverse).
func (p *Parser) parse(body []byte) (*Request, error) {
	c := &p.c
	*c = canon{in: body, out: c.out[:0], kbuf: c.kbuf[:0], tmp: c.tmp[:0], mem: c.mem[:0]}
	p.blocks, p.bstart, p.msgs = nil, p.bstart[:0], nil
	p.foreign, p.untyped, p.manual = "", false, false
	p.known, p.inPlace = 0, false
	clear(p.memoOf)
	p.memoOf = p.memoOf[:0]
	r := &Request{}
	c.ws()
	if c.pos >= len(body) {
		return nil, c.unexpected()
	}
	if body[c.pos] != '{' {
		return nil, c.fail(c.pos, "request body is not a JSON object")
	}
	var sys, tools, native Digest
	var hasSys, hasTools, hasNative bool
	objStart := c.pos
	c.depth = 1
	c.pos++
	c.ws()
	if c.pos < len(body) && body[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.ws()
			if c.pos >= len(body) || body[c.pos] != '"' {
				return nil, c.unexpected()
			}
			seg0 := len(c.out)
			kraw := c.pos
			esc, err := c.str()
			if err != nil {
				return nil, err
			}
			m := member{seg0: seg0, keyEnc: len(c.out) - seg0, at: kraw}
			if esc {
				m.k0 = len(c.kbuf)
				c.kbuf = decodeString(c.kbuf, body[kraw:c.pos])
				m.k1 = len(c.kbuf)
			} else {
				m.k0, m.k1, m.kIn = kraw+1, c.pos-1, true
			}
			m.seg1 = len(c.out)
			c.mem = append(c.mem, m)
			c.ws()
			if c.pos >= len(body) || body[c.pos] != ':' {
				return nil, c.unexpected()
			}
			c.pos++
			c.ws()
			mark := len(c.out)
			vstart := c.pos
			isArr := c.pos < len(body) && body[c.pos] == '['
			key := c.key(&m)
			if !p.converse && !p.fixed && converseTopKey(key) {
				if r.Bound || hasSys || hasTools {
					return nil, errReadAsConverse
				}
				p.converse = true
			}
			switch {
			case string(key) == "messages" && isArr:
				r.Bound = true
				if err := p.messages(); err != nil {
					return nil, err
				}
			case string(key) == "system":
				if p.converse {
					sys, err = p.converseSeedPart(isArr, kindSystem)
				} else {
					sys, err = p.seedPart(isArr, modeMarked, kindSystem)
				}
				if err != nil {
					return nil, err
				}
				hasSys = true
			case string(key) == "tools" && !p.converse:
				if tools, err = p.seedPart(isArr, modeTool, kindTools); err != nil {
					return nil, err
				}
				hasTools = true
			case string(key) == "toolConfig" && p.converse:
				if tools, hasTools, err = p.converseToolConfig(); err != nil {
					return nil, err
				}
			case string(key) == "additionalModelRequestFields" && p.converse:
				if native, hasNative, err = p.converseNativeFields(); err != nil {
					return nil, err
				}
			default:
				if err := c.value(); err != nil {
					return nil, err
				}
				if string(key) == p.modelKey() && body[vstart] == '"' {
					r.Model = string(p.decoded(Span{vstart, c.pos}))
				}
				if string(key) == "thinking" && !p.converse {
					r.Manual = manualThinking(body, vstart)
				}
				if why := foreignTopKey(key); why != "" && p.foreign == "" {
					p.foreign = why
				}
			}
			c.out = c.out[:mark]
			c.ws()
			if c.pos >= len(body) {
				return nil, c.unexpected()
			}
			if body[c.pos] == ',' {
				c.pos++
				continue
			}
			if body[c.pos] != '}' {
				return nil, c.unexpected()
			}
			c.pos++
			break
		}
		if err := c.sortMembers(0, -1, objStart); err != nil {
			return nil, err
		}
	}
	c.ws()
	if c.pos != len(body) {
		return nil, c.unexpected()
	}
	if !p.converse && !p.fixed && p.untyped && p.foreign == whyUntyped {
		// Typeless content blocks and nothing else foreign: the keyed
		// blocks of a Converse body sent without its other members.
		return nil, errReadAsConverse
	}
	r.Converse = p.converse
	if p.converse {
		r.Manual = p.manual
		r.Seed = converseSeedDigest(hasSys, sys, hasTools, tools, hasNative, native)
	} else {
		r.Seed = seedDigest(hasSys, sys, hasTools, tools)
	}
	if !r.Bound {
		return r, nil
	}
	r.Messages = p.msgs
	e := len(p.blocks)
	last := 0
	if p.inPlace {
		last = p.known // the known messages' blocks stay where they lie
	}
	for i := len(r.Messages) - 1; i >= last; i-- {
		if s := p.bstart[i]; s >= 0 {
			r.Messages[i].Blocks = p.blocks[s:e:e]
			e = s
		}
	}
	r.thinking = p.thinkingOf(r)
	h := ChainStart()
	if p.known > 0 {
		// The known prefix starts the array: its chain values are the
		// earlier parse's (the chain starts at ChainStart, seed aside).
		h = r.Messages[p.known-1].End
	}
	for i := p.known; i < len(r.Messages); i++ {
		m := &r.Messages[i]
		e := p.memoOf[i]
		if e != nil && e.chained && e.prev == h {
			// Same bytes after the same chain: same chain values.
			for j := range m.Blocks {
				m.Blocks[j].Chain = e.chains[j]
			}
			h = e.end
		} else {
			prev := h
			h = m.StepFrom(h, func(j int, before Digest) { m.Blocks[j].Chain = before })
			if e != nil {
				e.chained, e.prev, e.end = true, prev, h
				e.chains = e.chains[:0]
				for j := range m.Blocks {
					e.chains = append(e.chains, m.Blocks[j].Chain)
				}
			}
		}
		m.End = h
	}
	if p.foreign != "" {
		// Another API's body: nothing in it is bindery's to compile or
		// remember (foreign.go). Its messages stay parsed, for tests.
		r.Bound, r.NotMessages = false, p.foreign
	}
	return r, nil
}

// thinkingOf is where r's thinking blocks are (Request.thinking): the
// known request's, for the messages taken from it, then those of the
// messages parsed. Never nil.
func (p *Parser) thinkingOf(r *Request) []thinkingAt {
	var out []thinkingAt
	if p.known > 0 {
		kt := p.Known.Request.thinkingBlocks()
		cut := sort.Search(len(kt), func(i int) bool { return int(kt[i].msg) >= p.known })
		out = append(make([]thinkingAt, 0, cut+16), kt[:cut]...)
	}
	out = appendThinking(out, r.Messages, p.known)
	if out == nil {
		out = []thinkingAt{}
	}
	return out
}

// RequestMemory is the arrays a parsed Request is built in: its messages,
// and the blocks every message's Blocks is a part of.
type RequestMemory struct {
	Messages []Message
	Blocks   []Block
}

// Built hands over the memory the last Parse built its Request in (empty
// after a failed parse, and after a call to Built): the caller may give it
// to a later parse as Spare once nothing reads that Request.
func (p *Parser) Built() RequestMemory {
	m := p.built
	p.built = RequestMemory{}
	return m
}

// spare is the Spare memory when it holds at least the capacities asked,
// emptied; else new arrays of those capacities and room for more (an
// eighth, at least 32). The room is what lets the memory be a spare
// again: a long conversation's next turns ask a few messages more each,
// and arrays made to the exact size asked never held the next ask (every
// turn made new arrays, zeroed: a tenth of a turn past 1 MB of history).
func (p *Parser) spare(msgs, blocks int) ([]Message, []Block) {
	if cap(p.Spare.Messages) >= msgs && cap(p.Spare.Blocks) >= blocks {
		return p.Spare.Messages[:0], p.Spare.Blocks[:0]
	}
	return make([]Message, 0, msgs+max(msgs/8, 32)), make([]Block, 0, blocks+max(blocks/8, 32))
}

// done ends a Parse: the parser keeps its scratch buffers (as large as the
// largest body parsed) but no reference to the body or the request (its
// memory waits in built for Built, when the parse succeeded).
func (p *Parser) done(ok bool) {
	p.c.in = nil
	p.Known = nil
	p.Spare, p.extend = RequestMemory{}, RequestMemory{}
	p.built = RequestMemory{}
	if ok {
		p.built = RequestMemory{Messages: p.msgs, Blocks: p.blocks}
	}
	p.blocks, p.msgs = nil, nil
	clear(p.memoOf)
	if p.Memo != nil {
		p.Memo.endParse()
	}
}

// seedDigest frames system and tools (each present or absent) into one
// digest: an absent system and an empty-string system differ, as do absent
// tools and an empty tools array (conservative: a host that flips between
// them costs a strip, never a refusal).
func seedDigest(hasSys bool, sys Digest, hasTools bool, tools Digest) Digest {
	var buf [4 + 1 + 1 + 32 + 1 + 32]byte
	binary.BigEndian.PutUint32(buf[0:4], FramingVersion)
	buf[4] = kindSeed
	if hasSys {
		buf[5] = 1
		copy(buf[6:38], sys[:])
	}
	if hasTools {
		buf[38] = 1
		copy(buf[39:71], tools[:])
	}
	return sha256.Sum256(buf[:])
}

// digest frames out[hdr:] and shows it to the trace hook.
func (p *Parser) digest(hdr int, kind byte) Digest {
	if p.trace != nil {
		p.trace(kind, p.c.out[hdr+frameHeaderLen:])
	}
	return p.c.frameDigest(hdr, kind)
}

// punct holds the bytes lazyDigest writes between members.
var punct = []byte("{,}")

// lazyDigest frames the object whose members objectAt left sorted in
// c.mem[base:] (their bytes in out, in input order): the same digest
// frameDigest would give over the permuted canonical bytes.
func (p *Parser) lazyDigest(base int, kind byte) Digest {
	c := &p.c
	ms := c.mem[base:]
	n, k := 2, 0
	for i := range ms {
		if !ms[i].omit {
			n += ms[i].seg1 - ms[i].seg0
			k++
		}
	}
	if k > 1 {
		n += k - 1
	}
	if p.trace != nil {
		canon := append([]byte(nil), '{')
		for i, j := range p.lazyOrder(ms) {
			if i > 0 {
				canon = append(canon, ',')
			}
			canon = append(canon, c.out[ms[j].seg0:ms[j].seg1]...)
		}
		p.trace(kind, append(canon, '}'))
	}
	if p.hash == nil {
		p.hash = sha256.New()
	}
	h := p.hash
	h.Reset()
	binary.BigEndian.PutUint32(p.hdr[0:4], FramingVersion)
	p.hdr[4] = kind
	binary.BigEndian.PutUint64(p.hdr[5:13], uint64(n))
	h.Write(p.hdr[:])
	h.Write(punct[0:1])
	first := true
	for i := range ms {
		if ms[i].omit {
			continue
		}
		if !first {
			h.Write(punct[1:2])
		}
		first = false
		h.Write(c.out[ms[i].seg0:ms[i].seg1])
	}
	h.Write(punct[2:3])
	p.sum = h.Sum(p.sum[:0])
	return Digest(p.sum)
}

// lazyOrder lists the indices of the members that are written (tests only).
func (p *Parser) lazyOrder(ms []member) []int {
	var idx []int
	for i := range ms {
		if !ms[i].omit {
			idx = append(idx, i)
		}
	}
	return idx
}

// decoded returns the decoded value of the string literal at s (valid,
// quotes included), in the input when it has no escapes, else in scratch.
func (p *Parser) decoded(s Span) []byte {
	raw := p.c.in[s.Start:s.End]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	p.scratch = decodeString(p.scratch[:0], raw)
	return p.scratch
}

// seedPart digests the value of system or tools at c.pos: an array's
// object elements in mode (cache_control markers out, deferred tools out),
// any other value as data.
func (p *Parser) seedPart(isArr bool, mode objMode, kind byte) (Digest, error) {
	c := &p.c
	hdr := c.reserveHeader()
	var err error
	if isArr {
		err = c.markedArray(mode)
	} else {
		err = c.value()
	}
	if err != nil {
		return Digest{}, err
	}
	return p.digest(hdr, kind), nil
}

// markedArray canonicalizes a system or tools array: object elements in the
// given mode (top-level cache_control is a marker); deferred tools left out.
func (c *canon) markedArray(mode objMode) error {
	return c.filteredArray(func() (bool, error) {
		if c.pos < len(c.in) && c.in[c.pos] == '{' {
			var w watch
			err := c.object(mode, &w)
			// A deferred tool is not part of the prefix until a
			// tool_addition in a message references it.
			return !w.deferred, err
		}
		return true, c.value()
	})
}

// filteredArray canonicalizes the array at c.pos, each element by elem,
// which says whether the element stays: one it leaves out is cut from the
// output, separator and all.
func (c *canon) filteredArray(elem func() (keep bool, err error)) error {
	if empty, err := c.openArrayOut(); err != nil || empty {
		return err
	}
	n := 0
	for {
		c.ws()
		mark := len(c.out)
		if n > 0 {
			c.out = append(c.out, ',')
		}
		keep, err := elem()
		if err != nil {
			return err
		}
		if keep {
			n++
		} else {
			c.out = c.out[:mark]
		}
		more, err := c.afterElement()
		if err != nil {
			return err
		}
		if !more {
			c.out = append(c.out, ']')
			return nil
		}
	}
}

// messages parses the messages array at c.pos.
func (p *Parser) messages() error {
	c := &p.c
	if empty, err := c.openArray(); err != nil || empty {
		if empty {
			p.msgs = []Message{}
		}
		return err
	}
	if p.msgs == nil && p.Known == nil {
		// (takeKnown sizes them from the known prefix instead: made here
		// too, they were a second large allocation, zeroed and dropped)
		p.msgs, p.blocks = p.spare(1+len(c.in)/4096, 4+len(c.in)/512)
	}
	for {
		n := len(p.msgs)
		if p.MaxMessages > 0 && n >= p.MaxMessages {
			return fmt.Errorf("%w: the messages array holds more than %d messages", ErrTooManyMessages, p.MaxMessages)
		}
		if p.Done != nil && n%cancelCheck == 0 {
			select {
			case <-p.Done:
				return fmt.Errorf("%w after %d messages", ErrCanceled, n)
			default:
			}
		}
		c.ws()
		if n == 0 && p.Known != nil {
			if k := p.takeKnown(); k > 0 {
				if more, err := c.afterElement(); err != nil || !more {
					return err
				}
				continue
			}
			if p.msgs == nil {
				p.msgs, p.blocks = p.spare(1+len(c.in)/4096, 4+len(c.in)/512)
			}
		}
		if e := p.Memo.lookup(c.in, c.pos, p.converse); e != nil {
			p.msgs = append(p.msgs, p.fromMemo(e))
			p.memoOf = append(p.memoOf, e)
		} else {
			first := len(p.blocks)
			m, err := p.message()
			if err != nil {
				return err
			}
			var e *memoEntry
			if p.Memo != nil && !p.msgForeign {
				e = p.Memo.add(c.in[m.Span.Start:m.Span.End], &m, p.blocks[first:], p.bstart[len(p.bstart)-1] >= 0, p.converse)
			}
			p.msgs = append(p.msgs, m)
			p.memoOf = append(p.memoOf, e)
		}
		if more, err := c.afterElement(); err != nil || !more {
			return err
		}
	}
}

// fromMemo takes the message at c.pos from a memo entry whose raw bytes are
// exactly the element there.
func (p *Parser) fromMemo(e *memoEntry) Message {
	c := &p.c
	m := Message{Role: e.role, Span: Span{c.pos, c.pos + len(e.raw)}, Frame: e.frame}
	if e.array {
		p.bstart = append(p.bstart, len(p.blocks))
		for _, b := range e.blocks {
			b.Span.Start += c.pos
			b.Span.End += c.pos
			p.blocks = append(p.blocks, b)
		}
	} else {
		p.bstart = append(p.bstart, -1)
	}
	c.pos += len(e.raw)
	return m
}

// message parses one element of the messages array at c.pos: its frame (the
// message with a content array replaced by []) and its blocks.
func (p *Parser) message() (Message, error) {
	c := &p.c
	start := c.pos
	hdr := c.reserveHeader()
	var m Message
	p.bstart = append(p.bstart, -1)
	p.msgForeign = false
	mi := len(p.bstart) - 1
	if c.pos < len(c.in) && c.in[c.pos] == '{' {
		w := watch{onContent: func() error {
			p.bstart[mi] = len(p.blocks)
			if p.converse {
				return p.converseContent()
			}
			return p.content()
		}}
		if err := c.object(modeMessage, &w); err != nil {
			return m, err
		}
		if isString(c.in, w.role) {
			m.Role = internRole(p.decoded(w.role))
		}
		switch {
		case p.converse && m.Role != "user" && m.Role != "assistant":
			p.notMessages("a Converse message whose role is not user or assistant")
		case p.converse && !w.content:
			p.notMessages("a Converse message whose content is not an array")
		case m.Role != "user" && m.Role != "assistant" && m.Role != "system":
			p.notMessages("a message whose role is not user, assistant or system")
		case !w.content && !w.contentStr:
			p.notMessages("a message whose content is neither a string nor an array")
		case w.foreign:
			p.notMessages("a message member only OpenAI chat messages have")
		}
	} else {
		if err := c.value(); err != nil {
			return m, err
		}
		p.notMessages("a message that is not an object")
	}
	m.Span = Span{start, c.pos}
	m.Frame = p.digest(hdr, kindMessage)
	c.out = c.out[:hdr]
	return m, nil
}

func internRole(b []byte) string {
	switch string(b) {
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "system":
		return "system"
	}
	return string(b)
}

// content parses a message's content array at c.pos, block by block. Each
// block's canonical bytes are written above the message's, digested, and
// truncated away.
func (p *Parser) content() error {
	c := &p.c
	if empty, err := c.openArray(); err != nil || empty {
		return err
	}
	for {
		c.ws()
		start := c.pos
		hdr := c.reserveHeader()
		var w watch
		var err error
		base := len(c.mem)
		lazy := c.pos < len(c.in) && c.in[c.pos] == '{'
		if lazy {
			err = c.objectAt(modeBlock, &w, true)
		} else {
			err = c.value()
		}
		if err != nil {
			return err
		}
		b := Block{Span: Span{start, c.pos}, Tokens: (c.pos - start + 3) / 4}
		if !isString(c.in, w.typ) {
			// Every Messages content block is typed; Converse's are
			// keyed by member ({text}, {toolUse}, {reasoningContent}).
			p.notMessages(whyUntyped)
			p.untyped = true
		} else {
			switch string(p.decoded(w.typ)) {
			case "thinking":
				b.Kind = KindThinking
			case "redacted_thinking":
				b.Kind = KindRedacted
			case "compaction":
				b.Kind = KindCompaction
			case "tool_result":
				b.Result = true
			}
		}
		switch b.Kind {
		case KindThinking:
			b.Key, b.Signed = p.blockKey(w.sig)
		case KindRedacted:
			b.Key, b.Signed = p.blockKey(w.data)
		default:
			if lazy {
				b.Digest = p.lazyDigest(base, kindBlock)
			} else {
				b.Digest = p.digest(hdr, kindBlock)
			}
			if b.Kind == KindCompaction {
				// An on-demand block is signed; a threshold block was seen
				// unsigned (research 6). Only a signed one can stand for
				// the messages it replaced (Compaction).
				_, b.Signed = p.blockKey(w.sig)
			}
		}
		c.mem = c.mem[:base]
		c.out = c.out[:hdr]
		p.blocks = append(p.blocks, b)
		if more, err := c.afterElement(); err != nil || !more {
			return err
		}
	}
}

// manualThinking reports whether the valid value at start is a thinking
// configuration object whose type is "enabled".
func manualThinking(in []byte, start int) bool {
	if in[start] != '{' {
		return false
	}
	for k, v, e, i, ok := nextMember(in, start+1); ok; k, v, e, i, ok = nextMember(in, i) {
		if rawKeyIs(k, "type") {
			return in[v] == '"' && string(decodeString(nil, in[v:e])) == "enabled"
		}
	}
	return false
}

// blockKey is the SHA-256 of the decoded signature (thinking) or data
// (redacted_thinking); zero, unsigned, when absent, empty or not a string.
func (p *Parser) blockKey(s Span) (Digest, bool) {
	if !isString(p.c.in, s) {
		return Digest{}, false
	}
	v := p.decoded(s)
	if len(v) == 0 {
		return Digest{}, false
	}
	return sha256.Sum256(v), true
}
