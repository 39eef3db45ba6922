package binding

import (
	"bytes"
	"slices"
)

// KnownPrefix is an earlier parse a body may repeat the beginning of: a
// host's next request in a conversation repeats its history, and compile by
// reference rebuilds it from the bytes bindery kept (daemon/bases.go). With
// Parser.Known set, the first Messages of the earlier request are taken
// from Request, their spans moved to where they lie in the new body,
// instead of parsed, scanned and hashed again: a turn's parse then costs
// what the turn added, not the history.
//
// Nothing rests on the caller's word. The prefix is taken only when the
// new body's messages array begins with exactly the earlier bytes of those
// messages (compared, not hashed), read in the same shape (Messages or
// Converse) by a parse that did not refuse them; otherwise the body is
// parsed as if Known were unset. A body built with Place holds the bytes
// Place itself copied, where it copied them: they are equal by
// construction, and are not compared a second time (the compare was a
// fifth of a long conversation's turn, over bytes just copied). Equal bytes in the same shape are equal,
// already validated values with the same blocks, digests and chain (the
// chain starts at ChainStart whatever the seed), so the Request is exactly
// the one a parse without Known returns (TestParseKnownIsParse,
// FuzzParseKnown).
type KnownPrefix struct {
	Body     []byte   // the earlier request's body
	Request  *Request // Body's parse (bound: a body whose messages were refused as another API's is no prefix)
	Messages int      // how many of its messages the new body may begin with

	// placed is where Place copied the prefix's bytes, placedLen how many.
	placed    *byte
	placedLen int
}

// prefix is the span of Body the first Messages messages take, when it is
// one (ok false: the KnownPrefix offers nothing).
func (k *KnownPrefix) prefix() (from, to int, ok bool) {
	if k.Request == nil || k.Messages < 1 || k.Messages > len(k.Request.Messages) {
		return 0, 0, false
	}
	ms := k.Request.Messages[:k.Messages]
	from, to = ms[0].Span.Start, ms[len(ms)-1].Span.End
	return from, to, from >= 0 && to <= len(k.Body) && from < to
}

// Place appends the prefix's bytes (its messages, as they lie in Body,
// without the array's brackets) to out, and remembers where they went.
// A body whose messages array begins right there, at the same address,
// takes them without comparing them again: the caller must not write over
// them before the parse. Memory Place copied into that is no longer that
// body (out grown by a later append, moved, reused) is compared as any
// other, and so is a second parse after the one that used the placement.
// A KnownPrefix that offers nothing appends nothing.
func (k *KnownPrefix) Place(out []byte) []byte {
	from, to, ok := k.prefix()
	if !ok {
		return out
	}
	n := len(out)
	out = append(out, k.Body[from:to]...)
	k.placed, k.placedLen = &out[n], to-from
	return out
}

// PlacedAt records that out, the memory of Body itself, already holds the
// prefix's bytes where they lie in Body (a caller that extends the earlier
// body in place, writing only after the prefix): the parse takes them as
// it takes a placement, without comparing them. It reports false, and
// records nothing, when out is not Body's memory there.
func (k *KnownPrefix) PlacedAt(out []byte) bool {
	from, to, ok := k.prefix()
	if !ok || len(out) < to || &out[from] != &k.Body[from] {
		return false
	}
	k.placed, k.placedLen = &out[from], to-from
	return true
}

