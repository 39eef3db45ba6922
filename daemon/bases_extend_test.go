package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
)

// extendHost is one conversation's host against a bare baseStore, doing
// what Binder.Compile does with it: rebuild, parse with the base's known
// prefix, release the base, keep the new base.
type extendHost struct {
	t    *testing.T
	s    *baseStore
	conv string
	n    int
	body func([]json.RawMessage) []byte // nil: bodyWith
}

// How extendHost.compile ends: the compile's base kept, a dry run, or a
// compile that fails after its rebuild (nothing kept).
const (
	keep = iota
	dry
	fail
)

// compile is msgs compiled by reference to base from (n: how many of its
// messages the call names), or whole when from is "". It returns the new
// base (nil unless kept) and the whole request.
func (h *extendHost) compile(from string, n int, msgs []json.RawMessage, end int) (*base, []byte, error) {
	h.t.Helper()
	h.n++
	bodyWith := bodyWith
	if h.body != nil {
		bodyWith = h.body
	}
	id := fmt.Sprintf("%s-%d", h.conv, h.n)
	call := &api.CompileCall{Conversation: h.conv, Branch: "main", Return: api.ReturnPlan, Request: bodyWith(msgs), DryRun: end == dry}
	var p binding.Parser
	var proved *shared
	if from != "" {
		call.Base = &api.CompileBase{CompileID: from, Messages: n, Digest: digestOf(msgs[:n])}
		call.Request = bodyWith(msgs[n:])
		whole, pr, err := h.s.rebuild(call, 1<<30)
		if err != nil {
			return nil, nil, err
		}
		call.Request, proved = whole, pr
		p.Known, p.Spare = pr.known, pr.spare
	}
	req, err := p.Parse(call.Request)
	if err != nil {
		h.t.Fatal(err)
	}
	if want, _ := binding.ParseRequest(bodyWith(msgs)); !bytes.Equal(call.Request, bodyWith(msgs)) || len(req.Messages) != len(want.Messages) {
		h.t.Fatalf("%s: the rebuilt request is not the whole one", id)
	}
	if proved != nil {
		h.s.release(proved.from)
	}
	if end != keep {
		return nil, call.Request, nil
	}
	nb := &base{id: id, conversation: h.conv, body: call.Request, req: req, mem: p.Built(), ownBody: proved != nil}
	h.s.put(nb, proved)
	return nb, call.Request, nil
}

// copyMessages is msgs and their blocks in arrays of their own.
func copyMessages(msgs []binding.Message) []binding.Message {
	out := make([]binding.Message, len(msgs))
	for i, m := range msgs {
		if m.Blocks != nil {
			m.Blocks = append([]binding.Block{}, m.Blocks...)
		}
		out[i] = m
	}
	return out
}

func (s *baseStore) extendedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spares.extended
}

