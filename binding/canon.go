package binding

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// The canonical form (what the digests cover), pinned by the golden vectors
// in testdata/canon/vectors.json:
//
//   - Values, not bytes: whitespace between tokens is dropped; object members
//     are sorted by their decoded keys, bytewise in UTF-8 (not UTF-16) order;
//     an object with two keys that decode alike ("a" and "\u0061") is refused.
//   - Strings by decoded value, re-encoded one way (see canon.str): only `"`,
//     `\` and control characters are escaped; no HTML escaping; U+2028 and
//     U+2029 raw. Lone surrogate escapes stay distinct (`\udxxx`), invalid
//     UTF-8 bytes are copied raw: distinct inputs never merge.
//   - Numbers by their literal text: 1, 1.0 and 1e0 differ (conservative: a
//     host that rewrites a number costs a strip, never a refusal).
//   - cache_control is removed only where it is a marker: a top-level member
//     of a content block, of a block in a content block's own content array
//     (a tool_result's text and image blocks take cache_control in the API),
//     of a system block, of a tool definition (and the request's own top
//     level, which no digest covers). Anywhere else (a tool_use input, an
//     input_schema, deeper inside a tool_result, a message object) it is
//     data and stays.
//   - A message frame is the whole message object with a content array
//     replaced by [] (role, clear_at, output_config, unknown fields all
//     count; string content is part of the frame, so "x" and
//     [{"type":"text","text":"x"}] differ). Each content block is its own
//     frame; thinking and redacted_thinking blocks get no digest and are not
//     in the chain (see chain.go).
//   - The seed covers system (string or blocks) and tools minus those with
//     defer_loading: true; absent and empty differ.
//   - Every digest is SHA-256(FramingVersion ‖ kind ‖ uint64 length ‖
//     canonical bytes), so frames of different kinds or lengths never collide
//     and no concatenation is ambiguous.

// FramingVersion is mixed into every digest bindery computes (frames, seeds,
// chain steps). Stamps are durable: a digest computed under one canonical
// encoding must never match one computed under another. Any change to the
// canonical encoding, the framing or the chain step, anything that makes a
// golden vector in canon_golden_test.go change, MUST bump this constant.
const FramingVersion uint32 = 1

// maxDepth matches encoding/json's nesting limit so that ParseRequest and
// json.Valid agree on which bodies are valid JSON.
const maxDepth = 10000

// Frame kinds: the first byte after the version in every framed digest, so
// that a system prompt, a tools array, a message frame and a content block
// with the same canonical bytes still get different digests.
const (
	kindMessage    byte = 1 // a message without its content blocks
	kindBlock      byte = 2 // one content block (cache_control markers removed)
	kindSystem     byte = 3 // the top-level system value
	kindTools      byte = 4 // the top-level tools array without deferred tools
	kindSeed       byte = 5 // system + tools
	kindChainStart byte = 6 // the fixed start of every message chain
	kindChainStep  byte = 7 // one chain step
	kindValue      byte = 8 // a value digested by ValueDigest
)

// frameHeaderLen is version (4) + kind (1) + length of the canonical bytes (8).
const frameHeaderLen = 13

// ErrDuplicateKey is wrapped by the error ParseRequest returns for an object
// with two members whose keys decode to the same string (the provider refuses
// such a request).
var ErrDuplicateKey = errors.New("duplicate key")

// SyntaxError reports invalid JSON (or a duplicate key) at a byte offset of
// the input.
type SyntaxError struct {
	Offset int
	Msg    string
	err    error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return e.err }

// special marks the bytes that end a run of verbatim string bytes: the
// quote, the backslash and the control characters (invalid raw in JSON).
var special = [256]bool{'"': true, '\\': true}

func init() {
	for c := 0; c < 0x20; c++ {
		special[c] = true
	}
}

// member is one object member being canonicalized. Its sort key (the decoded
// key) lives either in the input (a key without escapes decodes to its own
// bytes) or in the parser's kbuf; its canonical bytes are out[seg0:seg1].
type member struct {
	k0, k1     int  // sort key bytes
	kIn        bool // sort key is in[k0:k1], else kbuf[k0:k1]
	omit       bool // a cache_control marker: checked for duplicates, not written
	seg0, seg1 int  // canonical `"key":value` in out
	keyEnc     int  // length of the canonical key (with quotes) at out[seg0:]
	at         int  // the key's offset in the input (for errors)
}

// canon is the scanner and canonicalizer. It walks the input once and writes
// the canonical form of the values it is asked for into out, used as a stack.
type canon struct {
	in    []byte
	pos   int
	out   []byte
	kbuf  []byte
	tmp   []byte
	mem   []member
	depth int
}