// takeInPlace takes the known messages ms where they lie, in ext, the
// known request's own memory (Parser.Spare): the new request's arrays are
// ext's, the known messages and their blocks at its start, untouched, and
// the rest is written after them. A long conversation's parse copied its
// whole history's messages and blocks each turn (most of a turn's parse).
// It reports false, having changed nothing, unless ext's arrays begin with
// exactly ms and their blocks (a Request's parse lays them out so, in
// order). rest is the body's bytes after the known messages.
func (p *Parser) takeInPlace(ms []Message, ext RequestMemory, rest int) bool {
	if cap(ext.Messages) < len(ms) || &ext.Messages[:1][0] != &ms[0] {
		return false
	}
	p.bstart = slices.Grow(p.bstart, len(ms)+16)
	p.memoOf = slices.Grow(p.memoOf, len(ms)+16)
	nb, first, last := 0, -1, -1
	for i := range ms {
		if ms[i].Blocks == nil {
			p.bstart = append(p.bstart, -1)
		} else {
			if len(ms[i].Blocks) > 0 {
				if first < 0 {
					first = i
				}
				last = i
			}
			p.bstart = append(p.bstart, nb)
			nb += len(ms[i].Blocks)
		}
		p.memoOf = append(p.memoOf, nil)
	}
	if nb > 0 {
		fb, lb := ms[first].Blocks, ms[last].Blocks
		if cap(ext.Blocks) < nb || &ext.Blocks[:nb][0] != &fb[0] || &ext.Blocks[:nb][nb-1] != &lb[len(lb)-1] {
			p.bstart, p.memoOf = p.bstart[:len(p.bstart)-len(ms)], p.memoOf[:len(p.memoOf)-len(ms)]
			return false
		}
	}
	// Grown here, a copy as any append's (the room a parse makes lets most
	// turns write in place); the known messages read the same either way.
	p.msgs = slices.Grow(ext.Messages[:len(ms)], 16+rest/4096)
	p.blocks = slices.Grow(ext.Blocks[:nb], 16+rest/512)
	p.inPlace = true
	return true
}

// KnownTaken is how many messages the last Parse took from Known.
func (p *Parser) KnownTaken() int { return p.known }

// takeKnown takes the known prefix at c.pos, the first element of the
// messages array, and returns how many messages it took (0: none, and
// nothing was consumed). c.pos is left just past the last one.
func (p *Parser) takeKnown() int {
	k := p.Known
	c := &p.c
	at, atLen := k.placed, k.placedLen
	k.placed, k.placedLen = nil, 0 // one parse uses a placement: the memory may hold other bytes later
	from, to, ok := k.prefix()
	if !ok || !k.Request.Bound || k.Request.NotMessages != "" || k.Request.Converse != p.converse ||
		(p.MaxMessages > 0 && k.Messages > p.MaxMessages) || c.pos+(to-from) > len(c.in) {
		return 0
	}
	if placed := at != nil && atLen == to-from && &c.in[c.pos] == at; !placed &&
		!bytes.Equal(c.in[c.pos:c.pos+(to-from)], k.Body[from:to]) {
		return 0
	}
	ms := k.Request.Messages[:k.Messages]
	delta := c.pos - from
	if ext := p.extend; ext.Messages != nil && delta == 0 && p.msgs == nil && p.blocks == nil {
		p.extend = RequestMemory{} // one pass: a second one (as Converse) parses afresh
		if p.takeInPlace(ms, ext, len(c.in)-(to-from)) {
			c.pos += to - from
			p.known = len(ms)
			return len(ms)
		}
	}
	nb := 0
	for i := range ms {
		nb += len(ms[i].Blocks)
	}
	// Sized once for the prefix and the rest of the body at the
	// estimate messages() makes; each message's blocks are copied whole
	// (one memmove a message: the copy is most of a long conversation's
	// parse), their spans moved after.
	rest := len(c.in) - (to - from)
	if p.msgs == nil && p.blocks == nil {
		p.msgs, p.blocks = p.spare(len(ms)+16+rest/4096, nb+16+rest/512)
	}
	p.msgs = slices.Grow(p.msgs, len(ms)+16+rest/4096)
	p.blocks = slices.Grow(p.blocks, nb+16+rest/512)
	m0, b0 := len(p.msgs), len(p.blocks)
	p.bstart = slices.Grow(p.bstart, len(ms)+16)
	p.memoOf = slices.Grow(p.memoOf, len(ms)+16)
	p.msgs = append(p.msgs, ms...)
	for i := range ms {
		m := &p.msgs[m0+i]
		m.Span.Start += delta
		m.Span.End += delta
		if m.Blocks == nil {
			p.bstart = append(p.bstart, -1)
		} else {
			p.bstart = append(p.bstart, len(p.blocks))
			p.blocks = append(p.blocks, m.Blocks...)
		}
		m.Blocks = nil // set from p.blocks at the end of the parse
		p.memoOf = append(p.memoOf, nil)
	}
	if delta != 0 {
		for i := b0; i < len(p.blocks); i++ {
			p.blocks[i].Span.Start += delta
			p.blocks[i].Span.End += delta
		}
	}
	c.pos += to - from
	p.known = len(ms)
	return len(ms)
}
