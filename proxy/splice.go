package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/api/jsonscan"
)

// A body is spliced, never re-encoded (research/gateways.md, "What a
// binding-aware gateway must get right", 1): encoding/json would sort
// keys, escape <, > and &, and rewrite numbers and invalid UTF-8, and the
// provider would then read other bytes than the client sent beside a
// signature. Every edit here cuts whole elements out of arrays and keeps
// every other byte where it was, the separators between the elements that
// stay included.

// span is a value's bytes in a body: b[start:end].
type span struct{ start, end int }

// member finds the member key of the JSON object whose value spans s in
// b and returns the member's value span; ok is false when the object has
// no such member. Keys are matched raw (between the quotes): no client
// escapes a plain ASCII key.
func member(b []byte, s span, key string) (span, bool, error) {
	b = b[:s.end]
	i := jsonscan.SkipSpace(b, s.start)
	if i >= len(b) || b[i] != '{' {
		return span{}, false, fmt.Errorf("expected an object at offset %d", i)
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return span{}, false, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return span{}, false, fmt.Errorf("expected a member name at offset %d", i)
		}
		end, ok := jsonscan.StringEnd(b, i)
		if !ok {
			return span{}, false, fmt.Errorf("unterminated string at offset %d", i)
		}
		k := b[i+1 : end-1]
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return span{}, false, fmt.Errorf("expected ':' at offset %d", i)
		}
		i = jsonscan.SkipSpace(b, i+1)
		vend, ok := jsonscan.SkipValue(b, i)
		if !ok {
			return span{}, false, fmt.Errorf("member %q: unterminated value at offset %d", k, i)
		}
		if string(k) == key {
			return span{i, vend}, true, nil
		}
		i = jsonscan.SkipSpace(b, vend)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonscan.SkipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return span{}, false, nil
		default:
			return span{}, false, fmt.Errorf("expected ',' or '}' at offset %d", i)
		}
	}
}

// topMember is member on the whole body.
func topMember(b []byte, key string) (span, bool, error) {
	return member(b, span{0, len(b)}, key)
}

// elements returns the spans of the elements of the JSON array spanning s
// in b, in b's offsets.
func elements(b []byte, s span) ([]span, error) {
	_, els, err := arrayAt(b[:s.end], s.start, 0)
	return els, err
}

// arrayAt reads the JSON array whose value begins at or after i (spaces
// skipped): its span, ending past its closing bracket, and its elements',
// at most max of them (0: no bound) or an error.
func arrayAt(b []byte, i, max int) (span, []span, error) {
	i = jsonscan.SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return span{}, nil, fmt.Errorf("expected an array at offset %d", i)
	}
	start := i
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return span{start, i + 1}, nil, nil
	}
	var out []span
	for {
		vend, ok := jsonscan.SkipValue(b, i)
		if !ok {
			return span{}, nil, fmt.Errorf("unterminated element at offset %d", i)
		}
		if max > 0 && len(out) == max {
			return span{}, nil, fmt.Errorf("over %d elements", max)
		}
		out = append(out, span{i, vend})
		i = jsonscan.SkipSpace(b, vend)
		switch {
		case i < len(b) && b[i] == ',':
			i = jsonscan.SkipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return span{start, i + 1}, out, nil
		default:
			return span{}, nil, fmt.Errorf("expected ',' or ']' at offset %d", i)
		}
	}
}

// messageSpans returns the messages array's span and its elements'.
func messageSpans(body []byte) (span, []span, error) {
	rb, err := readRequestBody(body)
	return rb.arr, rb.els, err
}

// applyPlan returns body with the plan's stripped blocks
// (messages.N.content.M) and dropped messages (messages.N) cut out and
// every other byte as the client sent it. The paths are the daemon's, in
// the request as the proxy gave it (api.Strip).
func applyPlan(body []byte, strips []api.Strip, dropped []string) ([]byte, error) {
	if len(strips) == 0 && len(dropped) == 0 {
		return body, nil
	}
	arr, msgs, err := messageSpans(body)
	if err != nil {
		return nil, err
	}
	return applyPlanAt(body, arr, msgs, strips, dropped)
}

