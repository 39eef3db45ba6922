package daemon

import (
	"unsafe"

	"github.com/my-pi/bindery/binding"
)

// A long conversation's turn by reference rebuilds its whole request and
// parses it into a whole Request: a few MB of new memory a turn, which the
// runtime zeroes (or faults in) before the copy, and which was most of a
// turn's cost past the first MB of history (BenchmarkTurnByReference). The
// base a turn drops (basesPerConversation) is of nearly the same size, so
// its memory is kept as a spare and the next rebuild writes into it.
//
// A base's memory is reused only when nothing can read it any more
// (decisions, each pinned by TestBaseMemoryReuse):
//   - it is dropped from the store and no compile holds it (refs: a compile
//     by reference reads its base's body and parse from rebuild to the end
//     of its own parse);
//   - its body only when rebuild made it (a host's body is the API
//     layer's), no answer holds it (lent: a compile that returned the
//     whole request may answer with the body itself) and no other base
//     shares its memory (arena, bases_extend.go); its parse's memory
//     (binding.RequestMemory) unless another base shares it, with the body
//     or alone (no answer holds a Request: compileAnswer runs before the
//     base is kept);
//   - at most maxSpares spares of at most basesMaxBytes/4 in all are
//     kept, the smallest dropped first: a spare is only a saving, and
//     the garbage collector takes the rest as before.
const maxSpares = 4

// spareRoom is the least room a new rebuilt body is made with beyond what
// it holds: a short conversation's next turns fit in it too.
const spareRoom = 64 << 10

// spare is a dropped base's memory.
type spare struct {
	body []byte // empty, with its capacity; nil when the body was not reusable
	mem  binding.RequestMemory
	size int
}

type spares struct {
	list     []spare
	bytes    int
	reused   int // bodies rebuild took from a spare (for tests)
	extended int // bodies rebuild extended in place (bases_extend.go; for tests)
}

// recycleLocked keeps b's memory as a spare once b is dropped and
// unread. s.mu is held.
func (s *baseStore) recycleLocked(b *base) {
	if !b.dropped || b.refs > 0 || b.req == nil {
		return
	}
	sp := spare{body: b.body[:0], mem: b.mem}
	switch {
	case b.arena != nil:
		// shared with another base, body and parse (bases_extend.go)
		sp = spare{}
	case !b.ownBody || b.lent:
		sp.body = nil // not the store's to reuse; the parse's memory is
	}
	b.body, b.req, b.mem = nil, nil, binding.RequestMemory{}
	if cap(sp.body) == 0 && cap(sp.mem.Messages) == 0 {
		return
	}
	sp.size = cap(sp.body) + cap(sp.mem.Messages)*int(unsafe.Sizeof(binding.Message{})) +
		cap(sp.mem.Blocks)*int(unsafe.Sizeof(binding.Block{}))
	limit := s.maxBytes
	if limit <= 0 {
		limit = basesMaxBytes
	}
	if sp.size > limit/4 {
		return
	}
	s.spares.list = append(s.spares.list, sp)
	s.spares.bytes += sp.size
	for len(s.spares.list) > maxSpares || s.spares.bytes > limit/4 {
		smallest := 0
		for i, x := range s.spares.list {
			if x.size < s.spares.list[smallest].size {
				smallest = i
			}
		}
		s.spares.bytes -= s.spares.list[smallest].size
		s.spares.list = append(s.spares.list[:smallest], s.spares.list[smallest+1:]...)
	}
}

// spareFor is an empty body of capacity at least n, from the smallest
// spare that holds it, with that spare's parse memory; else a new body
// with room for a few more turns (the next rebuild, a few KB longer, then
// fits in it once it is a spare) and no parse memory.
func (s *baseStore) spareFor(n int) ([]byte, binding.RequestMemory) {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i, x := range s.spares.list {
		if cap(x.body) >= n && (best < 0 || cap(x.body) < cap(s.spares.list[best].body)) {
			best = i
		}
	}
	if best < 0 {
		return make([]byte, 0, n+max(n/8, spareRoom)), s.spareMemLocked()
	}
	sp := s.takeLocked(best)
	s.spares.reused++
	return sp.body, sp.mem
}

// spareMemLocked is parse memory for a rebuild that found no spare body:
// a spare's that has no body, else none (a spare with a body is left
// whole for a rebuild that needs both).
func (s *baseStore) spareMemLocked() binding.RequestMemory {
	best := -1
	for i, x := range s.spares.list {
		if x.body == nil && (best < 0 || cap(x.mem.Messages) > cap(s.spares.list[best].mem.Messages)) {
			best = i
		}
	}
	if best < 0 {
		return binding.RequestMemory{}
	}
	return s.takeLocked(best).mem
}

// takeLocked removes spare i from the list and returns it.
func (s *baseStore) takeLocked(i int) spare {
	sp := s.spares.list[i]
	s.spares.bytes -= sp.size
	s.spares.list = append(s.spares.list[:i], s.spares.list[i+1:]...)
	return sp
}
