package daemon

import (
	"bytes"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
)

// A turn by reference rebuilds its whole request from its base's bytes:
// copying a long conversation's history each turn was the largest single
// cost of a turn that grew with the history (KnownPrefix.Place's memmove,
// BenchmarkTurnByReference). Where it can, rebuild instead extends the
// base's body in place: the shared messages stay where they lie and the
// host's new messages are written after them, in the room the body was
// made with (spareFor), so a turn writes only what is new and the
// history is copied once per that room's worth of turns.
//
// Extending writes over what the base held after the shared messages, so
// (decisions where the design is silent, each pinned by TestBaseExtended):
//   - only a body rebuild made (ownBody), that no answer holds (lent), that
//     no other compile reads (refs), for a compile that keeps its own
//     (not a dry run), with the room for the new bytes, and whose bytes
//     before the messages are the new request's;
//   - the base holds only the shared messages from then on (held): a
//     later compile naming more of them is refused as base_mismatch and
//     the host compiles in full, which a retry naming as many or fewer
//     does not need;
//   - the memory is then shared (arena), the body's and the parse's: it
//     is never a spare again, and a later extension must not write below
//     what any base sharing it still holds (floor), so a host that goes
//     back to fewer messages gets a copy.

// arena is one body's memory shared by the bases extension made in it.
type arena struct {
	// floor is the end of the bytes a base that is not the newest still
	// holds: no extension writes below it.
	floor int
}

// extend is rebuild's body for call made in base b's own memory: b's body
// cut after the shared messages, with its capacity, when b may be
// extended (see above), and b's parse memory, for the compile's parse to
// extend the same way (binding.Parser.Spare: the parse keeps b's shared
// messages where they lie and writes the rest after them, or leaves the
// memory alone); ok false otherwise, and b is unchanged. The caller
// appends the new messages. start is where the host's messages array
// begins in call.Request; empty, that it holds no message.
func (s *baseStore) extend(b *base, call *api.CompileCall, start int, empty bool) (out []byte, mem binding.RequestMemory, a *arena, ok bool) {
	ref, tail := call.Base, call.Request
	if call.DryRun {
		return nil, binding.RequestMemory{}, nil, false
	}
	msgs := b.req.Messages
	pe := msgs[ref.Messages-1].Span.End
	need := len(tail) - (start + 1)
	if !empty {
		need++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !b.ownBody || b.lent || b.refs != 1:
	case b.arena != nil && pe < b.arena.floor:
	case cap(b.body)-pe < need:
	case !bytes.Equal(b.body[:msgs[0].Span.Start], tail[:start+1]):
	default:
		a = b.arena
		if a == nil {
			a = &arena{}
		}
		a.floor = max(a.floor, pe)
		out, mem = b.body[:pe], b.mem
		b.body, b.held, b.arena, b.mem = b.body[:pe:pe], ref.Messages, a, binding.RequestMemory{}
		s.spares.extended++
		return out, mem, a, true
	}
	return nil, binding.RequestMemory{}, nil, false
}
