package binding

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCanonical(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"key order", `{"b":1,"a":2,"c":{"z":1,"y":2}}`, `{"a":2,"b":1,"c":{"y":2,"z":1}}`},
		{"whitespace between tokens", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } , \"c\":[ ] } ", `{"a":[1,2],"b":{},"c":[]}`},
		{"whitespace inside strings kept", `{"a":" x \n"}`, `{"a":" x \n"}`},
		{"u escape decoded", `"\u0041\u00e9\u4e2d"`, `"Aé中"`},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{"control escapes to short form", `"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{"other controls lowercase hex", `"\u0001\u001F\u0000"`, `"\u0001\u001f\u0000"`},
		{"no html escaping", `"\u003ca&b\u003e"`, `"<a&b>"`},
		{"DEL raw", `"\u007f"`, "\"\x7f\""},
		{"U+2028 U+2029 raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"raw U+2028 stays raw", "\"\u2028\"", "\"\u2028\""},
		{"surrogate pair decoded", `"\ud83d\ude00"`, `"😀"`},
		{"surrogate pair uppercase hex", `"\uD83D\uDE00"`, `"😀"`},
		{"lone high surrogate kept distinct", `"\uD800x"`, `"\ud800x"`},
		{"lone low surrogate", `"\udc00"`, `"\udc00"`},
		{"high then non-low", `"\ud800\u0041"`, `"\ud800A"`},
		{"two highs", `"\ud800\ud800"`, `"\ud800\ud800"`},
		{"invalid utf8 copied raw", "\"a\xffb\"", "\"a\xffb\""},
		{"numbers by literal", `[1,1.0,1e2,1E2,-0,0.5e-3,100]`, `[1,1.0,1e2,1E2,-0,0.5e-3,100]`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"keys compared decoded", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"escaped quote key sorts by value", `{"a#":1,"a\"":2}`, `{"a\"":2,"a#":1}`},
		{"non-BMP key sorts by UTF-8 not UTF-16", `{"😀":1,"\uff61":2}`, `{"｡":2,"😀":1}`},
		{"cache_control is data here", `{"cache_control":{"type":"ephemeral"},"a":1}`, `{"a":1,"cache_control":{"type":"ephemeral"}}`},
		{"empty key", `{"":1,"a":2}`, `{"":1,"a":2}`},
		{"nested arrays of objects", `[{"b":[{"d":1,"c":2}],"a":0}]`, `[{"a":0,"b":[{"c":2,"d":1}]}]`},
		{"many keys (sort path)", `{"m":1,"l":1,"k":1,"j":1,"i":1,"h":1,"g":1,"f":1,"e":1,"d":1,"c":1,"b":1,"a":1,"n":1}`,
			`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(nil, []byte(tc.in))
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			// Canonical form is a fixed point.
			again, err := Canonical(nil, got)
			if utf8.Valid(got) && err == nil && !bytes.Equal(again, got) {
				t.Fatalf("not a fixed point: %q -> %q", got, again)
			}
		})
	}
}

func TestCanonicalDistinct(t *testing.T) {
	// Each pair must canonicalize differently (conservative choices).
	pairs := [][2]string{
		{`1`, `1.0`},
		{`1`, `1e0`},
		{`100`, `1e2`},
		{`0`, `-0`},
		{`"a"`, `"a "`},
		{`"\ud800"`, `"\ufffd"`},
		{"\"\xff\"", `"\ufffd"`},
		{"\"\xed\xa0\x80\"", `"\ud800"`},
		{`{"\ud800":1}`, "{\"\xed\xa0\x80\":1}"},
		{`"x"`, `["x"]`},
		{`{}`, `[]`},
		{`null`, `""`},
	}
	for _, p := range pairs {
		a, err := Canonical(nil, []byte(p[0]))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Canonical(nil, []byte(p[1]))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a, b) {
			t.Errorf("%q and %q canonicalize alike: %q", p[0], p[1], a)
		}
	}
}

