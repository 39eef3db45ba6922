package binding

import "bytes"

// Memo remembers the parsed form (role, frame, block digests and keys) of
// messages seen in earlier requests, so that a Parser using it skips
// re-canonicalizing and re-hashing a message whose raw bytes it has seen
// before: a conversation's next request repeats every earlier message byte
// for byte. A hit is decided by raw-bytes equality (the stored copy of the
// element is compared with the body), never by a digest of the raw bytes, so
// a hit is exactly as correct as a fresh parse: equal bytes are an equal,
// already validated value. Only the chain is re-stepped.
//
// A Memo belongs to its caller (typically one per conversation), is bounded
// by MaxBytes of stored raw message bytes, and is not safe for concurrent
// use. It holds copies of message bytes; it has no global state.
type Memo struct {
	// MaxBytes bounds the raw message bytes kept; 0 means 16 MiB. After a
	// parse that goes over it, entries the parse did not use are dropped,
	// and if that is not enough, everything is.
	MaxBytes int

	entries map[string][]*memoEntry // by the first memoKeyLen raw bytes
	size    int
	gen     uint64
	hits    int
	misses  int
}

// memoKeyLen is how many leading bytes of a message element index it. Only
// objects at least this long are remembered (shorter ones are cheap).
const memoKeyLen = 64

type memoEntry struct {
	raw    []byte
	role   string
	frame  Digest
	blocks []Block // spans relative to the element's start; Chain unset
	array  bool    // content was an array (blocks may be empty)
	used   uint64

	// The chain values of the last parse that used this entry: after the
	// chain prev, the message's blocks see chains and it ends at end.
	chained   bool
	prev, end Digest
	chains    []Digest
}

// Stats reports the hits and misses of the memo's lookups so far.
func (m *Memo) Stats() (hits, misses int) { return m.hits, m.misses }

// lookup returns the remembered message whose raw bytes start in at pos.
// An object's extent is fixed by its own bytes, so a stored element that is
// a prefix of in[pos:] is exactly the element at pos.
func (m *Memo) lookup(in []byte, pos int) *memoEntry {
	if m == nil {
		return nil
	}
	if m.entries == nil || len(in)-pos < memoKeyLen {
		return nil
	}
	for _, e := range m.entries[string(in[pos:pos+memoKeyLen])] {
		if bytes.HasPrefix(in[pos:], e.raw) {
			e.used = m.gen
			m.hits++
			return e
		}
	}
	m.misses++
	return nil
}

// add remembers a freshly parsed message and returns its entry (nil when
// it is too short to remember).
func (m *Memo) add(raw []byte, msg *Message, blocks []Block, array bool) *memoEntry {
	if len(raw) < memoKeyLen || raw[0] != '{' {
		return nil
	}
	if m.entries == nil {
		m.entries = make(map[string][]*memoEntry)
	}
	e := &memoEntry{raw: bytes.Clone(raw), role: msg.Role, frame: msg.Frame, array: array, used: m.gen}
	if array {
		e.blocks = make([]Block, len(blocks))
		for i, b := range blocks {
			b.Span.Start -= msg.Span.Start
			b.Span.End -= msg.Span.Start
			b.Chain = Digest{}
			e.blocks[i] = b
		}
	}
	k := string(raw[:memoKeyLen])
	m.entries[k] = append(m.entries[k], e)
	m.size += len(raw)
	return e
}

// endParse bounds the memo after a parse.
func (m *Memo) endParse() {
	max := m.MaxBytes
	if max <= 0 {
		max = 16 << 20
	}
	if m.size > max {
		m.size = 0
		for k, es := range m.entries {
			kept := es[:0]
			for _, e := range es {
				if e.used == m.gen {
					kept = append(kept, e)
					m.size += len(e.raw)
				}
			}
			if len(kept) == 0 {
				delete(m.entries, k)
			} else {
				m.entries[k] = kept
			}
		}
		if m.size > max {
			m.entries, m.size = nil, 0
		}
	}
	m.gen++
}
