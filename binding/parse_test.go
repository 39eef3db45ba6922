package binding

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, body string) *Request {
	t.Helper()
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatalf("ParseRequest(%s): %v", body, err)
	}
	return r
}

func TestParseRequestUnbound(t *testing.T) {
	for _, body := range []string{
		`{}`,
		` { "model" : "claude-x" } `,
		`{"model":"claude-x","messages":null}`,
		`{"model":"claude-x","messages":"hello"}`,
		`{"model":"claude-x","messages":{"role":"user"}}`,
	} {
		r, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatalf("ParseRequest(%s): %v", body, err)
		}
		if r.Bound || r.Messages != nil {
			t.Fatalf("ParseRequest(%s): Bound=%v Messages=%v, want unbound", body, r.Bound, r.Messages)
		}
		if body != `{}` && r.Model != "claude-x" {
			t.Fatalf("ParseRequest(%s): Model=%q", body, r.Model)
		}
	}
	r := mustParse(t, `{"messages":[]}`)
	if !r.Bound || len(r.Messages) != 0 {
		t.Fatalf("empty messages array: Bound=%v len=%d", r.Bound, len(r.Messages))
	}
}

func TestParseRequestErrors(t *testing.T) {
	cases := []struct {
		name, body string
		dup        bool
	}{
		{"array body", `[{"messages":[]}]`, false},
		{"string body", `"x"`, false},
		{"empty body", ``, false},
		{"truncated", `{"messages":[{"role":"user","content":"hi"}`, false},
		{"trailing data", `{"messages":[]} {}`, false},
		{"bad token in message", `{"messages":[{"role":user}]}`, false},
		{"bad token in block", `{"messages":[{"role":"user","content":[{"type":"text","text":"a",}]}]}`, false},
		{"bad number in system", `{"system":[{"type":"text","n":01}],"messages":[]}`, false},
		{"control char", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\x01\"}]}", false},
		{"dup top level", `{"model":"a","messages":[],"model":"b"}`, true},
		{"dup top level messages", `{"messages":[],"messages":[]}`, true},
		{"dup top level via escape", `{"model":"a","mod\u0065l":"b"}`, true},
		{"dup in message", `{"messages":[{"role":"user","content":"a","role":"user"}]}`, true},
		{"dup content", `{"messages":[{"role":"user","content":[],"content":"x"}]}`, true},
		{"dup in block", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`, true},
		{"dup marker in block", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{},"cache_control":{}}]}]}`, true},
		{"dup in thinking block", `{"messages":[{"role":"assistant","content":[{"type":"thinking","signature":"a","signature":"b"}]}]}`, true},
		{"dup deep in tool input", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","input":{"a":{"x":1,"x":2}}}]}]}`, true},
		{"dup in system block", `{"system":[{"type":"text","type":"text"}],"messages":[]}`, true},
		{"dup in tool", `{"tools":[{"name":"a","name":"b"}],"messages":[]}`, true},
		{"dup in deferred tool", `{"tools":[{"name":"a","defer_loading":true,"name":"b"}],"messages":[]}`, true},
		{"dup in unbound body", `{"metadata":{"a":1,"a":1}}`, true},
		{"dup in ignored field", `{"thinking":{"type":"adaptive","type":"enabled"},"messages":[]}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("ParseRequest(%s) = %+v, want an error", tc.body, r)
			}
			if r != nil {
				t.Fatalf("ParseRequest returned a request with its error")
			}
			if errors.Is(err, ErrDuplicateKey) != tc.dup {
				t.Fatalf("error %v: duplicate=%v, want %v", err, !tc.dup, tc.dup)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(tc.body) {
				t.Fatalf("error %v: want a *SyntaxError with an offset in the body", err)
			}
		})
	}
}

func TestParseRequestFields(t *testing.T) {
	body := `{"model":"claude-\u006fpus","messages":[` +
		`{"role":"user","content":"hello"},` +
		`{"content":[{"type":"thinking","thinking":"hm","signature":"c2ln"},{"type":"redacted_thinking","data":"ZGF0YQ=="},{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"x","input":{}}],"role":"assistant"},` +
		`{"role":"user","content":[]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":""},{"type":"thinking","thinking":"x"},{"signature":"c2ln","type":"thin\u006bing"}]},` +
		`{"role":"tool","content":null},` +
		`"not an object"` +
		`]}`
	r := mustParse(t, body)
	// The role "tool" message makes it OpenAI's (foreign.go): not bound,
	// but every message is still parsed.
	if r.Bound || r.NotMessages != "a message whose role is not user, assistant or system" || r.Model != "claude-opus" || len(r.Messages) != 6 {
		t.Fatalf("Bound=%v NotMessages=%q Model=%q len=%d", r.Bound, r.NotMessages, r.Model, len(r.Messages))
	}
	var raw []json.RawMessage
	var top struct{ Messages *[]json.RawMessage }
	top.Messages = &raw
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatal(err)
	}
	for i, m := range r.Messages {
		if got := body[m.Span.Start:m.Span.End]; got != string(raw[i]) {
			t.Errorf("message %d span %q, want %q", i, got, raw[i])
		}
		if m.Frame.IsZero() || m.End.IsZero() {
			t.Errorf("message %d: zero frame or end", i)
		}
	}
	roles := []string{"user", "assistant", "user", "assistant", "tool", ""}
	for i, want := range roles {
		if r.Messages[i].Role != want {
			t.Errorf("message %d role %q, want %q", i, r.Messages[i].Role, want)
		}
	}
	if r.Messages[0].Blocks != nil || r.Messages[4].Blocks != nil || r.Messages[5].Blocks != nil {
		t.Errorf("non-array content must have nil Blocks")
	}
	if r.Messages[2].Blocks == nil || len(r.Messages[2].Blocks) != 0 {
		t.Errorf("empty content array: Blocks=%v, want empty non-nil", r.Messages[2].Blocks)
	}
	a := r.Messages[1].Blocks
	if len(a) != 4 {
		t.Fatalf("assistant blocks: %d", len(a))
	}
	kinds := []BlockKind{KindThinking, KindRedacted, KindOther, KindOther}
	for j, b := range a {
		if b.Kind != kinds[j] {
			t.Errorf("block %d kind %d, want %d", j, b.Kind, kinds[j])
		}
		span := body[b.Span.Start:b.Span.End]
		if !json.Valid([]byte(span)) || span[0] != '{' {
			t.Errorf("block %d span %q", j, span)
		}
		if b.Tokens != (len(span)+3)/4 {
			t.Errorf("block %d tokens %d for %d bytes", j, b.Tokens, len(span))
		}
	}
	if a[0].Key != sha256.Sum256([]byte("c2ln")) || !a[0].Signed || !a[0].Digest.IsZero() {
		t.Errorf("thinking: key %x signed %v digest %x", a[0].Key, a[0].Signed, a[0].Digest)
	}
	if a[1].Key != sha256.Sum256([]byte("ZGF0YQ==")) || !a[1].Signed || !a[1].Digest.IsZero() {
		t.Errorf("redacted: key %x signed %v", a[1].Key, a[1].Signed)
	}
	if a[2].Digest.IsZero() || a[3].Digest.IsZero() || !a[2].Key.IsZero() || a[2].Signed {
		t.Errorf("text/tool_use: digest or key wrong")
	}
	// Thinking is outside the chain: every block of the message sees the
	// chain after the frame, until a non-thinking block is stepped in.
	if a[0].Chain != a[1].Chain || a[1].Chain != a[2].Chain || a[3].Chain == a[2].Chain {
		t.Errorf("chain(b) across thinking blocks wrong")
	}
	if a[0].Chain != step(r.Messages[0].End, kindMessage, r.Messages[1].Frame) {
		t.Errorf("chain(b) of the first block is not end(prev) stepped by the frame")
	}
	u := r.Messages[3].Blocks
	if u[0].Signed || !u[0].Key.IsZero() || u[1].Signed || u[0].Kind != KindThinking || u[1].Kind != KindThinking {
		t.Errorf("unsigned thinking: %+v %+v", u[0], u[1])
	}
	if u[2].Kind != KindThinking || u[2].Key != sha256.Sum256([]byte("c2ln")) {
		t.Errorf("escaped type / key order: %+v", u[2])
	}
	if r.Messages[3].End != step(r.Messages[2].End, kindMessage, r.Messages[3].Frame) {
		t.Errorf("an all-thinking message steps only its frame")
	}
}

// ends returns every message's End.
func ends(r *Request) []Digest {
	var e []Digest
	for _, m := range r.Messages {
		e = append(e, m.End)
	}
	return e
}

func lastEnd(t *testing.T, body string) Digest {
	t.Helper()
	r := mustParse(t, body)
	if len(r.Messages) == 0 {
		t.Fatalf("no messages in %s", body)
	}
	return r.Messages[len(r.Messages)-1].End
}

func TestSeed(t *testing.T) {
	const base = `{"model":"m","system":[{"type":"text","text":"You are helpful."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],"messages":[]}`
	cases := []struct {
		name, other string
		equal       bool
	}{
		{"identical", base, true},
		{"key order and whitespace", `{ "messages" : [ ], "tools" : [ { "input_schema" : { "properties" : { "path" : { "type" : "string" } } , "type" : "object" } , "description" : "Read a file" , "name" : "read" } ] ,
			"system" : [ { "text" : "You are helpful." , "type" : "text" } , { "cache_control" : { "type" : "ephemeral" } , "text" : "Be brief." , "type" : "text" } ] , "model" : "m" }`, true},
		{"escapes decoded", strings.Replace(base, `"You are helpful."`, `"You are \u0068elpful\u002e"`, 1), true},
		{"system marker removed", strings.Replace(base, `,"cache_control":{"type":"ephemeral"}`, ``, 1), true},
		{"system marker moved", strings.Replace(strings.Replace(base, `,"cache_control":{"type":"ephemeral"}`, ``, 1), `"You are helpful."}`, `"You are helpful.","cache_control":{"type":"ephemeral","ttl":"1h"}}`, 1), true},
		{"tool marker added", strings.Replace(base, `"description":"Read a file",`, `"cache_control":{"type":"ephemeral"},"description":"Read a file",`, 1), true},
		{"top-level marker", strings.Replace(base, `"model":"m",`, `"model":"m","cache_control":{"type":"ephemeral"},`, 1), true},
		{"other fields", strings.Replace(base, `"model":"m",`, `"model":"other","max_tokens":5,"thinking":{"type":"adaptive"},"tool_choice":{"type":"auto"},"metadata":{},`, 1), true},
		{"messages differ", strings.Replace(base, `"messages":[]`, `"messages":[{"role":"user","content":"hi"}]`, 1), true},
		{"deferred tool added", strings.Replace(base, `"tools":[`, `"tools":[{"name":"later","defer_loading":true,"input_schema":{}},`, 1), true},
		{"deferred tool with marker", strings.Replace(base, `"tools":[`, `"tools":[{"name":"later","defer_loading":true,"cache_control":{"type":"ephemeral"}},`, 1), true},
		{"tool with defer_loading false", strings.Replace(base, `"tools":[`, `"tools":[{"name":"later","defer_loading":false},`, 1), false},
		{"cache_control in input_schema is data", strings.Replace(base, `"properties":{"path":{"type":"string"}}`, `"properties":{"path":{"type":"string"},"cache_control":{"type":"string"}}`, 1), false},
		{"tool description changed", strings.Replace(base, `"Read a file"`, `"Read a file."`, 1), false},
		{"tools reordered", strings.Replace(base, `"tools":[`, `"tools":[{"name":"a","input_schema":{}},`, 1), false},
		{"whitespace inside system string", strings.Replace(base, `"Be brief."`, `"Be brief. "`, 1), false},
		{"system string vs blocks", strings.Replace(base, `"system":[{"type":"text","text":"You are helpful."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}]`, `"system":"You are helpful.Be brief."`, 1), false},
		{"system absent", strings.Replace(base, `"system":[{"type":"text","text":"You are helpful."},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],`, ``, 1), false},
		{"tools absent", strings.Replace(base, `"tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],`, ``, 1), false},
		{"number literal", strings.Replace(base, `"type":"object"`, `"type":"object","maxItems":1.0`, 1), false},
	}
	want := mustParse(t, base).Seed
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.other).Seed
			if (got == want) != tc.equal {
				t.Fatalf("seed equal=%v, want %v\n%s", got == want, tc.equal, tc.other)
			}
		})
	}
	// Absent and empty are distinct, and system and tools do not swap.
	s1 := mustParse(t, `{"system":"","messages":[]}`).Seed
	s2 := mustParse(t, `{"messages":[]}`).Seed
	s3 := mustParse(t, `{"tools":[],"messages":[]}`).Seed
	s4 := mustParse(t, `{"tools":[{"name":"x","defer_loading":true}],"messages":[]}`).Seed
	s5 := mustParse(t, `{"system":[],"messages":[]}`).Seed
	if s1 == s2 || s2 == s3 || s3 == s5 {
		t.Fatalf("absent/empty seeds collide")
	}
	if s3 != s4 {
		t.Fatalf("an all-deferred tools array must equal an empty one")
	}
}

func TestChainEquivalence(t *testing.T) {
	const base = `{"model":"m","messages":[` +
		`{"role":"user","content":[{"type":"text","text":"Fix the bug."}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Let me look.","signature":"U0lH"},{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"read","input":{"path":"a.go","n":1}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"package a\n"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Found it.","signature":"U0lHMg=="},{"type":"text","text":"Done."}]}` +
		`]}`
	cases := []struct {
		name, other string
		equal       bool
	}{
		{"identical", base, true},
		{"whitespace and key order", strings.NewReplacer(
			`{"role":"user","content":[{"type":"text","text":"Fix the bug."}]}`, "{ \"content\" : [ { \"text\" : \"Fix the bug.\" ,\n \"type\":\"text\" } ] ,\t\"role\" : \"user\" }",
			`"input":{"path":"a.go","n":1}`, `"input":{ "n":1 , "path":"a.go" }`,
		).Replace(base), true},
		{"escape decoded", strings.Replace(base, `"Fix the bug."`, `"Fix the \u0062ug\u002E"`, 1), true},
		{"content block marker added", strings.Replace(base, `"text":"Fix the bug."}`, `"text":"Fix the bug.","cache_control":{"type":"ephemeral"}}`, 1), true},
		{"marker on tool_result block", strings.Replace(base, `"content":"package a\n"}`, `"content":"package a\n","cache_control":{"type":"ephemeral"}}`, 1), true},
		{"top-level marker and other fields", strings.Replace(base, `"model":"m",`, `"model":"x","cache_control":{"type":"ephemeral"},"max_tokens":9,"system":"changed","tools":[],`, 1), true},
		{"thinking text changed", strings.Replace(base, `"Let me look."`, `"Let me look again."`, 1), true},
		{"thinking removed", strings.Replace(base, `{"type":"thinking","thinking":"Let me look.","signature":"U0lH"},`, ``, 1), true},
		{"thinking added", strings.Replace(base, `{"type":"text","text":"Looking."}`, `{"type":"redacted_thinking","data":"eA=="},{"type":"text","text":"Looking."}`, 1), true},
		{"cache_control in tool_use input is data", strings.Replace(base, `"input":{"path":"a.go","n":1}`, `"input":{"path":"a.go","n":1,"cache_control":{"type":"ephemeral"}}`, 1), false},
		{"cache_control in tool_result payload is data", strings.Replace(base, `"content":"package a\n"`, `"content":[{"type":"text","text":"package a\n","cache_control":{"type":"ephemeral"}}]`, 1), false},
		{"cache_control on a message is data", strings.Replace(base, `{"role":"user","content":[{"type":"tool_result"`, `{"role":"user","cache_control":{"type":"ephemeral"},"content":[{"type":"tool_result"`, 1), false},
		{"tool result shortened", strings.Replace(base, `"package a\n"`, `"package a"`, 1), false},
		{"whitespace inside string", strings.Replace(base, `"Looking."`, `"Looking. "`, 1), false},
		{"number literal 1 vs 1.0", strings.Replace(base, `"n":1}`, `"n":1.0}`, 1), false},
		{"number literal 1 vs 1e0", strings.Replace(base, `"n":1}`, `"n":1e0}`, 1), false},
		{"string content vs one text block", strings.Replace(base, `"content":[{"type":"text","text":"Fix the bug."}]`, `"content":"Fix the bug."`, 1), false},
		{"clear_at counts", strings.Replace(base, `{"role":"user","content":[{"type":"tool_result"`, `{"role":"user","clear_at":3,"content":[{"type":"tool_result"`, 1), false},
		{"output_config counts", strings.Replace(base, `{"role":"user","content":[{"type":"text"`, `{"role":"user","output_config":{"effort":"low"},"content":[{"type":"text"`, 1), false},
		{"unknown message field counts", strings.Replace(base, `{"role":"user","content":[{"type":"text"`, `{"role":"user","x":null,"content":[{"type":"text"`, 1), false},
		{"role changed", strings.Replace(base, `{"role":"user","content":[{"type":"text"`, `{"role":"system","content":[{"type":"text"`, 1), false},
		{"blocks reordered", strings.Replace(base, `{"type":"text","text":"Looking."},{"type":"tool_use","id":"t1","name":"read","input":{"path":"a.go","n":1}}`, `{"type":"tool_use","id":"t1","name":"read","input":{"path":"a.go","n":1}},{"type":"text","text":"Looking."}`, 1), false},
		{"block moved to next message", strings.Replace(strings.Replace(base, `{"type":"text","text":"Looking."},`, ``, 1), `{"type":"tool_result"`, `{"type":"text","text":"Looking."},{"type":"tool_result"`, 1), false},
		{"a thinking-only message removed", strings.Replace(base, `{"role":"user","content":[{"type":"tool_result"`, `{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"eA=="}]},{"role":"user","content":[{"type":"tool_result"`, 1), false},
		{"message added in the middle", strings.Replace(base, `{"role":"user","content":[{"type":"tool_result"`, `{"role":"user","content":"note"},{"role":"user","content":[{"type":"tool_result"`, 1), false},
	}
	want := lastEnd(t, base)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastEnd(t, tc.other); (got == want) != tc.equal {
				t.Fatalf("chain equal=%v, want %v\n%s", got == want, tc.equal, tc.other)
			}
		})
	}
}