// applyPlanAt is applyPlan with the messages array's span and its
// elements' already found (messageSpans): the request is not scanned
// again, which on a 1 MB history was most of a plan's cost.
func applyPlanAt(body []byte, arr span, msgs []span, strips []api.Strip, dropped []string) ([]byte, error) {
	cuts, err := planCuts(body, arr, msgs, strips, dropped)
	if err != nil {
		return nil, err
	}
	return splice(body, cuts).bytes(), nil
}

// planCuts are the byte ranges of body a plan takes out, ascending (what
// applyPlanAt splices out; a base keeps them, so the next turn's bytes can
// be sent ahead of its compile: speculate.go).
func planCuts(body []byte, arr span, msgs []span, strips []api.Strip, dropped []string) ([]span, error) {
	if len(strips) == 0 && len(dropped) == 0 {
		return nil, nil
	}
	dropMsg := make(map[int]bool, len(dropped))
	for _, p := range dropped {
		n, err := messageIndex(p)
		if err != nil {
			return nil, err
		}
		if n >= len(msgs) {
			return nil, fmt.Errorf("dropped %s: the request has %d messages", p, len(msgs))
		}
		dropMsg[n] = true
	}
	blocks := map[int]map[int]bool{}
	for _, s := range strips {
		n, m, err := blockIndex(s.Path)
		if err != nil {
			return nil, err
		}
		if n >= len(msgs) {
			return nil, fmt.Errorf("strip %s: the request has %d messages", s.Path, len(msgs))
		}
		if dropMsg[n] {
			continue
		}
		if blocks[n] == nil {
			blocks[n] = map[int]bool{}
		}
		blocks[n][m] = true
	}
	cuts := removals(body, arr, msgs, dropMsg)
	for n, rm := range blocks {
		content, ok, err := member(body, msgs[n], "content")
		if err == nil && !ok {
			err = errors.New("no content")
		}
		if err != nil {
			return nil, fmt.Errorf("messages.%d: %w", n, err)
		}
		els, err := elements(body, content)
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %w", n, err)
		}
		for m := range rm {
			if m >= len(els) {
				return nil, fmt.Errorf("strip messages.%d.content.%d: the message has %d blocks", n, m, len(els))
			}
		}
		cuts = append(cuts, removals(body, content, els, rm)...)
	}
	slices.SortFunc(cuts, func(x, y span) int { return x.start - y.start })
	return cuts, nil
}

// removals are the byte ranges that take the elements in rm out of the
// array arr (whose elements are els), keeping the separators between the
// elements that stay: an element goes with the separator before it, the
// first one that stays loses the separator before it.
func removals(b []byte, arr span, els []span, rm map[int]bool) []span {
	if len(rm) == 0 {
		return nil
	}
	var out []span
	kept := false // an element before this one stays
	for i, e := range els {
		if !rm[i] {
			if !kept && i > 0 {
				// Everything from the first element to this one goes: the
				// removed ones and the separator before this.
				out = append(out, span{els[0].start, e.start})
			}
			kept = true
			continue
		}
		if kept {
			out = append(out, span{els[i-1].end, e.end})
		}
	}
	if !kept {
		// Every element goes: the array keeps its brackets and the space
		// inside them.
		out = append(out, span{els[0].start, els[len(els)-1].end})
	}
	return out
}

// splice returns b without the ranges in cuts (which do not overlap), as
// the pieces of b between them: b is never copied. A 1 MB copy per
// request cost 0.2 ms, and several when its fresh pages faulted in.
func splice(b []byte, cuts []span) spliced {
	if len(cuts) == 0 {
		return whole(b)
	}
	slices.SortFunc(cuts, func(x, y span) int { return x.start - y.start })
	out := spliced{pieces: make([][]byte, 0, len(cuts)+1)}
	at := 0
	for _, c := range cuts {
		out.add(b[at:c.start])
		at = c.end
	}
	out.add(b[at:])
	return out
}

