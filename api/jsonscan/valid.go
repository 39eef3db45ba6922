package jsonscan

import "encoding/binary"

// Valid reports whether b is one JSON value, with exactly the verdict of
// encoding/json.Valid (FuzzValid checks this), in about half its time on
// text that is mostly strings: they are scanned eight bytes at a time for
// the three bytes that end the fast path (quote, backslash, control
// character). Like json.Valid, it does not check UTF-8.
func Valid(b []byte) bool {
	i, ok := validValue(b, SkipSpace(b, 0), 0)
	return ok && SkipSpace(b, i) == len(b)
}

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '{', '[':
		// An array is values separated by commas; an object is the same
		// with a key and a colon before each value.
		if depth >= maxDepth {
			return i, false
		}
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == closing {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return i, false
				}
				if i, ok = validString(b, i); !ok {
					return i, false
				}
				i = SkipSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = SkipSpace(b, i+1)
			}
			if i, ok = validValue(b, i, depth+1); !ok {
				return i, false
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case closing:
				return i + 1, true
			default:
				return i, false
			}
		}
	case '"':
		return validString(b, i)
	case 't':
		return validLiteral(b, i, "true")
	case 'f':
		return validLiteral(b, i, "false")
	case 'n':
		return validLiteral(b, i, "null")
	default:
		return validNumber(b, i)
	}
}

func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// validString checks the string starting at b[i] == '"' and returns the
// index past its closing quote.
func validString(b []byte, i int) (int, bool) {
	i++
	for {
		// Fast path: skip eight ordinary bytes at a time. The word tricks
		// (x-n*lows)&^x&highs != 0 iff some byte of x is below n (n <= 0x80),
		// so n=1 on x^c finds a byte equal to c.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			ctl := (x - 0x20*lows) & ^x & highs
			q := x ^ ('"' * lows)
			bs := x ^ ('\\' * lows)
			if ctl|((q-lows)&^q&highs)|((bs-lows)&^bs&highs) != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, false
				}
				if _, ok := hexVal(b[i+2 : i+6]); !ok {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
}

func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// digitsEnd returns the index past the run of decimal digits at b[i].
func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
