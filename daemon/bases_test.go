package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
)

// byRef is a host's side of compile by reference, over a real socket: it
// remembers the messages it sent with its last compile and sends only what
// follows the shared ones, as a JSON.stringify host would.
type byRef struct {
	t        *testing.T
	e        *bindingEnv
	conv     string
	lastID   string
	lastMsgs []json.RawMessage
}

// bodyWith is a Messages body with these messages.
func bodyWith(msgs []json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"model": "claude-fable-5-2", "max_tokens": 1024, "system": "be brief",
		"messages": msgs, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}})
	return b
}

func messagesOf(t testing.TB, body []byte) []json.RawMessage {
	t.Helper()
	var v struct{ Messages []json.RawMessage }
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	return v.Messages
}

func digestOf(msgs []json.RawMessage) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = string(m)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, ",")))
	return hex.EncodeToString(sum[:])
}

// compile sends msgs, by reference to the last compile when they share a
// prefix with it (shared: how many to claim; -1: the longest), else whole.
func (h *byRef) compile(msgs []json.RawMessage, shared int) (*api.CompileAnswer, error) {
	n := 0
	for n < len(msgs) && n < len(h.lastMsgs) && string(msgs[n]) == string(h.lastMsgs[n]) {
		n++
	}
	if shared >= 0 {
		n = shared
	}
	call := &api.CompileCall{Conversation: h.conv, Branch: "main", Return: api.ReturnPlan, Request: bodyWith(msgs)}
	if n > 0 && h.lastID != "" {
		call.Base = &api.CompileBase{CompileID: h.lastID, Messages: n, Digest: digestOf(msgs[:n])}
		call.Request = bodyWith(msgs[n:])
	}
	ans, err := h.e.client.Compile(h.t.Context(), call)
	if err == nil {
		h.lastID, h.lastMsgs = ans.CompileID, append([]json.RawMessage(nil), msgs...)
	}
	return ans, err
}

func planOf(a *api.CompileAnswer) string {
	p := a.CompilePlan
	p.CompileID = ""
	b, _ := json.Marshal(p)
	return string(b)
}

func codeOf(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestCompileByReference: a conversation compiled by reference gets, turn
// after turn, exactly the plan a twin compiled whole gets: appended turns,
// a pruner's rewrite of an old message (the host's digest no longer holds,
// so it compiles in full), and the strip that rewrite costs.
func TestCompileByReference(t *testing.T) {
	e := newBindingEnv(t, nil)
	ref := &byRef{t: t, e: e, conv: "by-ref"}
	whole := func(conv string, msgs []json.RawMessage) *api.CompileAnswer {
		ans, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: conv, Branch: "main", Return: api.ReturnPlan, Request: bodyWith(msgs)})
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	accept := func(id, sig string) {
		if _, err := e.client.Accept(t.Context(), &api.AcceptCall{CompileID: id, Reply: reply(sig)}); err != nil {
			t.Fatal(err)
		}
	}
	user := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, s)) }
	msgs := []json.RawMessage{user("turn 0")}
	for turn := 0; turn < 6; turn++ {
		taken := e.b.knownTaken.Load()
		if turn == 4 {
			// a pruner rewrites the first user message under every block
			msgs[0] = user("turn 0 [pruned]")
		}
		r, err := ref.compile(msgs, -1)
		if err != nil {
			t.Fatalf("turn %d: by reference: %v", turn, err)
		}
		w := whole("whole", msgs)
		if planOf(r) != planOf(w) {
			t.Fatalf("turn %d: by reference\n %s\nwhole\n %s", turn, planOf(r), planOf(w))
		}
		if turn == 4 && r.ThinkingStripped == 0 {
			t.Fatalf("turn 4: the pruned history kept every block: %s", planOf(r))
		}
		// A turn by reference parses only what it added: the shared
		// messages are taken from the base's parse.
		if got := e.b.knownTaken.Load() - taken; turn > 0 && turn != 4 && got != int64(len(msgs)-2) {
			t.Fatalf("turn %d: %d shared messages taken from the base's parse, want %d", turn, got, len(msgs)-2)
		}
		sig := fmt.Sprintf("sig-ref-%d", turn)
		accept(r.CompileID, sig)
		accept(w.CompileID, sig)
		msgs = append(msgs, reply(sig), user(fmt.Sprintf("turn %d", turn+1)))
	}
	// A claim shorter than what the base's own check covered (its digest
	// state is then not used), honest and not.
	r, err := ref.compile(msgs, 1)
	if err != nil {
		t.Fatalf("a short claim: %v", err)
	}
	if w := whole("whole", msgs); planOf(r) != planOf(w) {
		t.Fatalf("a short claim: %s, whole %s", planOf(r), planOf(w))
	}
	long := len(msgs) - 1
	_, err = e.client.Compile(t.Context(), &api.CompileCall{Conversation: "by-ref", Branch: "main", Return: api.ReturnPlan, Request: bodyWith(msgs[long:]),
		Base: &api.CompileBase{CompileID: ref.lastID, Messages: long, Digest: digestOf(append([]json.RawMessage{user("forged")}, msgs[1:long]...))}})
	if codeOf(err) != api.CodeBaseMismatch {
		t.Fatalf("a forged claim over a base checked incrementally: %v", err)
	}
	if r, w := e.dbCompiles(t, "by-ref"), e.dbCompiles(t, "whole"); r != w || r != 7 {
		t.Fatalf("compiles recorded: by reference %d, whole %d; want 7 each", r, w)
	}
}

