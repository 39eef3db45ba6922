package watcher

import (
	"encoding/json"
	"testing"
)

// replyOf parses a session with one entry line and returns its Reply.
func replyOf(t *testing.T, line string) []byte {
	t.Helper()
	p := NewParser("/s/x.jsonl")
	if got := p.Line([]byte(`{"type":"session","version":3,"id":"s","timestamp":"2026-11-01T00:00:00Z","cwd":"/w"}`), 0); got.Header == nil {
		t.Fatalf("header: %+v", got)
	}
	got := p.Line([]byte(line), 100)
	if got.Entry == nil {
		t.Fatalf("entry: %+v", got)
	}
	return got.Entry.Reply
}

// sameJSON compares two JSON texts by value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("wire:\n got %s\nwant %s", gb, wb)
	}
}

func TestReplyWireShape(t *testing.T) {
	got := replyOf(t, `{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[`+
		`{"type":"thinking","thinking":"hm","thinkingSignature":"S1"},{"type":"thinking","thinking":"   ","thinkingSignature":"S2"},`+
		`{"type":"thinking","thinking":"[r]","thinkingSignature":"DATA","redacted":true},{"type":"thinking","thinking":"plain","thinkingSignature":""},`+
		`{"type":"text","text":" "},{"type":"text","text":"<b>"},{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"a"}},`+
		`{"type":"toolCall","id":"toolu_2","name":"ls"},{"type":"image","data":"x","mimeType":"image/png"}]}}`)
	sameJSON(t, got, `{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"S1"},{"type":"redacted_thinking","data":"DATA"},`+
		`{"type":"text","text":"plain"},{"type":"text","text":"<b>"},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}},`+
		`{"type":"tool_use","id":"toolu_2","name":"ls","input":{}},{"type":"image","data":"x","mimeType":"image/png"}]}`)
}

// TestReplyEscapes: strings are copied as written, so escapes survive as
// the same values (binding digests values); blank is decided on the value.
func TestReplyEscapes(t *testing.T) {
	got := replyOf(t, `{"type":"message","id":"a","message":{"content":[{"type":"text","text":"\u0020\n"},`+
		`{"type":"thinking","thinking":"caf\u00e9 \"q\"\n","thinkingSignature":"S\/1"}],"role":"assistant"}}`)
	sameJSON(t, got, `{"role":"assistant","content":[{"type":"thinking","thinking":"café \"q\"\n","signature":"S/1"}]}`)
}

// TestReplyOnlyWhenSigned: only an assistant entry with signed thinking
// carries a reply; a context_edit's replacement never does.
func TestReplyOnlyWhenSigned(t *testing.T) {
	for _, line := range []string{
		`{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"thinking","thinking":"x","thinkingSignature":""},{"type":"text","text":"t"}]}}`,
		`{"type":"message","id":"u","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`,
		`{"type":"context_edit","id":"e","targetId":"a","replacement":{"content":[{"type":"thinking","thinking":"x","thinkingSignature":"S"}]}}`,
	} {
		if got := replyOf(t, line); got != nil {
			t.Errorf("%s: reply %s", line, got)
		}
	}
}