func TestChainCompaction(t *testing.T) {
	const tail = `{"type":"compaction","content":"summary","signature":"Q09NUA=="},{"type":"text","text":"after"}]},` +
		`{"role":"user","content":"next"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"U0lH"},{"type":"text","text":"ok"}]}]}`
	a := mustParse(t, `{"messages":[{"role":"user","content":"one"},{"role":"assistant","content":[{"type":"text","text":"before"},`+tail)
	b := mustParse(t, `{"messages":[{"role":"user","content":"completely different history"},{"role":"user","content":"two"},{"role":"assistant","content":[{"type":"text","text":"other"},{"type":"thinking","thinking":"","signature":"eA=="},`+tail)
	c := mustParse(t, `{"messages":[{"role":"assistant","content":[`+tail)
	la, lb, lc := a.Messages[len(a.Messages)-1], b.Messages[len(b.Messages)-1], c.Messages[len(c.Messages)-1]
	if la.End != lb.End || la.End != lc.End {
		t.Fatalf("the chain must restart at the compaction block")
	}
	if la.Blocks[0].Chain != lb.Blocks[0].Chain {
		t.Fatalf("chain(b) after a compaction must not depend on what precedes it")
	}
	cb := a.Messages[1].Blocks[1]
	if cb.Kind != KindCompaction || cb.Digest.IsZero() {
		t.Fatalf("compaction block: %+v", cb)
	}
	if a.Messages[1].Blocks[2].Chain != step(ChainStart(), kindBlock, cb.Digest) {
		t.Fatalf("the block after a compaction must see start stepped by the compaction block")
	}
	if cb.Chain != step(step(a.Messages[0].End, kindMessage, a.Messages[1].Frame), kindBlock, a.Messages[1].Blocks[0].Digest) {
		t.Fatalf("a compaction block's chain(b) is the value before the reset")
	}
	// The most recent compaction wins; a change after it still counts.
	d := mustParse(t, `{"messages":[{"role":"assistant","content":[{"type":"compaction","content":"old"},`+tail)
	if d.Messages[len(d.Messages)-1].End != la.End {
		t.Fatalf("an earlier compaction block must not matter")
	}
	e := mustParse(t, `{"messages":[{"role":"assistant","content":[`+strings.Replace(tail, `"after"`, `"after!"`, 1))
	if e.Messages[len(e.Messages)-1].End == la.End {
		t.Fatalf("a change after the compaction must change the chain")
	}
}