// TestCompileByReferenceRefusals: every claim bindery cannot check is a
// clear 409 (or 400), records nothing, and a full compile follows.
func TestCompileByReferenceRefusals(t *testing.T) {
	e := newBindingEnv(t, nil)
	h := &byRef{t: t, e: e, conv: "refusals"}
	user := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, s)) }
	first := []json.RawMessage{user("a"), reply("sig-a"), user("b")}
	if _, err := h.compile(first, 0); err != nil {
		t.Fatal(err)
	}
	base := h.lastID
	before := e.dbCompiles(t, "refusals")
	changed := []json.RawMessage{user("a [edited]"), reply("sig-a"), user("b"), reply("sig-b"), user("c")}
	try := func(name, want string, call *api.CompileCall) {
		t.Helper()
		_, err := e.client.Compile(t.Context(), call)
		if got := codeOf(err); got != want {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
	tail := bodyWith(changed[3:])
	try("an old message changed, the digest of what the host holds now", api.CodeBaseMismatch,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: base, Messages: 3, Digest: digestOf(changed[:3])}})
	try("more messages than the base has", api.CodeBaseMismatch,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: base, Messages: 4, Digest: digestOf(changed[:4])}})
	try("a compile bindery never made", api.CodeBaseUnknown,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: "c_99_zzzz", Messages: 1, Digest: digestOf(first[:1])}})
	try("another conversation's compile", api.CodeBaseUnknown,
		&api.CompileCall{Conversation: "other", Request: tail, Base: &api.CompileBase{CompileID: base, Messages: 1, Digest: digestOf(first[:1])}})
	try("a digest that is not SHA-256 hex", api.CodeBadRequest,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: base, Messages: 1, Digest: "xyz"}})
	try("no messages shared", api.CodeBadRequest,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: base, Messages: 0, Digest: digestOf(first[:1])}})
	try("a request without messages", api.CodeBadRequest,
		&api.CompileCall{Conversation: "refusals", Request: json.RawMessage(`{"model":"claude-fable-5-2"}`), Base: &api.CompileBase{CompileID: base, Messages: 1, Digest: digestOf(first[:1])}})
	try("an id over --max-id", api.CodeLimitExceeded,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: strings.Repeat("c", 5000), Messages: 1, Digest: digestOf(first[:1])}})
	dry, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "refusals", Request: bodyWith(first), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	try("a dry run is no base", api.CodeBaseUnknown,
		&api.CompileCall{Conversation: "refusals", Request: tail, Base: &api.CompileBase{CompileID: dry.CompileID, Messages: 1, Digest: digestOf(first[:1])}})
	if after := e.dbCompiles(t, "refusals"); after != before {
		t.Fatalf("refused compiles recorded rows: %d -> %d", before, after)
	}
	// A restart forgets every base: the host's next compile is a full one.
	b2 := NewBinder(e.j, BinderConfig{})
	_, err = b2.Compile(t.Context(), &api.CompileCall{Conversation: "refusals", Request: bodyWith(first[1:]), Base: &api.CompileBase{CompileID: base, Messages: 1, Digest: digestOf(first[:1])}})
	if codeOf(err) != api.CodeBaseUnknown {
		t.Fatalf("after a restart: %v", err)
	}
	// The whole request is bounded as one sent whole would be.
	small := NewBinder(e.j, BinderConfig{MaxBody: 1 << 10})
	big, err := small.Compile(t.Context(), &api.CompileCall{Conversation: "bounded", Request: bodyWith([]json.RawMessage{user(strings.Repeat("x", 700))})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.Compile(t.Context(), &api.CompileCall{Conversation: "bounded", Request: bodyWith([]json.RawMessage{user(strings.Repeat("y", 700))}),
		Base: &api.CompileBase{CompileID: big.CompileID, Messages: 1, Digest: digestOf([]json.RawMessage{user(strings.Repeat("x", 700))})}})
	if codeOf(err) != api.CodeLimitExceeded {
		t.Fatalf("a rebuilt request over --max-body: %v", err)
	}
}

// TestCompileByReferenceReturnsTheWholeRequest: with return=request, the
// answer to a compile by reference is the whole request, as a full compile
// of it answers.
func TestCompileByReferenceReturnsTheWholeRequest(t *testing.T) {
	e := newBindingEnv(t, nil)
	user := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, s)) }
	first := []json.RawMessage{user("a")}
	a, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "whole-answer", Request: bodyWith(first)})
	if err != nil {
		t.Fatal(err)
	}
	next := []json.RawMessage{user("a"), reply("sig-x"), user("b")}
	r, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "whole-answer", Request: bodyWith(next[1:]),
		Base: &api.CompileBase{CompileID: a.CompileID, Messages: 1, Digest: digestOf(next[:1])}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Request) != string(bodyWith(next)) {
		t.Fatalf("answer\n %s\nwant\n %s", r.Request, bodyWith(next))
	}
}

