package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"hash"
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
//
// The digest is the one cost here that grows with the history: hashing a
// 1 MB prefix is most of a millisecond, on every turn. So a base keeps the
// SHA-256 state at a few message ends (marks), and a digest hashes only the
// bytes after the nearest mark: a follow-up turn shares its whole base, and
// the base's last message end is a mark, so its digest hashes nothing. A
// new base takes the marks of the old one it shares bytes with and hashes
// only what is new. Marks are sparse (one per markEvery bytes, and the last
// two messages' ends), so what they hold is a small part of the region's
// bytes, and counted in MaxHeld.

// base is one history's last compiled request. Its bytes are the client's
// (its region is a part of the request's own buffer, never copied); the
// daemon was shown them with string contents written as text blocks
// (shape.go), and that is the form a digest hashes: wraps say where.
// Equal bytes as the client sent them are equal bytes as the daemon was
// shown them, so what a request shares with its base is found in the
// client's bytes.
type base struct {
	compileID string
	region    []byte // the messages, first element's first byte to the last's last
	ends      []int  // each message's end in region; the first starts at 0
	wraps     []span // the string contents in region, ascending
	marks     []mark // ascending by msg
	used      uint64
	sent      sentAs // what the request was sent as (speculate.go)
}

// sentAs is what a compiled request went upstream as: the client's whole
// body and the byte ranges its plan cut out of it (ascending). The next
// turn of the history sends ahead of its compile what these predict.
type sentAs struct {
	body []byte // the buffer region is a part of
	cuts []span
}

// mark is the SHA-256 state of a base's region up to message msg's end.
type mark struct {
	msg   int
	state []byte
}

// markEvery is the most bytes a digest hashes past a mark, but for the
// messages after a base's last two.
const markEvery = 64 << 10

// held is what a base counts against MaxHeld.
func (bs *base) held() int {
	n := len(bs.region) + 8*len(bs.ends) + 16*len(bs.wraps)
	for _, m := range bs.marks {
		n += len(m.state) + 8
	}
	if bs.sent.body != nil {
		n += len(bs.sent.body) - len(bs.region) // the body beyond its messages
	}
	return n + 16*len(bs.sent.cuts)
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
// the base it replaces (shared returned all of them), is that base: its
// marks carry on without comparing its bytes again. Without it, the
// history's current base is compared message by message, so a turn that
// shares only some of them (a retry, the same request again, an edit)
// still hashes only from the last mark they share.
func (b *bases) put(key, compileID string, body []byte, els []span, from *base) {
	wraps, err := stringContents(body, els)
	if err != nil {
		b.drop(key)
		return
	}
	b.putSent(key, compileID, body, els, wraps, from, sentAs{})
}

// putSent is put with the body's string contents (stringContents) and
// what the request was sent as.
func (b *bases) putSent(key, compileID string, body []byte, els, wraps []span, from *base, sent sentAs) {
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
	inRegion := make([]span, len(wraps))
	for i, w := range wraps {
		inRegion[i] = span{w.start - first, w.end - first}
	}
	shared, old := 0, from
	if old != nil {
		shared = min(len(old.ends), len(ends))
	} else {
		b.mu.Lock()
		old = b.byKey[key]
		b.mu.Unlock()
		shared = old.sharedWith(region, ends)
	}
	// Hashing is done outside the lock; a base is never written once put,
	// so reading its marks here is safe.
	nb := &base{compileID: compileID, region: region, ends: ends, wraps: inRegion, sent: sent}
	nb.marks = marksFor(region, ends, inRegion, old, shared)
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur := b.byKey[key]; cur != nil {
		b.size -= cur.held()
	}
	b.clock++
	nb.used = b.clock
	b.byKey[key] = nb
	b.size += nb.held()
	for b.size > b.max && len(b.byKey) > 0 {
		var oldest string
		var at uint64
		for k, v := range b.byKey {
			if oldest == "" || v.used < at {
				oldest, at = k, v.used
			}
		}
		b.size -= b.byKey[oldest].held()
		delete(b.byKey, oldest)
	}
}

// sharedWith is how many leading messages of a region (its ends) the base
// holds byte for byte; 0 for no base.
func (bs *base) sharedWith(region []byte, ends []int) int {
	if bs == nil {
		return 0
	}
	shared, prev := 0, 0
	for i := 0; i < len(ends) && i < len(bs.ends); i++ {
		if ends[i] != bs.ends[i] || !bytes.Equal(region[prev:ends[i]], bs.region[prev:ends[i]]) {
			break
		}
		shared, prev = i+1, ends[i]
	}
	return shared
}

// marksFor returns a new region's marks: the old base's marks over the
// shared messages the two hold byte for byte, then the new bytes hashed
// (as the daemon was shown them) from the last of those.
func marksFor(region []byte, ends []int, wraps []span, old *base, shared int) []mark {
	var marks []mark
	h, at := sha256.New(), 0
	if old != nil {
		for _, m := range old.marks {
			if m.msg >= shared {
				break
			}
			marks = append(marks, m)
		}
		if len(marks) > 0 {
			last := marks[len(marks)-1]
			if restore(h, last.state) {
				at = ends[last.msg]
			} else {
				marks, h = nil, sha256.New()
			}
		}
	}
	start := 0 // the first message not yet hashed
	if len(marks) > 0 {
		start = marks[len(marks)-1].msg + 1
	}
	since := 0
	for i := start; i < len(ends); i++ {
		writeShown(h, region, at, ends[i], wraps)
		since += ends[i] - at
		at = ends[i]
		if since >= markEvery || i >= len(ends)-2 {
			st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				break // no mark: a digest then hashes from an earlier one
			}
			marks = append(marks, mark{msg: i, state: st})
			since = 0
		}
	}
	return thin(marks, ends)
}

// thin keeps the marks markEvery apart and the last two messages': the
// marks a history gathers turn by turn stay a few per markEvery bytes.
func thin(marks []mark, ends []int) []mark {
	out := marks[:0]
	last := -1 << 62
	for _, m := range marks {
		if m.msg >= len(ends)-2 || ends[m.msg]-last >= markEvery {
			out = append(out, m)
			last = ends[m.msg]
		}
	}
	return out
}

func restore(h hash.Hash, state []byte) bool {
	return h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state) == nil
}

func (b *bases) drop(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.byKey[key]; old != nil {
		b.size -= old.held()
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
	return n, bs.digest(n)
}

// digest is the SHA-256 of the region's first n messages as the daemon
// was shown them, hashed from the last mark at or before them.
func (bs *base) digest(n int) string {
	h, at := sha256.New(), 0
	for i := len(bs.marks) - 1; i >= 0; i-- {
		if m := bs.marks[i]; m.msg <= n-1 {
			if restore(h, m.state) {
				at = bs.ends[m.msg]
			} else {
				h = sha256.New()
			}
			break
		}
	}
	writeShown(h, bs.region, at, bs.ends[n-1], bs.wraps)
	return hex.EncodeToString(h.Sum(nil))
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
