package judgetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"sort"
)

// This file is the judge's own notion of "the same value": it decodes JSON
// with UseNumber into plain Go values, drops cache_control where it is a
// marker, and feeds a tagged, length-framed encoding into SHA-256. It shares
// no code with package binding on purpose: two independent implementations
// of one documented rule are the point of the judge.

// decode parses a JSON document into maps, slices, strings, json.Number,
// bools and nil.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// feed writes v into h as a tagged, length-prefixed encoding: key order and
// inter-token whitespace are gone, string contents (whitespace included) stay.
func feed(h hash.Hash, v any) {
	var n [8]byte
	putLen := func(x int) {
		binary.BigEndian.PutUint64(n[:], uint64(x))
		h.Write(n[:])
	}
	switch x := v.(type) {
	case nil:
		h.Write([]byte{'z'})
	case bool:
		if x {
			h.Write([]byte{'T'})
		} else {
			h.Write([]byte{'F'})
		}
	case json.Number:
		h.Write([]byte{'#'})
		putLen(len(x))
		h.Write([]byte(x))
	case string:
		h.Write([]byte{'"'})
		putLen(len(x))
		h.Write([]byte(x))
	case []any:
		h.Write([]byte{'['})
		putLen(len(x))
		for _, e := range x {
			feed(h, e)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.Write([]byte{'{'})
		putLen(len(keys))
		for _, k := range keys {
			putLen(len(k))
			h.Write([]byte(k))
			feed(h, x[k])
		}
	default:
		panic(fmt.Sprintf("judge: unexpected decoded type %T", v))
	}
}

// withoutMarker returns a content block (or system block, or tool) without
// its cache_control marker, and without cache_control on the content blocks
// nested in a tool_result. Payloads (tool_use input, input_schema) keep theirs.
func withoutMarker(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		if k == "cache_control" {
			continue
		}
		out[k] = e
	}
	if m["type"] == "tool_result" {
		if inner, ok := m["content"].([]any); ok {
			c := make([]any, len(inner))
			for i, e := range inner {
				c[i] = withoutMarker(e)
			}
			out["content"] = c
		}
	}
	return out
}

