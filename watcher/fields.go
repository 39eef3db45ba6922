package watcher

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/my-pi/bindery/api/jsonscan"
)

// Reading the values of pi's fields out of a line already validated.
//
// Decoding a session line with encoding/json costs about 3x a json.Valid pass
// (perf-limits.md §2) and allocates for every field, while bindery needs a
// dozen short fields out of lines that are mostly tool output. So each line is
// validated once with jsonscan.Valid (json.Valid's verdict, faster; pi skips
// lines JSON.parse rejects, and so must we) and then walked with jsonscan's
// NextMember and SkipValue, which never decode what they skip. These readers
// decode the few values kept. Because the input is valid, they do no error
// checking beyond staying in bounds.

// skipValue is jsonscan.SkipValue on valid text, where it cannot fail.
func skipValue(b []byte, i int) int {
	end, _ := jsonscan.SkipValue(b, i)
	return end
}

// rawString returns the undecoded bytes between the quotes of the string at
// b[i] (ok=false when the value is not a string) and the end of the value.
func rawString(b []byte, i int) (raw []byte, ok bool, end int) {
	if i >= len(b) || b[i] != '"' {
		return nil, false, skipValue(b, i)
	}
	end, _ = jsonscan.StringEnd(b, i)
	return b[i+1 : end-1], true, end
}

// readString decodes the string at b[i]. A value that is not a string gives
// its JSON text, except null, which gives "": pi's fields are strings, and
// keeping an odd value's text beats dropping the line.
func readString(b []byte, i int) (string, int) {
	raw, ok, end := rawString(b, i)
	if !ok {
		if i < len(b) && b[i] == 'n' { // null
			return "", end
		}
		return string(b[i:end]), end
	}
	return decodeString(raw), end
}

// decodeString is the value of a JSON string from its raw bytes.
func decodeString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	// Escapes, or invalid UTF-8, which encoding/json (like JavaScript
	// reading the file) turns into U+FFFD.
	s, err := jsonscan.Unescape(raw)
	if err != nil { // not on valid text
		return string(raw)
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

// blank reports whether a JSON string's raw bytes hold only whitespace, as
// JavaScript's String.prototype.trim sees it (pi drops blank text blocks).
func blank(raw []byte) bool {
	if len(raw) == 0 {
		return true
	}
	if c := raw[0]; c > ' ' && c != '\\' && c < utf8.RuneSelf {
		return false // the common case: text starting with a visible character
	}
	for _, r := range decodeString(raw) {
		if !unicode.IsSpace(r) && r != '\uFEFF' {
			return false
		}
	}
	return true
}
