package daemon

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"sync"
	"unsafe"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/api/jsonscan"
	"github.com/my-pi/bindery/binding"
)

// Compile by reference (api.CompileBase): the host sends only the messages
// after those its request shares with an earlier compile's, and bindery
// rebuilds the whole request from the bytes it kept of that compile. The
// rebuilt request is then compiled exactly as a full one would be, so the
// answer cannot differ; and the shared part is checked, by digest, against
// bindery's own bytes, so a host that changed an old message gets
// base_mismatch (and compiles in full: the change costs a strip, never a
// refusal), not a decision on bytes it did not send.
//
// What is kept, and for how long (decisions where the design is silent):
//   - the request bytes of each real compile (not dry runs, not unbound
//     bodies), the newest basesPerConversation per conversation: a host
//     names its last compile, or the one before after a retry;
//   - at most basesMaxBytes in all, the least recently used evicted first; a
//     request larger than that is not kept;
//   - in memory only: after a restart every base is unknown, and the host's
//     next compile is a full one.
const (
	basesPerConversation = 2
	basesMaxBytes        = 64 << 20
)

// base is one compile's request as bindery decided on it.
type base struct {
	id, conversation string
	body             []byte
	req              *binding.Request // body's parse: the next compile's known prefix (binding.KnownPrefix)
	size             int              // what it holds in memory (baseSize), counted against basesMaxBytes
	used             uint64

	// The memory a dropped base leaves for later rebuilds (bases_spare.go):
	// mem is the memory req is built in; ownBody, that body is rebuild's
	// (not the host's bytes); lent, that an answer may hold body (the
	// whole request returned); refs counts the compiles reading the base,
	// and dropped, that the store no longer holds it.
	mem     binding.RequestMemory
	ownBody bool
	lent    bool
	refs    int
	dropped bool
	// held is how many of req's messages body still holds: all of them
	// (0) until a later compile extends body in place (bases_extend.go),
	// after which body is only its first held messages' bytes. arena,
	// once body's memory is shared that way, is what the bases sharing
	// it still hold of it; nil while body is the base's alone.
	held  int
	arena *arena
	// hashed messages of body are covered by the SHA-256 state in hash (a
	// compile by reference checked them), so the next digest hashes only
	// what is new: a long conversation's turn does not hash its history.
	hashed int
	hash   []byte // sha256 state, binary-marshaled
}

// shared is what rebuild proved of a compile by reference, for the base
// its compile leaves, and the base's parse of the shared messages, for
// the compile's own parse (binding.KnownPrefix: checked again there, byte
// for byte, so a parse never rests on this store's word).
type shared struct {
	messages int
	hash     []byte
	known    *binding.KnownPrefix
	// arena: the rebuilt body is its base's memory extended in place
	// (nil: a body of its own).
	arena *arena
	// spare is memory of a dropped base for the compile's parse (nil:
	// none fit), and from the base the compile reads until release.
	spare binding.RequestMemory
	from  *base
}

// baseStore holds the bases.
type baseStore struct {
	maxBytes int // 0: basesMaxBytes
	mu       sync.Mutex
	tick     uint64
	bytes    int
	byID     map[string]*base
	byConv   map[string][]string // ids, oldest first
	spares   spares
}

// put keeps nb.req (parsed from nb.body) as compile nb.id's base; proved,
// when the compile was by reference, is the digest state of its shared
// messages. The store owns nb from here.
func (s *baseStore) put(nb *base, proved *shared) {
	limit := s.maxBytes
	if limit <= 0 {
		limit = basesMaxBytes
	}
	if nb.req == nil {
		return
	}
	size := baseSize(nb.body, nb.req)
	if size > limit {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID, s.byConv = map[string]*base{}, map[string][]string{}
	}
	s.tick++
	id, conversation := nb.id, nb.conversation
	nb.size, nb.used, nb.refs, nb.dropped = size, s.tick, 0, false
	if proved != nil && proved.messages <= len(nb.req.Messages) {
		nb.hashed, nb.hash = proved.messages, proved.hash
	}
	if proved != nil {
		nb.arena = proved.arena
	}
	s.byID[id] = nb
	s.bytes += size
	ids := append(s.byConv[conversation], id)
	for len(ids) > basesPerConversation {
		s.dropLocked(ids[0])
		ids = ids[1:]
	}
	s.byConv[conversation] = ids
	for s.bytes > limit {
		var oldest *base
		for _, b := range s.byID {
			if oldest == nil || b.used < oldest.used {
				oldest = b
			}
		}
		s.dropLocked(oldest.id)
		s.byConv[oldest.conversation] = removeID(s.byConv[oldest.conversation], oldest.id)
		if len(s.byConv[oldest.conversation]) == 0 {
			delete(s.byConv, oldest.conversation)
		}
	}
}

// baseSize is what a base holds: its body, and its parse's messages and
// blocks (about 130 bytes each, on the order of a block's bytes in the
// body, so the bound counts them).
func baseSize(body []byte, req *binding.Request) int {
	n := len(body) + len(req.Messages)*int(unsafe.Sizeof(binding.Message{})+unsafe.Sizeof(binding.Span{}))
	for i := range req.Messages {
		n += len(req.Messages[i].Blocks) * int(unsafe.Sizeof(binding.Block{}))
	}
	return n
}

func (s *baseStore) dropLocked(id string) {
	if b := s.byID[id]; b != nil {
		s.bytes -= b.size
		delete(s.byID, id)
		b.dropped = true
		s.recycleLocked(b)
	}
}