func digestOf(tag string, v any) [32]byte {
	h := sha256.New()
	h.Write([]byte(tag))
	feed(h, v)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// systemDigest covers the top-level system (absent, string or blocks).
func systemDigest(body map[string]any) [32]byte {
	sys, ok := body["system"]
	if !ok {
		return digestOf("judge/system/absent", nil)
	}
	if arr, ok := sys.([]any); ok {
		c := make([]any, len(arr))
		for i, e := range arr {
			c[i] = withoutMarker(e)
		}
		sys = c
	}
	return digestOf("judge/system", sys)
}

// toolsDigest covers the tools not marked defer_loading: true, in order.
func toolsDigest(body map[string]any) [32]byte {
	arr, _ := body["tools"].([]any)
	var kept []any
	for _, t := range arr {
		if m, ok := t.(map[string]any); ok && m["defer_loading"] == true {
			continue
		}
		kept = append(kept, withoutMarker(t))
	}
	return digestOf("judge/tools", kept)
}

// chain is the running digest over the messages' non-thinking content.
type chain [32]byte

func chainStart() chain { return chain(digestOf("judge/chain/start", nil)) }

func (c chain) step(tag string, d [32]byte) chain {
	buf := make([]byte, 0, 32+len(tag)+32)
	buf = append(append(append(buf, c[:]...), tag...), d[:]...)
	return chain(sha256.Sum256(buf))
}

// frame is a message without its content blocks: role, every other field,
// and the shape of content (a string content is part of the frame).
func frame(m map[string]any) any {
	f := make(map[string]any, len(m))
	for k, v := range m {
		f[k] = v
	}
	if _, isArr := m["content"].([]any); isArr {
		delete(f, "content")
		f["\x00content is an array"] = true
	}
	return f
}

func isThinking(b map[string]any) bool {
	t := b["type"]
	return t == "thinking" || t == "redacted_thinking"
}

// splitter finds the raw members of a JSON object and the raw elements of a
// JSON array without decoding them (the judge decodes each message once and
// caches it, so splitting must not cost a full decode). It checks structure
// only; every value it returns is decoded, and so validated, by its user.
type splitter struct {
	b   []byte
	pos int
}

func (s *splitter) ws() {
	for s.pos < len(s.b) && (s.b[s.pos] == ' ' || s.b[s.pos] == '\t' || s.b[s.pos] == '\n' || s.b[s.pos] == '\r') {
		s.pos++
	}
}

// value skips one JSON value and returns its bytes.
func (s *splitter) value() ([]byte, error) {
	s.ws()
	start := s.pos
	depth := 0
	for s.pos < len(s.b) {
		c := s.b[s.pos]
		switch c {
		case '"':
			if err := s.str(); err != nil {
				return nil, err
			}
			if depth == 0 {
				return s.b[start:s.pos], nil
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 && s.pos > start {
				// A scalar that is its object's or array's last value
				// ("stream":true} ends Claude Code's bodies).
				return s.b[start:s.pos], nil
			}
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unexpected %q at %d", c, s.pos)
			}
			if depth == 0 {
				s.pos++
				return s.b[start:s.pos], nil
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				if s.pos == start {
					return nil, fmt.Errorf("unexpected %q at %d", c, s.pos)
				}
				return s.b[start:s.pos], nil
			}
		}
		s.pos++
	}
	if depth != 0 || s.pos == start {
		return nil, fmt.Errorf("unexpected end of JSON")
	}
	return s.b[start:s.pos], nil
}

func (s *splitter) str() error {
	s.pos++ // opening quote
	for s.pos < len(s.b) {
		i := bytes.IndexAny(s.b[s.pos:], "\"\\")
		if i < 0 {
			break
		}
		s.pos += i
		if s.b[s.pos] == '\\' {
			s.pos += 2
			continue
		}
		s.pos++
		return nil
	}
	return fmt.Errorf("unterminated string")
}

// members returns an object's members (a later duplicate wins, as in encoding/json).
func splitObject(b []byte) (map[string][]byte, error) {
	s := &splitter{b: b}
	s.ws()
	if s.pos >= len(b) || b[s.pos] != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	s.pos++
	out := map[string][]byte{}
	s.ws()
	if s.pos < len(b) && b[s.pos] == '}' {
		s.pos++
		return out, s.end()
	}
	for {
		s.ws()
		kraw, err := s.value()
		if err != nil || len(kraw) == 0 || kraw[0] != '"' {
			return nil, fmt.Errorf("bad object key at %d", s.pos)
		}
		var k string
		if err := json.Unmarshal(kraw, &k); err != nil {
			return nil, err
		}
		s.ws()
		if s.pos >= len(b) || b[s.pos] != ':' {
			return nil, fmt.Errorf("missing ':' at %d", s.pos)
		}
		s.pos++
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		out[k] = v
		s.ws()
		if s.pos < len(b) && b[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(b) && b[s.pos] == '}' {
			s.pos++
			return out, s.end()
		}
		return nil, fmt.Errorf("expected ',' or '}' at %d", s.pos)
	}
}

// splitArray returns an array's elements.
func splitArray(b []byte) ([][]byte, error) {
	s := &splitter{b: b}
	s.ws()
	if s.pos >= len(b) || b[s.pos] != '[' {
		return nil, fmt.Errorf("not a JSON array")
	}
	s.pos++
	var out [][]byte
	s.ws()
	if s.pos < len(b) && b[s.pos] == ']' {
		s.pos++
		return out, s.end()
	}
	for {
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		s.ws()
		if s.pos < len(b) && b[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(b) && b[s.pos] == ']' {
			s.pos++
			return out, s.end()
		}
		return nil, fmt.Errorf("expected ',' or ']' at %d", s.pos)
	}
}

func (s *splitter) end() error {
	s.ws()
	if s.pos != len(s.b) {
		return fmt.Errorf("trailing data at %d", s.pos)
	}
	return nil
}
