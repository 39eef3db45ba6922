package watcher

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// A minimal reader for JSON text that has already been validated.
//
// Decoding a session line with encoding/json costs about 3x a json.Valid pass
// (perf-limits.md §2) and allocates for every field, while bindery needs a
// dozen short fields out of lines that are mostly tool output. So each line is
// validated once with validJSON (json.Valid's verdict, faster; pi skips lines
// JSON.parse rejects, and so must we) and then walked by these helpers, which
// skip strings with bytes.IndexByte and never decode what they skip. Because the input is
// known to be valid, the helpers do no error checking beyond staying in
// bounds. Keys are compared by their raw bytes: a key spelled with escapes
// ("\u0074ype") is not recognised, which no JSON.stringify output does.

func skipWS(b []byte, i int) int {
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

// stringEnd returns the index just past the string starting at b[i] == '"'
// and whether the string contains escapes.
func stringEnd(b []byte, i int) (end int, esc bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b), esc
		}
		k += j
		if bytes.IndexByte(b[j:k], '\\') >= 0 {
			esc = true
		}
		n := 0
		for p := k - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return k + 1, esc
		}
		j = k + 1
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i, _ = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// nextKey advances over the separator before the next member of the object
// whose opening brace (or previous value) ends at *i. It returns the raw key
// and the index of the member's value, or ok=false at the closing brace. The
// caller must set *i to the end of the value before calling again.
func nextKey(b []byte, i *int) (key []byte, val int, ok bool) {
	j := skipWS(b, *i)
	if j < len(b) && (b[j] == ',' || b[j] == '{') {
		j = skipWS(b, j+1)
	}
	if j >= len(b) || b[j] != '"' {
		if j < len(b) && b[j] == '}' {
			j++
		}
		*i = j
		return nil, j, false
	}
	end, _ := stringEnd(b, j)
	key = b[j+1 : end-1]
	j = skipWS(b, end)
	if j < len(b) && b[j] == ':' {
		j = skipWS(b, j+1)
	}
	*i = j
	return key, j, true
}

// nextElem is nextKey for arrays: it returns the index of the next element
// or ok=false at the closing bracket.
func nextElem(b []byte, i *int) (val int, ok bool) {
	j := skipWS(b, *i)
	if j < len(b) && (b[j] == ',' || b[j] == '[') {
		j = skipWS(b, j+1)
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

// rawString returns the undecoded bytes between the quotes of the string at
// b[i] (ok=false when the value is not a string), whether they hold escapes,
// and the end of the value.
func rawString(b []byte, i int) (raw []byte, esc, ok bool, end int) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, false, skipValue(b, i)
	}
	end, esc = stringEnd(b, i)
	return b[i+1 : end-1], esc, true, end
}

// readString decodes the string at b[i]. A value that is not a string gives
// its JSON text, except null, which gives "": pi's fields are strings, and
// keeping an odd value's text beats dropping the line.
func readString(b []byte, i int) (string, int) {
	raw, esc, ok, end := rawString(b, i)
	if !ok {
		if i < len(b) && b[i] == 'n' { // null
			return "", end
		}
		return string(b[i:end]), end
	}
	if !esc && utf8.Valid(raw) {
		return string(raw), end
	}
	// Escapes, or invalid UTF-8, which encoding/json (like JavaScript
	// reading the file) turns into U+FFFD.
	return unquote(b[i:end]), end
}

func unquote(quoted []byte) string {
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return string(quoted)
	}
	return s
}

// isTrue reports whether the value at b[i] is the literal true.
func isTrue(b []byte, i int) bool {
	return bytes.HasPrefix(b[i:], []byte("true"))
}

// readNumber parses the number at b[i]; ok=false when it is not a number.
func readNumber(b []byte, i int) (f float64, isInt bool, n int64, ok bool, end int) {
	end = skipValue(b, i)
	lit := b[i:end]
	if len(lit) == 0 {
		return 0, false, 0, false, end
	}
	// Fast path: a plain non-negative or negative integer.
	neg := lit[0] == '-'
	digits := lit
	if neg {
		digits = lit[1:]
	}
	if len(digits) > 0 && len(digits) < 19 {
		var v int64
		plain := true
		for _, c := range digits {
			if c < '0' || c > '9' {
				plain = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if plain {
			if neg {
				v = -v
			}
			return float64(v), true, v, true, end
		}
	}
	if lit[0] != '-' && (lit[0] < '0' || lit[0] > '9') {
		return 0, false, 0, false, end
	}
	// strconv does not keep its argument (errors copy it), so no copy here.
	f, err := strconv.ParseFloat(unsafe.String(&lit[0], len(lit)), 64)
	if err != nil {
		return 0, false, 0, false, end
	}
	if f == float64(int64(f)) {
		return f, true, int64(f), true, end
	}
	return f, false, int64(f), true, end
}

// runeCount is the number of code points in a JSON string's raw bytes, with
// escapes counted as the characters they stand for (a surrogate pair written
// as two \u escapes is one code point).
func runeCount(raw []byte, esc bool) int {
	if !esc {
		return utf8.RuneCount(raw)
	}
	n := 0
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			_, size := utf8.DecodeRune(raw[i:])
			i += size
			n++
			continue
		}
		if i+1 < len(raw) && raw[i+1] == 'u' && i+6 <= len(raw) {
			// A low surrogate following a high one completes the same code point.
			if isLowSurrogateEscape(raw[i:]) && i >= 6 && isHighSurrogateEscape(raw[i-6:]) {
				i += 6
				continue
			}
			i += 6
			n++
			continue
		}
		i += 2
		n++
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

func isHighSurrogateEscape(b []byte) bool {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return false
	}
	v, ok := hexVal(b[2:6])
	return ok && v >= 0xD800 && v < 0xDC00
}

func isLowSurrogateEscape(b []byte) bool {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return false
	}
	v, ok := hexVal(b[2:6])
	return ok && v >= 0xDC00 && v < 0xE000
}

// blank reports whether a JSON string's raw bytes hold only whitespace, as
// JavaScript's String.prototype.trim sees it (pi drops blank text blocks).
func blank(raw []byte, esc bool) bool {
	if len(raw) == 0 {
		return true
	}
	if c := raw[0]; c > ' ' && c != '\\' && c < utf8.RuneSelf {
		return false // the common case: text starting with a visible character
	}
	s := string(raw)
	if esc {
		s = unquote(append(append([]byte{'"'}, raw...), '"'))
	}
	for _, r := range s {
		if !unicode.IsSpace(r) && r != '\uFEFF' {
			return false
		}
	}
	return true
}