func (c *canon) fail(off int, format string, args ...any) error {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (c *canon) ws() {
	in, i := c.in, c.pos
	for i < len(in) {
		switch in[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	c.pos = i
}

func (c *canon) unexpected() error {
	if c.pos >= len(c.in) {
		return c.fail(c.pos, "unexpected end of input")
	}
	return c.fail(c.pos, "unexpected byte %q", c.in[c.pos])
}

// value canonicalizes the value at c.pos (after whitespace) in data mode:
// every key is kept.
func (c *canon) value() error {
	c.ws()
	if c.pos >= len(c.in) {
		return c.unexpected()
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(modeData, nil)
	case b == '[':
		return c.arrayOf(modeData)
	case b == '"':
		_, err := c.str()
		return err
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return c.unexpected()
}

func (c *canon) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return c.fail(c.pos, "invalid literal")
	}
	c.out = append(c.out, lit...)
	c.pos += len(lit)
	return nil
}

// number copies a JSON number literal verbatim: numbers are compared by their
// text (1, 1.0 and 1e0 are different values to bindery, by design).
func (c *canon) number() error {
	in, i := c.in, c.pos
	start := i
	if in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i++; i < len(in) && in[i] >= '0' && in[i] <= '9'; i++ {
		}
	default:
		return c.fail(i, "invalid number")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.fail(i, "invalid number")
		}
		for ; i < len(in) && in[i] >= '0' && in[i] <= '9'; i++ {
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.fail(i, "invalid number")
		}
		for ; i < len(in) && in[i] >= '0' && in[i] <= '9'; i++ {
		}
	}
	c.out = append(c.out, in[start:i]...)
	c.pos = i
	return nil
}

// str canonicalizes the string at c.pos (an opening quote). It reports
// whether the input spelled it with at least one escape (when not, the
// decoded value is exactly the bytes between the quotes).
//
// Canonical string encoding (pinned; see FramingVersion):
//   - `"` and `\` are written `\"` and `\\`;
//   - U+0008, U+0009, U+000A, U+000C, U+000D as `\b`, `\t`, `\n`, `\f`, `\r`;
//     other code points below U+0020 as `\u00xx` (lowercase hex);
//   - every other code point as its UTF-8 bytes, raw: no HTML escaping of
//     < > &, and U+2028 / U+2029 and U+007F raw;
//   - an escaped surrogate pair becomes the UTF-8 of the code point it spells;
//     a lone surrogate escape (\ud800 not followed by a low surrogate, or a low
//     surrogate alone) is kept distinct, written `\udxxx` in lowercase hex;
//   - input bytes that are not valid UTF-8 are copied raw (encoding/json
//     accepts them, and copying keeps distinct inputs distinct; the provider
//     most likely refuses them anyway).
func (c *canon) str() (escaped bool, err error) {
	in := c.in
	i := c.pos + 1
	c.out = append(c.out, '"')
	for {
		start := i
		i = skipPlain(in, i)
		c.out = append(c.out, in[start:i]...)
		if i >= len(in) {
			return escaped, c.fail(i, "unterminated string")
		}
		switch b := in[i]; {
		case b == '"':
			c.out = append(c.out, '"')
			c.pos = i + 1
			return escaped, nil
		case b < 0x20:
			return escaped, c.fail(i, "control character in string")
		}
		// Backslash.
		escaped = true
		if i+1 >= len(in) {
			return escaped, c.fail(i, "unterminated string")
		}
		switch in[i+1] {
		case '"':
			c.out = append(c.out, '\\', '"')
		case '\\':
			c.out = append(c.out, '\\', '\\')
		case '/':
			c.out = append(c.out, '/')
		case 'b':
			c.out = append(c.out, '\\', 'b')
		case 'f':
			c.out = append(c.out, '\\', 'f')
		case 'n':
			c.out = append(c.out, '\\', 'n')
		case 'r':
			c.out = append(c.out, '\\', 'r')
		case 't':
			c.out = append(c.out, '\\', 't')
		case 'u':
			r, n, ok := decodeU(in[i:])
			if !ok {
				return escaped, c.fail(i, "invalid \\u escape")
			}
			i += n
			if r >= 0xD800 && r < 0xE000 {
				c.out = appendLoneSurrogate(c.out, r)
			} else {
				c.out = appendRune(c.out, r)
			}
			continue
		default:
			return escaped, c.fail(i, "invalid escape")
		}
		i += 2
	}
}

