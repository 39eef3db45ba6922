package binding

import (
	"crypto/sha256"
	"encoding/binary"
)

// The message chain is a sequence of steps
//
//	h_0 = ChainStart()
//	h_i = SHA-256(version ‖ 7 ‖ h_{i-1} ‖ kind ‖ d_i)
//
// over, for each message in order, its frame (kind 1, Message.Frame) and then
// each of its content blocks that is not thinking (kind 2, Block.Digest). A
// compaction block resets the chain to ChainStart() before it is stepped in:
// the provider's prefix begins at the most recent compaction block. Thinking,
// redacted thinking and markers (Converse cachePoint blocks) are not stepped. (Thinking minted before an
// on-demand compaction block was swapped in is checked against a second
// chain that continues from what the block replaced: see
// decider.keptChains and Compaction.) Every input has a fixed length, so
// the step is unambiguous; the version makes a future encoding unable to
// match old stamps.

var chainStart = func() Digest {
	var buf [5]byte
	binary.BigEndian.PutUint32(buf[0:4], FramingVersion)
	buf[4] = kindChainStart
	return sha256.Sum256(buf[:])
}()

// ChainStart is the message chain before any message (and right before a
// compaction block).
func ChainStart() Digest { return chainStart }

func step(prev Digest, kind byte, d Digest) Digest {
	var buf [4 + 1 + 32 + 1 + 32]byte
	binary.BigEndian.PutUint32(buf[0:4], FramingVersion)
	buf[4] = kindChainStep
	copy(buf[5:37], prev[:])
	buf[37] = kind
	copy(buf[38:70], d[:])
	return sha256.Sum256(buf[:])
}

// StepFrom steps the chain over m from prev (the chain after the previous
// message sent) and returns the chain after m. It reads only m's stored
// digests. visit, when not nil, is called for every block with the chain
// just before it (chain(b)); for a compaction block that is the value before
// the reset.
func (m *Message) StepFrom(prev Digest, visit func(block int, chain Digest)) Digest {
	h := step(prev, kindMessage, m.Frame)
	for j := range m.Blocks {
		b := &m.Blocks[j]
		if visit != nil {
			visit(j, h)
		}
		switch b.Kind {
		case KindThinking, KindRedacted, KindMarker:
		case KindCompaction:
			h = step(chainStart, kindBlock, b.Digest)
		default:
			h = step(h, kindBlock, b.Digest)
		}
	}
	return h
}

// SentChain recomputes the message chain over what is actually sent when the
// messages for which dropped returns true are left out (a message emptied by
// a thinking strip is dropped from the request; stripping thinking blocks
// alone never changes the chain). It returns, for every original message
// index i, the chain after message i as sent; for a dropped message that is
// the chain after the last kept message before it. dropped may be nil (then
// the result equals each Message.End). It reads only stored digests.
//
// To get chain(b) as sent for the blocks of a kept message i, call
// r.Messages[i].StepFrom(prev, visit) with prev the SentChain value of the
// message before it (ChainStart() for i == 0).
func (r *Request) SentChain(dropped func(msg int) bool) []Digest {
	ends := make([]Digest, len(r.Messages))
	h := chainStart
	for i := range r.Messages {
		if dropped == nil || !dropped(i) {
			h = r.Messages[i].StepFrom(h, nil)
		}
		ends[i] = h
	}
	return ends
}