func TestSentChain(t *testing.T) {
	body := genRequest(3, 40)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	all := r.SentChain(nil)
	for i, e := range ends(r) {
		if all[i] != e {
			t.Fatalf("SentChain(nil)[%d] != End", i)
		}
	}
	if got := r.SentChain(func(int) bool { return false }); got[len(got)-1] != all[len(all)-1] {
		t.Fatal("SentChain(keep all) differs")
	}
	// Strip every thinking block: messages stay (each has other blocks), so
	// the chain is unchanged. Then drop some messages: the sent chain must
	// equal the chain of the rewritten request parsed afresh.
	isThinking := func(i, j int) bool { k := r.Messages[i].Blocks[j].Kind; return k == KindThinking || k == KindRedacted }
	stripped, err := ParseRequest(Rewrite(body, r, isThinking, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := ends(stripped); got[len(got)-1] != all[len(all)-1] {
		t.Fatal("stripping thinking changed the chain")
	}
	drop := func(i int) bool { return i%5 == 2 || i == 0 }
	sent := r.SentChain(drop)
	re, err := ParseRequest(Rewrite(body, r, isThinking, drop))
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for i := range r.Messages {
		if drop(i) {
			continue
		}
		if sent[i] != re.Messages[k].End {
			t.Fatalf("SentChain[%d] != End of sent message %d", i, k)
		}
		// chain(b) as sent, via StepFrom, matches the reparse.
		prev := ChainStart()
		if i > 0 {
			prev = sent[i-1]
		}
		var got []Digest
		r.Messages[i].StepFrom(prev, func(j int, ch Digest) {
			if !isThinking(i, j) {
				got = append(got, ch)
			}
		})
		for j, b := range re.Messages[k].Blocks {
			if b.Chain != got[j] {
				t.Fatalf("message %d block %d: StepFrom chain differs from reparse", i, j)
			}
		}
		k++
	}
	if sent[0] != ChainStart() {
		t.Fatal("a dropped first message leaves the start value")
	}
}

func TestParseMatchesGenerated(t *testing.T) {
	body := genRequest(11, 120)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Model    string
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	if r.Model != top.Model || len(r.Messages) != len(top.Messages) {
		t.Fatalf("model %q/%q, %d/%d messages", r.Model, top.Model, len(r.Messages), len(top.Messages))
	}
	for i, m := range top.Messages {
		if r.Messages[i].Role != m.Role {
			t.Fatalf("message %d role %q, want %q", i, r.Messages[i].Role, m.Role)
		}
		var blocks []json.RawMessage
		if m.Content[0] == '[' {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				t.Fatal(err)
			}
		}
		if len(blocks) != len(r.Messages[i].Blocks) {
			t.Fatalf("message %d: %d blocks, want %d", i, len(r.Messages[i].Blocks), len(blocks))
		}
		for j, b := range r.Messages[i].Blocks {
			if string(body[b.Span.Start:b.Span.End]) != string(blocks[j]) {
				t.Fatalf("message %d block %d span mismatch", i, j)
			}
		}
	}
	// A Parser reused across calls gives the same result.
	var p Parser
	for range 3 {
		r2, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Seed != r.Seed || ends(r2)[len(r2.Messages)-1] != ends(r)[len(r.Messages)-1] {
			t.Fatal("reused Parser differs")
		}
	}
}

func TestParseRequestDepth(t *testing.T) {
	// The limit counts every container from the top-level object, as
	// encoding/json does: top object, messages, message, content, block,
	// input = 6 levels before the nested arrays.
	for _, extra := range []int{maxDepth - 6, maxDepth - 5} {
		body := `{"messages":[{"role":"user","content":[{"type":"tool_use","input":{"x":` +
			strings.Repeat("[", extra) + strings.Repeat("]", extra) + `}}]}]}`
		_, err := ParseRequest([]byte(body))
		if valid := json.Valid([]byte(body)); (err == nil) != valid {
			t.Fatalf("nesting %d: ParseRequest err=%v, json.Valid=%v", extra+6, err, valid)
		}
		if extra == maxDepth-6 && err != nil {
			t.Fatalf("depth exactly %d refused: %v", maxDepth, err)
		}
	}
}

// TestParseManualAndToolResults: what choose.go's exception reads, from a
// Messages body and from a Converse one: thinking.type "enabled" (however
// spelled) and tool_result blocks.
func TestParseManualAndToolResults(t *testing.T) {
	for _, tc := range []struct {
		body   string
		manual bool
		result []bool // the last message's blocks
	}{
		{`{"model":"m","thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"x"}]}]}`, true, []bool{true, false}},
		{`{"model":"m","thinking":{"budget_tokens":1024,"type":"en\u0061bled"},"messages":[{"role":"user","content":"x"}]}`, true, nil},
		{`{"model":"m","thinking":{"type":"adaptive"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`, false, []bool{true}},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"tool_result"}]}]}`, false, []bool{false}},
		{`{"modelId":"anthropic.claude-opus-5-5-v1:0","additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"text":"r"}]}},{"cachePoint":{"type":"default"}}]}]}`, true, []bool{true, false}},
		{`{"modelId":"anthropic.claude-opus-5-5-v1:0","messages":[{"role":"user","content":[{"text":"toolResult"}]}]}`, false, []bool{false}},
	} {
		r, err := ParseRequest([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		var got []bool
		if n := len(r.Messages); n > 0 {
			for _, b := range r.Messages[n-1].Blocks {
				got = append(got, b.Result)
			}
		}
		if r.Manual != tc.manual || !slices.Equal(got, tc.result) {
			t.Errorf("%s: Manual %v results %v, want %v %v", tc.body, r.Manual, got, tc.manual, tc.result)
		}
	}
}