func TestCanonicalInvalid(t *testing.T) {
	cases := []struct{ name, in string }{
		{"empty", ``},
		{"only ws", `  `},
		{"trailing garbage", `{} x`},
		{"two values", `1 2`},
		{"trailing comma obj", `{"a":1,}`},
		{"trailing comma arr", `[1,]`},
		{"leading zero", `01`},
		{"bare minus", `-`},
		{"dot no digits", `1.`},
		{"exp no digits", `1e`},
		{"exp sign no digits", `1e+`},
		{"plus sign", `+1`},
		{"leading dot", `.5`},
		{"hex", `0x1`},
		{"NaN", `NaN`},
		{"single quotes", `'a'`},
		{"unterminated string", `"abc`},
		{"unterminated escape", `"abc\`},
		{"bad escape", `"\x"`},
		{"short u escape", `"\u12"`},
		{"bad hex", `"\u12g4"`},
		{"raw control", "\"a\x01b\""},
		{"raw newline", "\"a\nb\""},
		{"missing colon", `{"a" 1}`},
		{"non-string key", `{1:2}`},
		{"missing value", `{"a":}`},
		{"unclosed obj", `{"a":1`},
		{"unclosed arr", `[1,2`},
		{"bad literal", `tru`},
		{"bad literal 2", `nul`},
		{"BOM", "\xef\xbb\xbf{}"},
		{"duplicate key", `{"a":1,"a":2}`},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`},
		{"duplicate key nested", `[{"x":{"b":1,"c":2,"b":3}}]`},
		{"duplicate surrogate pair key", `{"😀":1,"\ud83d\ude00":2}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Canonical(nil, []byte(tc.in))
			if err == nil {
				t.Fatalf("Canonical(%q): no error", tc.in)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SyntaxError", err)
			}
			dup := strings.HasPrefix(tc.name, "duplicate")
			if errors.Is(err, ErrDuplicateKey) != dup {
				t.Fatalf("errors.Is(%v, ErrDuplicateKey) = %v, want %v", err, !dup, dup)
			}
			if !dup && json.Valid([]byte(tc.in)) {
				t.Fatalf("test case is valid JSON to encoding/json: %q", tc.in)
			}
		})
	}
}

func TestCanonicalDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1} {
		arr := strings.Repeat("[", n) + strings.Repeat("]", n)
		obj := strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
		for _, in := range []string{arr, obj} {
			_, err := Canonical(nil, []byte(in))
			if (err == nil) != json.Valid([]byte(in)) {
				t.Fatalf("depth %d: Canonical err=%v, json.Valid=%v", n, err, json.Valid([]byte(in)))
			}
		}
	}
}

// refCanonical is an independent canonicalizer built on encoding/json, for
// values whose strings are valid UTF-8 without lone surrogates (where the
// decoded value is unambiguous): decode with UseNumber, then write sorted
// keys, number literals, and strings by the pinned escaping rule.
func refCanonical(in []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var out []byte
	var enc func(v any)
	encStr := func(s string) {
		out = append(out, '"')
		for _, r := range s {
			out = appendRune(out, r)
		}
		out = append(out, '"')
	}
	enc = func(v any) {
		switch v := v.(type) {
		case nil:
			out = append(out, "null"...)
		case bool:
			if v {
				out = append(out, "true"...)
			} else {
				out = append(out, "false"...)
			}
		case json.Number:
			out = append(out, v...)
		case string:
			encStr(v)
		case []any:
			out = append(out, '[')
			for i, e := range v {
				if i > 0 {
					out = append(out, ',')
				}
				enc(e)
			}
			out = append(out, ']')
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out = append(out, '{')
			for i, k := range keys {
				if i > 0 {
					out = append(out, ',')
				}
				encStr(k)
				out = append(out, ':')
				enc(v[k])
			}
			out = append(out, '}')
		}
	}
	enc(v)
	return out, nil
}

func TestCanonicalMatchesReference(t *testing.T) {
	for _, in := range []string{
		`{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls -la <dir> && echo \"done\"","timeout":120.5}}`,
		`{"z":[{"b":"\u00e9","a":"\t"}],"a":{"y":null,"x":[true,false,-1.5e-7]}}`,
		`{"😀":1,"｡":2,"a":3,"\u00ff":4}`,
	} {
		got, err := Canonical(nil, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		want, err := refCanonical([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Canonical(%s)\n got %s\nwant %s", in, got, want)
		}
	}
	// Every object of a realistic generated request agrees with the reference.
	body := genRequest(7, 60)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		got, err := Canonical(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := refCanonical(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d differs from reference\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestValueDigest(t *testing.T) {
	a, err := ValueDigest([]byte(`{"b":1, "a":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ValueDigest([]byte(` {"a":[1,2],"b":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.IsZero() {
		t.Fatalf("digests of equal values differ: %x %x", a, b)
	}
	c, _ := ValueDigest([]byte(`{"a":[1,2],"b":1.0}`))
	if c == a {
		t.Fatal("1 and 1.0 digest alike")
	}
	if _, err := ValueDigest([]byte(`{"a":1,"a":1}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestSkipPlain(t *testing.T) {
	naive := func(in []byte, i int) int {
		for i < len(in) && !special[in[i]] {
			i++
		}
		return i
	}
	alphabet := []byte{'a', 'Z', ' ', '"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xff, 0xe2, 0x5b, 0x5d}
	rng := uint64(1)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for iter := range 20000 {
		n := int(next() % 40)
		in := make([]byte, n)
		for k := range in {
			if next()%6 == 0 {
				in[k] = alphabet[next()%uint64(len(alphabet))]
			} else {
				in[k] = byte(next())
			}
		}
		for i := 0; i <= n; i++ {
			if got, want := skipPlain(in, i), naive(in, i); got != want {
				t.Fatalf("iter %d: skipPlain(%q, %d) = %d, want %d", iter, in, i, got, want)
			}
		}
	}
}

func TestCanonicalSurrogateKeyCollision(t *testing.T) {
	// A lone-surrogate escape and the raw (invalid UTF-8) bytes of the same
	// surrogate decode to the same sort key; they are still different keys,
	// ordered by their canonical bytes, whatever the input order.
	a, err := Canonical(nil, []byte("{\"\\ud800\":1,\"\xed\xa0\x80\":2}"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonical(nil, []byte("{\"\xed\xa0\x80\":2,\"\\ud800\":1}"))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"\\ud800\":1,\"\xed\xa0\x80\":2}"
	if string(a) != want || string(b) != want {
		t.Fatalf("got %q and %q, want %q", a, b, want)
	}
	if _, err := Canonical(nil, []byte(`{"\ud800":1,"\uD800":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("same lone surrogate twice: %v", err)
	}
}

func TestDuplicateKeyOffset(t *testing.T) {
	in := `{"a":1,"b":{"x":1,"y":2,"x":3}}`
	_, err := Canonical(nil, []byte(in))
	var se *SyntaxError
	if !errors.As(err, &se) || !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("err = %v", err)
	}
	if want := strings.LastIndex(in, `"x"`); se.Offset != want {
		t.Fatalf("offset %d, want %d (the second key)", se.Offset, want)
	}
	if !strings.Contains(err.Error(), `duplicate key "x"`) {
		t.Fatalf("message %q", err)
	}
}
