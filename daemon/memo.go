package daemon

import (
	"context"
	"sync"

	"github.com/my-pi/bindery/binding"
)

// A conversation's next request repeats its last one and adds a message or
// two. A binding.Memo per conversation lets a compile skip canonicalizing
// and hashing the messages it has seen (about 6x less work on a 500-message
// conversation). Memos keep raw message bytes, so only the most recently
// compiled conversations keep one, each bounded.
const (
	memoSlots    = 16
	memoMaxBytes = 8 << 20
)

// memoSlot is one conversation's memo; mu serializes its parses (a Memo is
// not safe for concurrent use).
type memoSlot struct {
	mu   sync.Mutex
	memo binding.Memo
	used uint64
}

// memoSet holds at most memoSlots memos, evicting the least recently used.
type memoSet struct {
	mu    sync.Mutex
	tick  uint64
	slots map[string]*memoSlot
}

// slot returns conversation's memo slot, making room if needed. A slot
// evicted while a parse holds it finishes that parse and is then dropped.
func (s *memoSet) slot(conversation string) *memoSlot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	if m, ok := s.slots[conversation]; ok {
		m.used = s.tick
		return m
	}
	if s.slots == nil {
		s.slots = make(map[string]*memoSlot, memoSlots)
	}
	if len(s.slots) >= memoSlots {
		var oldest string
		var at uint64
		for k, m := range s.slots {
			if oldest == "" || m.used < at {
				oldest, at = k, m.used
			}
		}
		delete(s.slots, oldest)
	}
	m := &memoSlot{memo: binding.Memo{MaxBytes: memoMaxBytes}, used: s.tick}
	s.slots[conversation] = m
	return m
}

// parse parses a compile's request with the conversation's memo, bounded
// by --max-messages and ended early when ctx ends (the client went away).
// known is the base's parse of what a compile by reference shares with it
// (nil: none): those messages are taken from it, not parsed again.
//
// A memo busy with another parse of the same conversation is not waited
// for: the parse goes without it (same answer, more work). Waiting made
// every compile of a conversation queue behind one that was still parsing
// a huge request nobody waited for any more.
func (b *Binder) parse(ctx context.Context, conversation string, body []byte, known *binding.KnownPrefix, spare binding.RequestMemory) (*binding.Request, binding.RequestMemory, error) {
	p, _ := b.parsers.Get().(*binding.Parser)
	if p == nil {
		p = new(binding.Parser)
	}
	defer b.parsers.Put(p)
	p.MaxMessages, p.Done, p.Known, p.Spare = b.maxMessages, ctx.Done(), known, spare
	req, err := b.parseMemo(p, conversation, body)
	p.Done = nil
	b.knownTaken.Add(int64(p.KnownTaken()))
	return req, p.Built(), err
}

// parseMemo is p.Parse(body) with the conversation's memo when it is free.
func (b *Binder) parseMemo(p *binding.Parser, conversation string, body []byte) (*binding.Request, error) {
	if conversation == "" {
		return p.Parse(body)
	}
	m := b.memos.slot(conversation)
	if !m.mu.TryLock() {
		return p.Parse(body)
	}
	defer m.mu.Unlock()
	p.Memo = &m.memo
	defer func() { p.Memo = nil }()
	return p.Parse(body)
}