// TestBaseExtended: a turn by reference extends its base's body in place
// when the base is rebuild's, unread by others and has the room; the base
// then holds only the shared messages (a claim of more is base_mismatch, a
// retry of as many is rebuilt from them); a dry run, a lent base, a base
// another compile reads, and a turn that goes back below what an older
// base sharing the memory holds all get a copy, and no base's bytes ever
// change under it.
func TestBaseExtended(t *testing.T) {
	user := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, s)) }
	turn := func(msgs []json.RawMessage, i int) []json.RawMessage {
		return append(msgs[:len(msgs):len(msgs)], reply(fmt.Sprintf("sig-%d", i)), user(fmt.Sprintf("turn %d %s", i, strings.Repeat("t", 100))))
	}
	held := func(b *base) []byte { return append([]byte(nil), b.body...) }
	s := &baseStore{}
	h := &extendHost{t: t, s: s, conv: "x"}
	m1 := turn([]json.RawMessage{user("start")}, 1)
	b1, _, err := h.compile("", 0, m1, keep) // the host's body: not rebuild's
	if err != nil {
		t.Fatal(err)
	}
	m2 := turn(m1, 2)
	b2, _, err := h.compile(b1.id, len(m1), m2, keep)
	if err != nil || s.extendedCount() != 0 {
		t.Fatalf("from the host's body: %v, %d extended", err, s.extendedCount())
	}
	m3 := turn(m2, 3)
	b2bytes := held(b2)
	b2msgs := b2.req.Messages[:len(m2)-1] // b2's parse, whatever becomes of b2
	b2parse := copyMessages(b2msgs)
	b3, _, err := h.compile(b2.id, len(m2)-1, m3, keep)
	if err != nil {
		t.Fatal(err)
	}
	if &b3.req.Messages[0] != &b2msgs[0] || b2.mem.Messages != nil {
		t.Fatal("b3 was not parsed in b2's parse memory, or b2 kept it")
	}
	if s.extendedCount() != 1 || &b3.body[0] != &b2.body[0] {
		t.Fatalf("b2 not extended in place (%d extended)", s.extendedCount())
	}
	if b2.held != len(m2)-1 || cap(b2.body) != len(b2.body) || !bytes.Equal(b2.body, b2bytes[:len(b2.body)]) {
		t.Fatalf("the extended base holds %d messages in %d of %d bytes, want %d messages, its shared bytes", b2.held, len(b2.body), cap(b2.body), len(m2)-1)
	}

	// b2 holds its shared messages only: a claim of all of them is refused
	// (compile in full), a retry of as many is rebuilt, not extended.
	if _, _, err := h.compile(b2.id, len(m2), m3, keep); codeOf(err) != api.CodeBaseMismatch {
		t.Fatalf("a claim of more than b2 holds: %v, want %s", err, api.CodeBaseMismatch)
	}
	kept, b2view := held(b2), b2.body // b2's memory, whatever becomes of b2
	if _, _, err := h.compile(b2.id, len(m2)-1, m3, dry); err != nil || s.extendedCount() != 1 {
		t.Fatalf("a dry-run retry against b2: %v, %d extended", err, s.extendedCount())
	}

	// b3 is extended in turn; going back below what b2 holds gets a copy,
	// and b2's bytes stay as they were.
	m4 := turn(m3, 4)
	if _, _, err := h.compile(b3.id, len(m3)-1, m4, dry); err != nil || s.extendedCount() != 1 {
		t.Fatalf("a dry run by reference: %v, %d extended", err, s.extendedCount())
	}
	b3.lent = true
	if _, _, err := h.compile(b3.id, len(m3)-1, m4, fail); err != nil || s.extendedCount() != 1 {
		t.Fatalf("against a lent base: %v, %d extended", err, s.extendedCount())
	}
	b3.lent = false
	other, _ := s.acquire(b3.id) // another compile reads b3
	if _, _, err := h.compile(b3.id, len(m3)-1, m4, fail); err != nil || s.extendedCount() != 1 {
		t.Fatalf("against a base another compile reads: %v, %d extended", err, s.extendedCount())
	}
	s.release(other)
	b3view := b3.body
	rewound := turn(m2[:len(m2)-2], 9)
	b5, _, err := h.compile(b3.id, len(m2)-2, rewound, keep)
	if err != nil || s.extendedCount() != 1 {
		t.Fatalf("below b2's shared messages: %v, %d extended", err, s.extendedCount())
	}
	if !bytes.Equal(b2view, kept) || !reflect.DeepEqual(copyMessages(b2msgs), b2parse) {
		t.Fatal("b2's bytes or parse changed under it")
	}
	if &b5.body[0] == &b3view[0] {
		t.Fatal("the rewound turn was built in b3's memory")
	}
	m6 := turn(rewound, 10)
	b6, _, err := h.compile(b5.id, len(rewound)-1, m6, keep)
	if err != nil || s.extendedCount() != 2 {
		t.Fatalf("b5, a copy of its own: %v, %d extended", err, s.extendedCount())
	}
	// b2 and b3 are dropped now: the memory they shared is no spare
	if _, ok := s.get(b3.id); ok {
		t.Fatal("b3 still kept")
	}
	for _, sp := range s.spares.list {
		if cap(sp.mem.Messages) > 0 && &sp.mem.Messages[:1][0] == &b2msgs[0] || cap(sp.body) > 0 && &sp.body[:1][0] == &b2view[0] {
			t.Fatal("memory bases shared is a spare")
		}
	}

	// A request whose bytes before its messages differ (here max_tokens,
	// of the same length) is not built on the base's.
	h.body = func(msgs []json.RawMessage) []byte {
		return bytes.Replace(bodyWith(msgs), []byte(`"max_tokens":1024`), []byte(`"max_tokens":2048`), 1)
	}
	if _, _, err := h.compile(b6.id, len(m6)-1, turn(m6, 11), fail); err != nil || s.extendedCount() != 2 {
		t.Fatalf("another head: %v, %d extended", err, s.extendedCount())
	}

	// New messages over the room b6 was made with get a copy.
	h.body = nil
	big := append(turn(m6, 12), user(strings.Repeat("b", cap(b6.body)-len(b6.body)+1)))
	if _, _, err := h.compile(b6.id, len(m6)-1, big, keep); err != nil || s.extendedCount() != 2 {
		t.Fatalf("over the room: %v, %d extended", err, s.extendedCount())
	}
}