// spliced is a body as pieces of other buffers, in order, none written
// again once here.
type spliced struct {
	pieces [][]byte
	size   int
}

// whole is b as one piece.
func whole(b []byte) spliced {
	var s spliced
	s.add(b)
	return s
}

func (s *spliced) add(p []byte) {
	if len(p) > 0 {
		s.pieces = append(s.pieces, p)
		s.size += len(p)
	}
}

// Len is the body's length.
func (s spliced) Len() int { return s.size }

// bytes is the body in one buffer (copied unless it is one piece).
func (s spliced) bytes() []byte {
	switch len(s.pieces) {
	case 0:
		return nil
	case 1:
		return s.pieces[0]
	}
	out := make([]byte, 0, s.size)
	for _, p := range s.pieces {
		out = append(out, p...)
	}
	return out
}

// reader reads the body from its start; each call is a new reader.
func (s spliced) reader() io.Reader {
	bufs := net.Buffers(slices.Clone(s.pieces))
	return &bufs
}

// cut splits the body after its first n bytes (0 <= n <= Len).
func (s spliced) cut(n int) (head, tail spliced) {
	for _, p := range s.pieces {
		switch k := min(len(p), n-head.size); {
		case k == len(p):
			head.add(p)
		case k <= 0:
			tail.add(p)
		default:
			head.add(p[:k])
			tail.add(p[k:])
		}
	}
	return head, tail
}

// equal says whether a and b hold the same bytes, however they are cut
// into pieces.
func (s spliced) equal(o spliced) bool {
	if s.size != o.size {
		return false
	}
	a, b := s.pieces, o.pieces
	var x, y []byte
	for {
		if len(x) == 0 {
			if len(a) == 0 {
				return len(y) == 0 && len(b) == 0
			}
			x, a = a[0], a[1:]
		}
		if len(y) == 0 {
			if len(b) == 0 {
				return false
			}
			y, b = b[0], b[1:]
		}
		n := min(len(x), len(y))
		if !bytes.Equal(x[:n], y[:n]) {
			return false
		}
		x, y = x[n:], y[n:]
	}
}

// withMessages returns body with its messages array replaced by the
// elements els[from:] of the same body, as the daemon is shown them (each
// string content in wraps written as one text block: shape.go), for a
// compile by reference: the call carries only the messages after those it
// shares with its base.
func withMessages(body []byte, arr span, els []span, from int, wraps []span) []byte {
	size := len(body) - (arr.end - arr.start) + 2
	if from < len(els) {
		size += els[len(els)-1].end - els[from].start + 64
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	out.Write(body[:arr.start])
	out.WriteByte('[')
	if from < len(els) {
		writeShown(out, body, els[from].start, els[len(els)-1].end, wraps)
	}
	out.WriteByte(']')
	out.Write(body[arr.end:])
	return out.Bytes()
}

// messageIndex reads messages.N.
func messageIndex(p string) (int, error) {
	rest, ok := strings.CutPrefix(p, "messages.")
	if !ok {
		return 0, fmt.Errorf("path %q is not messages.N", p)
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("path %q is not messages.N", p)
	}
	return n, nil
}

// blockIndex reads messages.N.content.M.
func blockIndex(p string) (n, m int, err error) {
	rest, ok := strings.CutPrefix(p, "messages.")
	if !ok {
		return 0, 0, fmt.Errorf("path %q is not messages.N.content.M", p)
	}
	ns, ms, ok := strings.Cut(rest, ".content.")
	if !ok {
		return 0, 0, fmt.Errorf("path %q is not messages.N.content.M", p)
	}
	n, err1 := strconv.Atoi(ns)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || n < 0 || m < 0 {
		return 0, 0, fmt.Errorf("path %q is not messages.N.content.M", p)
	}
	return n, m, nil
}