func removeID(ids []string, id string) []string {
	out := ids[:0]
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// get is the base of compile id, if held, now its most recently used.
func (s *baseStore) get(id string) (*base, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usedLocked(id)
}

func (s *baseStore) usedLocked(id string) (*base, bool) {
	b, ok := s.byID[id]
	if ok {
		s.tick++
		b.used = s.tick
	}
	return b, ok
}

// acquire is get for a compile that reads the base's body and parse: they
// stay as they are until it calls release, even if the base is dropped
// meanwhile.
func (s *baseStore) acquire(id string) (*base, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.usedLocked(id)
	if ok {
		b.refs++
	}
	return b, ok
}

// release ends what acquire began.
func (s *baseStore) release(b *base) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.refs--
	s.recycleLocked(b)
}

// rebuild is the whole request of a compile by reference: the base's
// shared messages, checked against the host's digest, then the messages
// the host sent, in the host's request. maxBody bounds the result.
func (s *baseStore) rebuild(call *api.CompileCall, maxBody int) ([]byte, *shared, error) {
	ref := call.Base
	b, ok := s.acquire(ref.CompileID)
	if ok && b.conversation != call.Conversation {
		s.release(b)
		ok = false
	}
	if !ok {
		return nil, nil, api.Errorf(api.CodeBaseUnknown, "compile by reference: bindery holds no request of compile %q in conversation %q (compile in full)", ref.CompileID, call.Conversation)
	}
	whole, proved, err := s.rebuildFrom(b, call, maxBody)
	if err != nil {
		s.release(b)
		return nil, nil, err
	}
	return whole, proved, nil
}

// rebuildFrom is rebuild from base b, which the caller acquired.
func (s *baseStore) rebuildFrom(b *base, call *api.CompileCall, maxBody int) ([]byte, *shared, error) {
	ref := call.Base
	if ref.Messages < 1 {
		return nil, nil, api.Errorf(api.CodeBadRequest, "compile by reference: base.messages is %d: want at least 1", ref.Messages)
	}
	msgs := b.req.Messages // each message's Span: its bytes in body
	if b.held > 0 {
		msgs = msgs[:b.held] // a later compile extended the rest's memory (bases_extend.go)
	}
	if ref.Messages > len(msgs) {
		return nil, nil, api.Errorf(api.CodeBaseMismatch, "compile by reference: base %q holds %d messages, not %d (compile in full)", ref.CompileID, len(msgs), ref.Messages)
	}
	prefix := b.body[msgs[0].Span.Start:msgs[ref.Messages-1].Span.End]
	h := sha256.New()
	from := msgs[0].Span.Start
	if b.hashed > 0 && b.hashed <= ref.Messages {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b.hash); err == nil {
			from = msgs[b.hashed-1].Span.End
		} else {
			h.Reset()
		}
	}
	h.Write(b.body[from:msgs[ref.Messages-1].Span.End])
	state, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	if hex.EncodeToString(h.Sum(nil)) != ref.Digest {
		return nil, nil, api.Errorf(api.CodeBaseMismatch, "compile by reference: the first %d messages are not those of compile %q (digest differs; compile in full)", ref.Messages, ref.CompileID)
	}
	tail := call.Request
	if !jsonscan.Valid(tail) {
		return nil, nil, api.Errorf(api.CodeBadRequest, "compile: request: not valid JSON")
	}
	start, end, ok := messagesArray(tail)
	if !ok {
		return nil, nil, api.Errorf(api.CodeBadRequest, "compile by reference: the request has no messages array")
	}
	empty := jsonscan.SkipSpace(tail, start+1) == end-1
	n := len(tail) + len(prefix) + 1
	if n > maxBody {
		return nil, nil, api.Errorf(api.CodeLimitExceeded, "compile by reference: the whole request would be %d bytes, over the bound of %d (--max-body)", n, maxBody)
	}
	if out, mem, a, ok := s.extend(b, call, start, empty); ok {
		known := &binding.KnownPrefix{Body: b.body, Request: b.req, Messages: ref.Messages}
		if !known.PlacedAt(out) {
			return nil, nil, fmt.Errorf("compile by reference: base %q: its first %d messages are not where they lie in its body", ref.CompileID, ref.Messages)
		}
		if !empty {
			out = append(out, ',')
		}
		out = append(out, tail[start+1:]...)
		return out, &shared{messages: ref.Messages, hash: state, spare: mem, from: b, known: known, arena: a}, nil
	}
	known := &binding.KnownPrefix{Body: b.body, Request: b.req, Messages: ref.Messages}
	out, spare := s.spareFor(n)
	out = append(out, tail[:start+1]...)
	if out = known.Place(out); len(out) != start+1+len(prefix) {
		return nil, nil, fmt.Errorf("compile by reference: base %q: its first %d messages could not be placed", ref.CompileID, ref.Messages)
	}
	if !empty {
		out = append(out, ',')
	}
	out = append(out, tail[start+1:]...)
	return out, &shared{messages: ref.Messages, hash: state, spare: spare, from: b, known: known}, nil
}

// messagesArray is where the top-level "messages" array of a valid JSON
// object lies: b[start] is its '[', b[end-1] its ']'.
func messagesArray(b []byte) (start, end int, ok bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	for {
		key, v, more := jsonscan.NextMember(b, &i)
		if !more {
			return 0, 0, false
		}
		vend, _ := jsonscan.SkipValue(b, v)
		if string(key) == "messages" && b[v] == '[' {
			return v, vend, true
		}
		i = vend
	}
}
