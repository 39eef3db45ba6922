package binding

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// dupKeyOracle reports a duplicate key anywhere in a valid JSON document as
// encoding/json decodes keys (it replaces invalid UTF-8 and lone surrogates
// with U+FFFD, so it may see duplicates bindery keeps apart).
func dupKeyOracle(body []byte) (dup bool, key string) {
	d := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return false, ""
		}
		if err != nil {
			return false, ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if s, ok := tok.(string); ok {
				if top.keys[s] {
					return true, s
				}
				top.keys[s] = true
				top.expect = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.obj {
				top.expect = true
			}
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			if top != nil && top.obj {
				top.expect = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.obj {
			top.expect = true
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"messages":[]}`, `{"a":1,"a":2}`, `{"a":{"\u0061":1,"a":2}}`,
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"},{"type":"text","text":"\ud800 \u2028"}]}]}`,
		`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"t","defer_loading":true}],"messages":[{"role":"user","content":[{"type":"compaction","content":"c"}]}]}`,
		"{\"messages\":[{\"\xff\":1,\"\\ud800\":2}]}",
		`{"messages":[1, "x", null, {"content":{}}], "model": 5}`,
		`{"messages":[{"role":"user","content":"0123456789012345678901234567890123456789012345678901234567890123456789"},{"role":"user","content":"0123456789012345678901234567890123456789012345678901234567890123456789","x":1}]}`,
		// Bedrock Converse (converse.go), the shape read again when its member comes late.
		`{"modelId":"m","system":[{"text":"s"},{"cachePoint":{"type":"default"}}],"toolConfig":{"tools":[{"toolSpec":{"name":"t"}},{"cachePoint":{}}]},"messages":[{"role":"user","content":[{"text":"q"},{"cachePoint":{"type":"default"}}]},{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t","signature":"s"}}},{"reasoningContent":{"redactedContent":"AQID"}},{"toolUse":{"toolUseId":"u","name":"t","input":{}}}]}]}`,
		`{"messages":[{"role":"user","content":[{"text":"q"}]},{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"signature":"\u0073"}}},{"\u0063achePoint":{}}]}],"inferenceConfig":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Add(genRequest(1, 6))
	f.Add(manyMessages(4)) // messages sharing all but their last bytes (the memo's old bucket key)
	// One memo across the inputs a worker sees: a memo parse must always
	// equal a fresh one.
	memoParser := Parser{Memo: &Memo{MaxBytes: 1 << 20}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		rm, errm := memoParser.Parse(body)
		if (err == nil) != (errm == nil) || !reflect.DeepEqual(r, rm) {
			t.Fatalf("memo parse differs: %v / %v", err, errm)
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		isObj := len(trimmed) > 0 && trimmed[0] == '{'
		valid := json.Valid(body)
		if err == nil {
			if !valid || !isObj {
				t.Fatalf("accepted %q (json.Valid=%v)", body, valid)
			}
		} else {
			if r != nil {
				t.Fatal("request returned with an error")
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(body) {
				t.Fatalf("error %v is not a *SyntaxError with an offset in the body", err)
			}
			if valid && isObj {
				if !errors.Is(err, ErrDuplicateKey) {
					t.Fatalf("refused valid JSON object %q: %v", body, err)
				}
				if dup, _ := dupKeyOracle(body); !dup {
					t.Fatalf("reported a duplicate key encoding/json does not see: %q: %v", body, err)
				}
			}
			return
		}
		if dup, key := dupKeyOracle(body); dup && !strings.ContainsRune(key, '\uFFFD') {
			t.Fatalf("missed duplicate key %q in %q", key, body)
		}
		if !r.Bound {
			return
		}
		for i, m := range r.Messages {
			if !json.Valid(body[m.Span.Start:m.Span.End]) {
				t.Fatalf("message %d span is not a JSON value", i)
			}
			for j, b := range m.Blocks {
				if !json.Valid(body[b.Span.Start:b.Span.End]) {
					t.Fatalf("block %d.%d span is not a JSON value", i, j)
				}
			}
		}
		ends := r.SentChain(nil)
		for i := range r.Messages {
			if ends[i] != r.Messages[i].End {
				t.Fatal("SentChain(nil) differs from End")
			}
		}
		// Rewrite with a selection derived from the input.
		sel := len(body)
		strip := func(i, j int) bool { return (i+j+sel)%3 == 0 }
		drop := func(i int) bool { return (i+sel)%4 == 1 }
		out := Rewrite(body, r, strip, drop)
		r2, err := ParseRequest(out)
		if err != nil {
			t.Fatalf("rewrite does not parse: %v\n%q\n%q", err, body, out)
		}
		k := 0
		for i, m := range r.Messages {
			if drop(i) {
				continue
			}
			m2 := r2.Messages[k]
			if m2.Frame != m.Frame {
				t.Fatalf("message %d frame changed by rewrite", i)
			}
			n := 0
			for j := range m.Blocks {
				if !strip(i, j) {
					if m2.Blocks[n].Digest != m.Blocks[j].Digest || m2.Blocks[n].Key != m.Blocks[j].Key {
						t.Fatalf("block %d.%d changed by rewrite", i, j)
					}
					n++
				}
			}
			if n != len(m2.Blocks) {
				t.Fatalf("message %d: %d blocks after rewrite, want %d", i, len(m2.Blocks), n)
			}
			k++
		}
		if k != len(r2.Messages) {
			t.Fatalf("%d messages after rewrite, want %d", len(r2.Messages), k)
		}
	})
}

// FuzzCanonical checks Canonical against the independent encoding/json
// based reference (refCanonical) wherever the decoded value is unambiguous
// (valid UTF-8, no surrogate escapes, no duplicate keys), and against
// json.Valid everywhere.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.0,"\u00e9\n",{"d":null,"c":true}]}`, `"\u2028<&>"`, `[1e2,-0,0.5]`, `{"😀":1,"｡":2}`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonical(nil, in)
		if (err == nil) != json.Valid(in) && !errors.Is(err, ErrDuplicateKey) {
			t.Fatalf("Canonical err=%v, json.Valid=%v for %q", err, json.Valid(in), in)
		}
		if err != nil || !utf8.Valid(in) || bytes.Contains(bytes.ToLower(in), []byte(`\ud`)) {
			return
		}
		want, rerr := refCanonical(in)
		if rerr != nil {
			t.Fatalf("reference refused %q: %v", in, rerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q)\n got %q\nwant %q", in, got, want)
		}
		again, err := Canonical(nil, got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("canonical form is not a fixed point: %q -> %q (%v)", got, again, err)
		}
	})
}
