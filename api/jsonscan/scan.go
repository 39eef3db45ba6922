// Package jsonscan reads JSON text in place, without decoding what it does
// not need: a validator with json.Valid's verdict, and the few moves a
// reader that picks some fields out of large lines or bodies makes (skip
// whitespace, find a string's end, skip a value, step through an object's
// members or an array's elements).
//
// Decoding with encoding/json costs several passes' worth of time and
// allocates for every field, while bindery's callers want a handful of short
// fields (watcher: session lines that are mostly tool output) or one value's
// raw bytes (api: a compile call's request). Strings, nearly all of the
// bytes, are skipped with bytes.IndexByte from quote to quote.
//
// Every function stays in bounds on any input. StringEnd and SkipValue
// report text they cannot finish and validate nothing, so a caller that
// needs a verdict runs Valid first or validates what it decodes.
// NextMember and NextElement assume text Valid accepted; on other input
// their answer is unspecified. They return keys raw (between the quotes,
// not unescaped): JSON.stringify never escapes a plain key, so callers
// match them byte for byte.
//
// It is a leaf: it imports only the standard library and nothing of
// bindery's, so both sides of the wire (api, splitting a compile call) and
// the watcher (reading session lines) use it without either depending on
// the other, or on binding.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// StringEnd returns the index just past the string that starts at
// b[i] == '"', or len(b) and ok=false when it has no closing quote. It jumps
// from quote to quote and counts the backslashes before each to tell an
// escaped quote from the end; it does not check what lies between.
func StringEnd(b []byte, i int) (end int, ok bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b), false
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// SkipValue returns the index just past the value that starts at b[i]. An
// object or array ends at the bracket that brings the nesting back to zero
// (brackets inside strings do not count; the kinds are not matched), any
// other value at the next delimiter or whitespace. ok=false when there is no
// value at i (end == i) or it is unterminated (end == len(b)). Nothing inside
// the value is validated.
func SkipValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, ok := StringEnd(b, j)
				if !ok {
					return end, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return len(b), false
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
}

// NextMember steps to the next member of an object in valid text. *i is
// the index of the object's opening brace, or the end of the previous
// member's value. It returns the member's raw key (the bytes between the
// quotes) and the index of its value, or ok=false past the closing brace.
// The caller reads or skips the value and sets *i to its end before calling
// again.
func NextMember(b []byte, i *int) (key []byte, val int, ok bool) {
	j := SkipSpace(b, *i)
	if j < len(b) && (b[j] == ',' || b[j] == '{') {
		j = SkipSpace(b, j+1)
	}
	if j >= len(b) || b[j] != '"' {
		if j < len(b) && b[j] == '}' {
			j++
		}
		*i = j
		return nil, j, false
	}
	end, ok := StringEnd(b, j)
	if !ok { // not valid text: stop in bounds
		*i = end
		return nil, end, false
	}
	key = b[j+1 : end-1]
	j = SkipSpace(b, end)
	if j < len(b) && b[j] == ':' {
		j = SkipSpace(b, j+1)
	}
	*i = j
	return key, j, true
}

// NextElement is NextMember for arrays: it returns the index of the next
// element, or ok=false past the closing bracket.
func NextElement(b []byte, i *int) (val int, ok bool) {
	j := SkipSpace(b, *i)
	if j < len(b) && (b[j] == ',' || b[j] == '[') {
		j = SkipSpace(b, j+1)
	}
	if j >= len(b) || b[j] == ']' {
		if j < len(b) {
			j++
		}
		*i = j
		return j, false
	}
	*i = j
	return j, true
}

// Unescape decodes a JSON string from its raw bytes (between the quotes)
// exactly as encoding/json does, invalid UTF-8 becoming U+FFFD; the error
// is encoding/json's for a bad escape or a control character.
func Unescape(raw []byte) (string, error) {
	if plain(raw) {
		return string(raw), nil
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", err
	}
	return s, nil
}

// plain reports whether raw is its own value as a JSON string's contents:
// no escape, quote or control character, and valid UTF-8. Eight bytes are
// tested at a time: a long reply's side copy reads every delta through
// here, and the byte loop was a third of its cost.
func plain(raw []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// below reports whether any byte of x is below n (n <= 128): exact
	// as to whether, not which (a borrow marks bytes above a true one).
	// Below 1 after an XOR is a byte equal to the one XORed.
	below := func(x, n uint64) bool { return (x-ones*n)&^x&highs != 0 }
	i := 0
	for ; i+8 <= len(raw); i += 8 {
		x := binary.LittleEndian.Uint64(raw[i:])
		if below(x, 0x20) || below(x^(ones*'"'), 1) || below(x^(ones*'\\'), 1) {
			return false
		}
	}
	for _, c := range raw[i:] {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(raw)
}

// RuneCount is the number of code points a JSON string's raw bytes stand
// for: an escape counts as the character it writes, and a surrogate pair
// written as two \u escapes as one code point.
func RuneCount(raw []byte) int {
	if bytes.IndexByte(raw, '\\') < 0 {
		return utf8.RuneCount(raw)
	}
	n := 0
	afterHigh := false // the previous character was a \u escape of a high surrogate
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			_, size := utf8.DecodeRune(raw[i:])
			i += size
			n++
			afterHigh = false
			continue
		}
		if i+6 <= len(raw) && raw[i+1] == 'u' {
			v, _ := hexVal(raw[i+2 : i+6])
			high, low := v >= 0xD800 && v < 0xDC00, v >= 0xDC00 && v < 0xE000
			if !(low && afterHigh) { // a low surrogate after a high one completes its code point
				n++
			}
			afterHigh = high
			i += 6
			continue
		}
		i += 2
		n++
		afterHigh = false
	}
	return n
}

func hexVal(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
