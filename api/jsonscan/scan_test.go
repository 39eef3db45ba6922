package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringEnd(t *testing.T) {
	for _, c := range []struct {
		in  string
		end int
		ok  bool
	}{
		{`"abc"x`, 5, true},
		{`""`, 2, true},
		{`"a\"b"`, 6, true},
		{`"a\\"b"`, 5, true},
		{`"a\\\"b"`, 8, true},
		{`"abc`, 4, false},
		{`"a\"`, 4, false},
		{`"a\\\"`, 6, false},
		{`"`, 1, false},
		{`"` + strings.Repeat(`ab\"\\`, 1000) + `"`, 6002, true},
	} {
		end, ok := StringEnd([]byte(c.in), 0)
		if end != c.end || ok != c.ok {
			t.Errorf("StringEnd(%.40q) = %d, %v; want %d, %v", c.in, end, ok, c.end, c.ok)
		}
	}
}

func TestSkipValue(t *testing.T) {
	for _, c := range []struct {
		in  string
		end int // -1: to the end of in
		ok  bool
	}{
		{`"x\"y\\" ,`, 8, true},
		{`{"k":["}",{"q":"\\\"]"}],"n":1.5e3} ,"b"`, 35, true},
		{`[1,{"c":"]"}],`, 13, true},
		{`true,`, 4, true},
		{`null}`, 4, true},
		{`-1.5e3 `, 6, true},
		{`1.5`, -1, true},
		{`[1,2}`, -1, true}, // bracket kinds are not matched: the caller validates
		{``, 0, false},
		{`,`, 0, false},
		{` 1`, 0, false},
		{`}`, 0, false},
		{`"abc`, -1, false},
		{`{"a":1`, -1, false},
		{`{"a":"}`, -1, false},
		{`[[]`, -1, false},
	} {
		want := c.end
		if want < 0 {
			want = len(c.in)
		}
		end, ok := SkipValue([]byte(c.in), 0)
		if end != want || ok != c.ok {
			t.Errorf("SkipValue(%q) = %d, %v; want %d, %v", c.in, end, ok, want, c.ok)
		}
	}
	if end, ok := SkipValue([]byte(`[1]`), 5); end != 5 || ok {
		t.Errorf("SkipValue past the end = %d, %v", end, ok)
	}
}

type member struct{ key, val string }

// walk returns the members of the object, or the elements of the array,
// at b[start] as NextMember/NextElement and SkipValue see them, and the
// end of the value.
func walk(b []byte, start int) (ms []member, end int) {
	i := start
	if b[start] == '{' {
		for {
			key, v, ok := NextMember(b, &i)
			if !ok {
				return ms, i
			}
			i, _ = SkipValue(b, v)
			ms = append(ms, member{string(key), string(b[v:i])})
		}
	}
	for {
		v, ok := NextElement(b, &i)
		if !ok {
			return ms, i
		}
		i, _ = SkipValue(b, v)
		ms = append(ms, member{"", string(b[v:i])})
	}
}

func TestWalk(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []member
	}{
		{`{}`, nil},
		{` { } `, nil},
		{`[]`, nil},
		{`[ ]`, nil},
		{`{"a":1}`, []member{{"a", "1"}}},
		{"{ \"a\" :\t\"x\\\"}\" ,\n\"b\":[1,{\"c\":\"]\"}], \"\\u0074\":{}, \"d\":null }", []member{{"a", `"x\"}"`}, {"b", `[1,{"c":"]"}]`}, {`\u0074`, "{}"}, {"d", "null"}}},
		{`[1, "a,b" ,{"x":[]},[[]],true]`, []member{{"", "1"}, {"", `"a,b"`}, {"", `{"x":[]}`}, {"", "[[]]"}, {"", "true"}}},
	} {
		b := []byte(c.in)
		start := SkipSpace(b, 0)
		got, end := walk(b, start)
		if len(got) != len(c.want) {
			t.Errorf("%q: members %q, want %q", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: member %d = %q, want %q", c.in, i, got[i], c.want[i])
			}
		}
		if wantEnd, _ := SkipValue(b, start); end != wantEnd {
			t.Errorf("%q: walk ends at %d, the value at %d", c.in, end, wantEnd)
		}
	}
}

func TestWalkersStayInBounds(t *testing.T) {
	for _, in := range []string{`{"`, `{"a`, `{"a":`, `{"a":"`, `[`, `[1,`, `{`, `,"`, `"`} {
		b := []byte(in)
		for start := range len(b) + 1 {
			i := start
			if key, v, ok := NextMember(b, &i); i > len(b) || v > len(b) || ok && len(key) > len(b) {
				t.Errorf("NextMember(%q, %d) = %q, %d, %v, *i=%d", in, start, key, v, ok, i)
			}
			i = start
			if v, _ := NextElement(b, &i); i > len(b) || v > len(b) {
				t.Errorf("NextElement(%q, %d) = %d, *i=%d", in, start, v, i)
			}
		}
	}
}