// skipPlain returns the index of the first byte at or after i that ends a
// run of verbatim string bytes (see special), or len(in). It tests eight
// bytes at a time: a string is most of a request's bytes.
func skipPlain(in []byte, i int) int {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(in); i += 8 {
		x := binary.LittleEndian.Uint64(in[i:])
		q := x ^ (lsb * '"')
		bs := x ^ (lsb * '\\')
		// The lowest set bit marks the first byte that is a quote, a
		// backslash or below 0x20 (higher bits may be false positives).
		if m := ((q - lsb) &^ q) | ((bs - lsb) &^ bs) | ((x - lsb*0x20) &^ x); m&msb != 0 {
			i += bits.TrailingZeros64(m&msb) >> 3
			break
		}
	}
	for i < len(in) && !special[in[i]] {
		i++
	}
	return i
}

// decodeU decodes `\uXXXX` (and a following `\uXXXX` low surrogate when the
// first is a high surrogate) at the start of s. It returns the code point (a
// value in D800-DFFF means a lone surrogate), the bytes consumed, and false
// for invalid hex.
func decodeU(s []byte) (rune, int, bool) {
	r, ok := hex4(s)
	if !ok {
		return 0, 0, false
	}
	if r >= 0xD800 && r < 0xDC00 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if lo, ok := hex4(s[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, true
		}
	}
	return r, 6, true
}