// dbCompiles counts a conversation's compile rows.
func (e *bindingEnv) dbCompiles(t *testing.T, conv string) int {
	t.Helper()
	st, err := e.db.LoadConversation(t.Context(), conv)
	if err != nil {
		t.Fatal(err)
	}
	return len(st.Compiles)
}

// TestBaseStoreBounds: the newest bases of a conversation are kept, the
// least recently used go first past the byte bound, and a body over it is
// never kept. A base's size is its body and its parse (o here: a
// one-message parse's).
func TestBaseStoreBounds(t *testing.T) {
	req := func(n int) *binding.Request { return &binding.Request{Messages: make([]binding.Message, n)} }
	o := baseSize(nil, req(1))
	if o <= 0 {
		t.Fatal("a parse counts nothing")
	}
	s := &baseStore{maxBytes: 100 + 3*o}
	body := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	s.put(&base{id: "a1", conversation: "a", body: body(10), req: req(1)}, nil)
	s.put(&base{id: "a2", conversation: "a", body: body(10), req: req(1)}, nil)
	s.put(&base{id: "a3", conversation: "a", body: body(10), req: req(1)}, nil)
	if _, ok := s.get("a1"); ok {
		t.Fatal("a conversation keeps more than its newest bases")
	}
	s.put(&base{id: "b1", conversation: "b", body: body(40), req: req(1)}, nil)
	s.get("a2") // a2 used since b1 was put
	s.put(&base{id: "c1", conversation: "c", body: body(50), req: req(1)}, nil)
	if _, ok := s.get("a3"); ok {
		t.Fatal("the least recently used base was kept past the byte bound")
	}
	for _, id := range []string{"a2", "b1", "c1"} {
		if _, ok := s.get(id); !ok {
			t.Fatalf("%s evicted", id)
		}
	}
	s.put(&base{id: "d1", conversation: "d", body: body(100 + 2*o + 1), req: req(1)}, nil)
	if _, ok := s.get("d1"); ok || s.bytes > s.maxBytes {
		t.Fatalf("a body over the bound kept (%d bytes held)", s.bytes)
	}
}