// FuzzWalk checks the walkers against encoding/json's tokenizer on any
// valid object or array: the same keys (decoded) and the same value bytes,
// in order.
func FuzzWalk(f *testing.F) {
	f.Add(sessionLine(2))
	f.Add([]byte(`{"a":[1,{"b":"}"}],"c\"d":-0.5e3,"e":{"f":[]}}`))
	f.Add([]byte(`[ "x" , {"y" : null} , [ ] ]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		start := SkipSpace(b, 0)
		if !json.Valid(b) || (b[start] != '{' && b[start] != '[') {
			return
		}
		got, end := walk(b, start)
		if SkipSpace(b, end) != len(b) {
			t.Fatalf("%q: walk ends at %d", b, end)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		for n := 0; ; n++ {
			key := ""
			if b[start] == '{' {
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				if _, closing := tok.(json.Delim); closing {
					if n != len(got) {
						t.Fatalf("%q: %d members, encoding/json %d", b, len(got), n)
					}
					return
				}
				key = tok.(string)
			} else if !dec.More() {
				if n != len(got) {
					t.Fatalf("%q: %d elements, encoding/json %d", b, len(got), n)
				}
				return
			}
			var val json.RawMessage
			if err := dec.Decode(&val); err != nil {
				t.Fatal(err)
			}
			if n >= len(got) {
				t.Fatalf("%q: walk stopped after %d members", b, n)
			}
			if b[start] == '{' {
				if k, err := Unescape([]byte(got[n].key)); err != nil || k != key {
					t.Fatalf("%q: member %d key %q (%v), encoding/json %q", b, n, k, err, key)
				}
			}
			if got[n].val != string(val) {
				t.Fatalf("%q: member %d value %q, encoding/json %q", b, n, got[n].val, val)
			}
		}
	})
}

func TestUnescape(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{``, ``},
		{`plain`, `plain`},
		{`a\nb\t\"q\"\\\/`, "a\nb\t\"q\"\\/"},
		{`\u00e9\uD83D\uDE00`, "é😀"},
		{`\uD83D`, "\uFFFD"},
		{"\xff", "\uFFFD"},
	} {
		if got, err := Unescape([]byte(c.raw)); err != nil || got != c.want {
			t.Errorf("Unescape(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, bad := range []string{`\x`, `\u12`, "a\x01", `a"b`, `\`} {
		if got, err := Unescape([]byte(bad)); err == nil {
			t.Errorf("Unescape(%q) = %q, no error", bad, got)
		}
	}
}

func TestRuneCount(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want int
	}{
		{``, 0},
		{`abc`, 3},
		{`é🙂`, 2},
		{`a\nb`, 3},
		{`\\`, 1},
		{`\u00e9`, 1},
		{`\uD83D\uDE00`, 1},            // a surrogate pair is one code point
		{`\uD83D\uDE00\uDE00`, 2},      // a lone low surrogate after a pair
		{`\uD83D\uD83D\uDE00`, 2},      // a lone high one, then a pair
		{`\uD83Dx`, 2},                 // a lone high one
		{`\\uD83D\uDE00`, 7},           // an escaped backslash, "uD83D", a lone low surrogate
		{"\xff\xfe", 2},                // invalid UTF-8: a character per byte
		{`\uD83D` + "\xed\xb8\x80", 4}, // a high escape, then an encoded low surrogate (invalid UTF-8)
	} {
		if got := RuneCount([]byte(c.raw)); got != c.want {
			t.Errorf("RuneCount(%q) = %d, want %d", c.raw, got, c.want)
		}
	}
}

// FuzzRuneCount: on any valid JSON string, RuneCount is the number of
// characters encoding/json decodes it to (every invalid byte or lone
// surrogate becomes one U+FFFD).
func FuzzRuneCount(f *testing.F) {
	f.Add([]byte(`a\nb\uD83D\uDE00\\uD83D\uDE00é`))
	f.Add([]byte("\xff\\u0041"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		quoted := append(append([]byte{'"'}, raw...), '"')
		if !Valid(quoted) {
			return
		}
		s, err := Unescape(raw)
		if err != nil {
			t.Fatalf("Unescape(%q): %v", raw, err)
		}
		if got, want := RuneCount(raw), utf8.RuneCountInString(s); got != want {
			t.Fatalf("RuneCount(%q) = %d, encoding/json decodes %d characters", raw, got, want)
		}
	})
}

// FuzzUnescape: Unescape gives encoding/json's value and verdict for any
// bytes put between quotes.
func FuzzUnescape(f *testing.F) {
	f.Add([]byte(`plain`))
	f.Add([]byte(`a\nb\uD83D\uDE00\u00e9`))
	f.Add([]byte("\xff\x01\""))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		wantErr := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want)
		got, err := Unescape(raw)
		if (err != nil) != (wantErr != nil) || got != want && err == nil {
			t.Fatalf("Unescape(%q) = %q, %v; encoding/json %q, %v", raw, got, err, want, wantErr)
		}
	})
}

// TestPlainEightAtATime: plain, eight bytes at a time, answers as the
// byte loop does for every byte value at every position of every length
// up to three words, over ASCII and over multi-byte UTF-8.
func TestPlainEightAtATime(t *testing.T) {
	loop := func(raw []byte) bool {
		for _, c := range raw {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return utf8.Valid(raw)
	}
	for _, fill := range []byte{'a', 0x7f, ' '} {
		for n := 1; n <= 24; n++ {
			for at := 0; at < n; at++ {
				for c := 0; c < 256; c++ {
					raw := bytes.Repeat([]byte{fill}, n)
					raw[at] = byte(c)
					if got, want := plain(raw), loop(raw); got != want {
						t.Fatalf("plain(%q) = %v, the byte loop %v", raw, got, want)
					}
				}
			}
		}
	}
	for _, s := range []string{"é€😀 and more text", "ascii then \\ late", "ascii then \" late....", "ascii then \x1f late....."} {
		if got, want := plain([]byte(s)), loop([]byte(s)); got != want {
			t.Fatalf("plain(%q) = %v, the byte loop %v", s, got, want)
		}
	}
}