// hex4 reads the four hex digits of `\uXXXX` at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 6 {
		return 0, false
	}
	var r rune
	for _, b := range s[2:6] {
		switch {
		case b >= '0' && b <= '9':
			b -= '0'
		case b >= 'a' && b <= 'f':
			b = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			b = b - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendRune writes a decoded (non-surrogate) code point canonically.
func appendRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

func appendLoneSurrogate(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// decodeString appends the decoded value of the JSON string literal raw (with
// its quotes, already validated) to dst. Lone surrogates are written as
// their 3-byte generalized UTF-8 (WTF-8) form, invalid UTF-8 bytes raw. This
// is the value keys are sorted and compared by.
func decodeString(dst, raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		b := s[i]
		if b != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, _ := decodeU(s[i:])
			if r >= 0xD800 && r < 0xE000 {
				dst = append(dst, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
			} else {
				dst = utf8.AppendRune(dst, r)
			}
			i += n
			continue
		default: // " \ /
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

// arrayOf canonicalizes the array at c.pos; objects among its elements
// have the given mode.
func (c *canon) arrayOf(elem objMode) error {
	if empty, err := c.openArrayOut(); err != nil || empty {
		return err
	}
	for {
		if err := c.valueIn(elem); err != nil {
			return err
		}
		more, err := c.afterElement()
		if err != nil {
			return err
		}
		if !more {
			c.out = append(c.out, ']')
			return nil
		}
		c.out = append(c.out, ',')
	}
}

// openArray consumes the '[' at c.pos and enters the array's depth; for an
// empty array it also consumes the ']' and leaves it (empty is true). The
// caller writes whatever its output needs.
func (c *canon) openArray() (empty bool, err error) {
	c.depth++
	if c.depth > maxDepth {
		return false, c.fail(c.pos, "exceeded max depth")
	}
	c.pos++
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.depth--
		return true, nil
	}
	return false, nil
}

// openArrayOut is openArray for a caller that writes the array to out:
// '[' always, and ']' when the array is empty.
func (c *canon) openArrayOut() (empty bool, err error) {
	c.out = append(c.out, '[')
	if empty, err = c.openArray(); empty {
		c.out = append(c.out, ']')
	}
	return empty, err
}

// afterElement consumes what follows an array element: a ',' (more is
// true: another element follows) or the closing ']' (the array's depth is
// left). The caller writes whatever its output needs.
func (c *canon) afterElement() (more bool, err error) {
	c.ws()
	if c.pos >= len(c.in) {
		return false, c.unexpected()
	}
	switch c.in[c.pos] {
	case ',':
		c.pos++
		return true, nil
	case ']':
		c.pos++
		c.depth--
		return false, nil
	}
	return false, c.unexpected()
}

// Object modes: which members of an object are markers or are watched.
type objMode uint8

const (
	modeData    objMode = iota // every member is data
	modeMarked                 // a system block or a tool definition: top-level cache_control is a marker
	modeBlock                  // a content block: marker, and type/signature/data are watched
	modeTool                   // a tool definition: marker, and defer_loading is watched
	modeMessage                // a message: role is watched, a content array is split into blocks
)

// watch receives what object() noticed in a watched object. Spans are of
// the member values in the input.
type watch struct {
	typ, sig, data, role Span // zero Span: absent (or not a string)
	deferred             bool
	content              bool // content was an array, split into blocks
	contentStr           bool // content was a string
	foreign              bool // a member only another API's messages have (foreignMessageKey)
	onContent            func() error
}

func isString(in []byte, s Span) bool { return s.End > s.Start && in[s.Start] == '"' }

// object canonicalizes the object at c.pos (an opening brace): members sorted
// by decoded key (bytewise UTF-8), compact, markers omitted per mode,
// duplicates refused.
func (c *canon) object(mode objMode, w *watch) error {
	return c.objectAt(mode, w, false)
}

// objectAt is object; when lazy, the members are left sorted in
// c.mem[len(c.mem) at the call:] and not permuted in out, for the caller to
// hash in order (lazyDigest) and then truncate c.mem. A content block is
// only hashed, never embedded in a larger canonical form, so moving its
// (often large) members into order would be wasted copying.
func (c *canon) objectAt(mode objMode, w *watch, lazy bool) error {
	c.depth++
	if c.depth > maxDepth {
		return c.fail(c.pos, "exceeded max depth")
	}
	objStart := c.pos
	c.pos++
	outStart := len(c.out)
	c.out = append(c.out, '{')
	base := len(c.mem)
	kbase := len(c.kbuf)
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		c.depth--
		return nil
	}
	written := 0
	for {
		c.ws()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.unexpected()
		}
		commaAt := len(c.out)
		if written > 0 {
			c.out = append(c.out, ',')
		}
		seg0 := len(c.out)
		kraw := c.pos
		esc, err := c.str()
		if err != nil {
			return err
		}
		m := member{seg0: seg0, keyEnc: len(c.out) - seg0, at: kraw}
		if esc {
			m.k0 = len(c.kbuf)
			c.kbuf = decodeString(c.kbuf, c.in[kraw:c.pos])
			m.k1 = len(c.kbuf)
		} else {
			m.k0, m.k1, m.kIn = kraw+1, c.pos-1, true
		}
		c.ws()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.unexpected()
		}
		c.pos++
		c.out = append(c.out, ':')
		c.ws()
		vstart := c.pos
		if mode == modeData {
			err = c.value()
		} else {
			err = c.watchedMember(mode, w, &m, c.key(&m), vstart)
		}
		if err != nil {
			return err
		}
		if m.omit {
			c.out = c.out[:commaAt]
		} else {
			written++
		}
		m.seg1 = len(c.out)
		c.mem = append(c.mem, m)
		c.ws()
		if c.pos >= len(c.in) {
			return c.unexpected()
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return c.unexpected()
		}
		c.pos++
		break
	}
	if lazy {
		outStart = -1
	}
	if err := c.sortMembers(base, outStart, objStart); err != nil {
		return err
	}
	c.out = append(c.out, '}')
	if !lazy {
		c.mem = c.mem[:base]
	}
	c.kbuf = c.kbuf[:kbase]
	c.depth--
	return nil
}

// watchedMember canonicalizes one member value of a non-data object,
// omitting markers and noting watched members.
func (c *canon) watchedMember(mode objMode, w *watch, m *member, key []byte, vstart int) error {
	if mode != modeMessage && string(key) == "cache_control" {
		m.omit = true
		return c.value()
	}
	if mode == modeMessage && string(key) == "content" && c.pos < len(c.in) && c.in[c.pos] == '[' && w != nil && w.onContent != nil {
		// The blocks are digested one by one (onContent writes their
		// canonical bytes above out and truncates them away); the frame
		// keeps the fact that content is an array.
		if err := w.onContent(); err != nil {
			return err
		}
		w.content = true
		c.out = append(c.out, '[', ']')
		return nil
	}
	c.ws()
	if mode == modeBlock && string(key) == "content" && c.pos < len(c.in) && c.in[c.pos] == '[' {
		// A content block's own content array (tool_result, search_result)
		// holds content blocks, and the API takes cache_control on them:
		// there it is a marker too. Deeper down it is data again.
		if err := c.arrayOf(modeMarked); err != nil {
			return err
		}
	} else if err := c.valueIn(modeData); err != nil {
		return err
	}
	if w == nil {
		return nil
	}
	v := Span{vstart, c.pos}
	switch mode {
	case modeBlock:
		switch string(key) {
		case "type":
			w.typ = v
		case "signature":
			w.sig = v
		case "data":
			w.data = v
		}
	case modeTool:
		if string(key) == "defer_loading" && string(c.in[v.Start:v.End]) == "true" {
			w.deferred = true
		}
	case modeMessage:
		switch {
		case string(key) == "role":
			w.role = v
		case string(key) == "content":
			w.contentStr = c.in[v.Start] == '"'
		case foreignMessageKey(key):
			w.foreign = true
		}
	}
	return nil
}

// valueIn canonicalizes a value whose object (if it is one) has the given mode.
func (c *canon) valueIn(mode objMode) error {
	c.ws()
	if mode != modeData && c.pos < len(c.in) && c.in[c.pos] == '{' {
		return c.object(mode, nil)
	}
	return c.value()
}

// key returns the sort key (decoded bytes) of a member.
func (c *canon) key(m *member) []byte {
	if m.kIn {
		return c.in[m.k0:m.k1]
	}
	return c.kbuf[m.k0:m.k1]
}

// cmpMembers orders members by decoded key; two keys whose decoded forms
// collide only through the lone-surrogate representation are ordered (and
// told apart) by their canonical bytes.
func (c *canon) cmpMembers(a, b *member) int {
	if r := bytes.Compare(c.key(a), c.key(b)); r != 0 {
		return r
	}
	return bytes.Compare(c.out[a.seg0:a.seg0+a.keyEnc], c.out[b.seg0:b.seg0+b.keyEnc])
}

// sortMembers checks the members c.mem[base:] for duplicates and, when they
// arrived out of order, permutes their canonical segments (out[outStart+1:])
// into key order. outStart < 0 checks duplicates only.
func (c *canon) sortMembers(base, outStart, objStart int) error {
	ms := c.mem[base:]
	sorted := true
	for i := 1; i < len(ms); i++ {
		if c.cmpMembers(&ms[i-1], &ms[i]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return nil
	}
	// Omitted markers have empty segments; their keys still count for
	// duplicates.
	if len(ms) <= 12 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && c.cmpMembers(&ms[j-1], &ms[j]) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
	} else {
		slices.SortFunc(ms, func(a, b member) int { return c.cmpMembers(&a, &b) })
	}
	for i := 1; i < len(ms); i++ {
		if c.cmpMembers(&ms[i-1], &ms[i]) == 0 {
			// Report the later of the two keys.
			at := max(ms[i-1].at, ms[i].at)
			return &SyntaxError{Offset: at, Msg: fmt.Sprintf("duplicate key %q in the object at offset %d", c.key(&ms[i]), objStart), err: ErrDuplicateKey}
		}
	}
	if outStart < 0 {
		return nil // duplicate check only (the request's top level)
	}
	c.tmp = append(c.tmp[:0], c.out[outStart+1:]...)
	c.out = c.out[:outStart+1]
	n := 0
	for i := range ms {
		m := &ms[i]
		if m.omit {
			continue
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		n++
		c.out = append(c.out, c.tmp[m.seg0-outStart-1:m.seg1-outStart-1]...)
	}
	return nil
}

// frameDigest is SHA-256(version ‖ kind ‖ uint64 length ‖ canonical bytes)
// over out[hdr:], where out[hdr:hdr+frameHeaderLen] was reserved for the
// header by reserveHeader.
func (c *canon) frameDigest(hdr int, kind byte) Digest {
	h := c.out[hdr : hdr+frameHeaderLen]
	binary.BigEndian.PutUint32(h[0:4], FramingVersion)
	h[4] = kind
	binary.BigEndian.PutUint64(h[5:13], uint64(len(c.out)-hdr-frameHeaderLen))
	return sha256.Sum256(c.out[hdr:])
}

func (c *canon) reserveHeader() int {
	hdr := len(c.out)
	c.out = append(c.out, make([]byte, frameHeaderLen)...)
	return hdr
}

// Canonical appends the canonical form of the JSON value v (data mode: every
// key is kept, including any named cache_control) to dst. Leading and
// trailing whitespace is allowed; anything else after the value is an error.
func Canonical(dst, v []byte) ([]byte, error) {
	c := canon{in: v, out: dst}
	if err := c.value(); err != nil {
		return dst, err
	}
	c.ws()
	if c.pos != len(v) {
		return dst, c.unexpected()
	}
	return c.out, nil
}

// ValueDigest is the framed SHA-256 of the canonical form of the JSON value v
// (data mode). It is not used by the chain; it is for callers that need a
// stable digest of some other value (for example a tool_result payload).
func ValueDigest(v []byte) (Digest, error) {
	c := canon{in: v}
	hdr := c.reserveHeader()
	if err := c.value(); err != nil {
		return Digest{}, err
	}
	c.ws()
	if c.pos != len(v) {
		return Digest{}, c.unexpected()
	}
	return c.frameDigest(hdr, kindValue), nil
}
