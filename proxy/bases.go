package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"sync"
)

// A history's next turn is compiled by reference (api/doc.go, "Compile by
// reference"): the proxy keeps, per history, the messages of the last
// request the daemon compiled for it, as the client sent them, and sends
// the daemon only the messages after those the new request shares with it
// byte for byte, with the digest that proves them. The daemon checks the
// digest against the bytes it holds; one it no longer holds, or finds
// different, is answered with a full compile at once, so nothing here is
// ever trusted beyond a compile's speed. What is kept is bounded in bytes
// (Config.MaxHeld); the least recently used history goes first.

// base is one history's last compiled request.
type base struct {
	compileID string
	region    []byte // the messages, first element's first byte to the last's last
	ends      []int  // each message's end in region; the first starts at 0
	used      uint64
	// digest is the SHA-256 of the whole region, hex, and state the hash's
	// state after it (encoding.BinaryMarshaler): the next turn, which
	// shares every message of this one, proves them with digest, and its
	// own base hashes only its new messages on from state. A long history
	// was hashed whole every turn.
	digest string
	state  []byte
}

// bases holds each history's base, and its accept in flight.
type bases struct {
	mu      sync.Mutex
	max     int
	size    int
	clock   uint64
	byKey   map[string]*base
	accepts map[string]chan struct{}
}

func newBases(max int) *bases {
	return &bases{max: max, byKey: map[string]*base{}, accepts: map[string]chan struct{}{}}
}

func baseKey(id ident) string { return id.conversation + "\x00" + id.branch }

// get returns the history's base (nil when none).
func (b *bases) get(key string) *base {
	b.mu.Lock()
	defer b.mu.Unlock()
	bs := b.byKey[key]
	if bs != nil {
		b.clock++
		bs.used = b.clock
	}
	return bs
}

// put records the request just compiled as the history's base. body is
// the request's own buffer, never written again (each request reads its
// body into a fresh one), so the base holds it rather than a copy.
//
// from, when the request was compiled by reference on every message of
// the base it replaces (shared returned all of them), carries that base's
// hash on: only the new messages are hashed.
func (b *bases) put(key, compileID string, body []byte, els []span, from *base) {
	if len(els) == 0 {
		b.drop(key)
		return
	}
	first := els[0].start
	region := body[first:els[len(els)-1].end:els[len(els)-1].end]
	ends := make([]int, len(els))
	for i, e := range els {
		ends[i] = e.end - first
	}
	nb := &base{compileID: compileID, region: region, ends: ends}
	nb.digest, nb.state = hashOn(from, region)
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.byKey[key]; old != nil {
		b.size -= len(old.region)
	}
	b.clock++
	nb.used = b.clock
	b.byKey[key] = nb
	b.size += len(region)
	for b.size > b.max && len(b.byKey) > 0 {
		var oldest string
		var at uint64
		for k, v := range b.byKey {
			if oldest == "" || v.used < at {
				oldest, at = k, v.used
			}
		}
		b.size -= len(b.byKey[oldest].region)
		delete(b.byKey, oldest)
	}
}

func (b *bases) drop(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.byKey[key]; old != nil {
		b.size -= len(old.region)
		delete(b.byKey, key)
	}
}

// shared returns how many of body's leading messages (els) the base holds
// byte for byte, separators included, leaving at least one message new,
// and the digest that proves them.
func (bs *base) shared(body []byte, els []span) (int, string) {
	if len(els) < 2 {
		return 0, ""
	}
	first := els[0].start
	n, prev := 0, 0
	for i := 0; i < len(els)-1 && i < len(bs.ends); i++ {
		end := els[i].end - first
		if end != bs.ends[i] || !bytes.Equal(body[first+prev:first+end], bs.region[prev:end]) {
			break
		}
		n, prev = i+1, end
	}
	if n == 0 {
		return 0, ""
	}
	if n == len(bs.ends) && bs.digest != "" {
		return n, bs.digest // every message of the base: its digest
	}
	sum := sha256.Sum256(body[first : first+prev])
	return n, hex.EncodeToString(sum[:])
}

// hashOn is the digest and hash state of region: from's state carried on
// over what region adds to from's region, when from is its prefix (the
// caller's word: compile by reference on all of from's messages, whose
// bytes shared compared), else region hashed whole.
func hashOn(from *base, region []byte) (string, []byte) {
	h := sha256.New()
	rest := region
	if from != nil && from.state != nil && len(from.region) <= len(region) {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(from.state); err == nil {
			rest = region[len(from.region):]
		} else {
			h.Reset()
		}
	}
	h.Write(rest)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		state = nil
	}
	return hex.EncodeToString(h.Sum(nil)), state
}

// acceptStarted marks the history's accept in flight; the returned func
// ends it. The next compile of the history waits for it (bounded), so its
// reply is stamped from the accept, not only by attribution.
func (b *bases) acceptStarted(key string) func() {
	ch := make(chan struct{})
	b.mu.Lock()
	b.accepts[key] = ch
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if b.accepts[key] == ch {
			delete(b.accepts, key)
		}
		b.mu.Unlock()
		close(ch)
	}
}

// acceptDone is closed when the history has no accept in flight.
func (b *bases) acceptDone(key string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch := b.accepts[key]; ch != nil {
		return ch
	}
	return closed
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
