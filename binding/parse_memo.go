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

	// entries is keyed by a message's whole raw bytes. (Keying by a
	// prefix and scanning the bucket made a parse quadratic in the
	// messages sharing that prefix, which pi's tool results all do.)
	entries map[string]*memoEntry
	size    int
	gen     uint64
	hits    int
	misses  int
}

// memoMinLen: only objects at least this long are remembered (shorter ones
// are cheap to parse).
const memoMinLen = 64

type memoEntry struct {
	raw    string // the map key: the element's bytes
	role   string
	frame  Digest
	blocks []Block // spans relative to the element's start; Chain unset
	array  bool    // content was an array (blocks may be empty)
	// converse: read as a Bedrock Converse message; the same bytes read as
	// Messages are other blocks, so a hit needs the same shape.
	converse bool
	used     uint64

	// The chain values of the last parse that used this entry: after the
	// chain prev, the message's blocks see chains and it ends at end.
	chained   bool
	prev, end Digest
	chains    []Digest
}

// Stats reports the hits and misses of the memo's lookups so far.
func (m *Memo) Stats() (hits, misses int) { return m.hits, m.misses }

// lookup returns the remembered message whose raw bytes start in at pos,
// in time linear in the element's length. The candidate extent is found by
// bracket matching (objectEnd, which validates nothing): a stored
// element was valid, so its nesting first returns to zero at its own last
// byte, and if in[pos:] starts with it the candidate is exactly it. A
// candidate that equals no stored element byte for byte is a miss, whatever
// its extent.
func (m *Memo) lookup(in []byte, pos int, converse bool) *memoEntry {
	if m == nil {
		return nil
	}
	if m.entries == nil || len(in)-pos < memoMinLen || in[pos] != '{' {
		return nil
	}
	end, ok := objectEnd(in, pos)
	if !ok || end-pos < memoMinLen {
		m.misses++
		return nil
	}
	if e := m.entries[string(in[pos:end])]; e != nil && e.converse == converse {
		e.used = m.gen
		m.hits++
		return e
	}
	m.misses++
	return nil
}

// add remembers a freshly parsed message and returns its entry (nil when
// it is too short to remember).
func (m *Memo) add(raw []byte, msg *Message, blocks []Block, array, converse bool) *memoEntry {
	if len(raw) < memoMinLen || raw[0] != '{' {
		return nil
	}
	if m.entries == nil {
		m.entries = make(map[string]*memoEntry)
	}
	key := string(raw)
	if e := m.entries[key]; e != nil && e.converse == converse {
		// The same bytes twice in one request (lookup ran before the
		// first was added): one entry serves both.
		e.used = m.gen
		return e
	} else if e != nil {
		m.size -= len(e.raw) // read in the other shape: this read replaces it
	}
	e := &memoEntry{raw: key, role: msg.Role, frame: msg.Frame, array: array, converse: converse, used: m.gen}
	if array {
		e.blocks = make([]Block, len(blocks))
		for i, b := range blocks {
			b.Span.Start -= msg.Span.Start
			b.Span.End -= msg.Span.Start
			b.Chain = Digest{}
			e.blocks[i] = b
		}
	}
	m.entries[key] = e
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
		for k, e := range m.entries {
			if e.used == m.gen {
				m.size += len(e.raw)
			} else {
				delete(m.entries, k)
			}
		}
		if m.size > max {
			m.entries, m.size = nil, 0
		}
	}
	m.gen++
}

// objectEnd returns the index just past the object starting at in[pos]
// ('{'): where the bracket nesting returns to zero, brackets inside
// strings not counting. Nothing is validated; ok is false when the
// nesting never returns to zero.
func objectEnd(in []byte, pos int) (int, bool) {
	depth := 0
	for i := pos; i < len(in); i++ {
		switch in[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"':
			// to the closing quote: one not preceded by an odd run of
			// backslashes
			for {
				j := bytes.IndexByte(in[i+1:], '"')
				if j < 0 {
					return len(in), false
				}
				i += 1 + j
				k := i - 1
				for k > pos && in[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		}
	}
	return len(in), false
}
