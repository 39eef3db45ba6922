package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestIdentify pins the conversation rule (conversation.go) for each
// client's hints.
func TestIdentify(t *testing.T) {
	msgs := `{"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}],"metadata":{"user_id":"{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s-meta\"}"}}`
	body := []byte(msgs)
	_, els, err := messageSpans(body)
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	key := historyKey(body[els[0].start:els[0].end])
	var keys historyKeys
	for _, c := range []struct {
		name      string
		h         http.Header
		body      []byte
		conv, br  string
		clientGot string
	}{
		{"claude code", hdr("User-Agent", "claude-cli/2.1.332 (external, sdk-cli)", "X-Claude-Code-Session-Id", "4f0c"), body, "claude-code:4f0c", "main/" + key, "claude-code"},
		{"claude code subagent", hdr("X-Claude-Code-Session-Id", "4f0c", "X-Claude-Code-Agent-Id", "agent-7"), body, "claude-code:4f0c", "agent-7/" + key, "claude-code"},
		{"opencode", hdr("User-Agent", "opencode/1.18.33 ai-sdk/provider-utils/4.0.46", "X-Session-Id", "ses_1"), body, "opencode:ses_1", "main/" + key, "opencode"},
		{"metadata only", hdr("User-Agent", "claude-cli/2.1.332"), body, "claude-code:s-meta", "main/" + key, "claude-code"},
		{"sdk without hints", hdr("User-Agent", "Anthropic/JS 1.17.0"), []byte(`{"messages":[{"role":"user","content":"hello"}]}`), "anthropic-sdk", "main/" + key, "anthropic-sdk"},
		{"a hint with a space is not used", hdr("User-Agent", "x/1", "X-Session-Id", "a b"), []byte(`{"messages":[{"role":"user","content":"hello"}]}`), "x", "main/" + key, "x"},
		{"a hint too long is not used", hdr("X-Session-Id", strings.Repeat("a", maxHint+1)), []byte(`{"messages":[{"role":"user","content":"hello"}]}`), "client", "main/" + key, "client"},
	} {
		rb, err := readRequestBody(c.body)
		if err != nil {
			t.Fatal(err)
		}
		for _, keys := range []*historyKeys{nil, &keys, &keys} { // not remembered, then asked, then remembered
			id := identify(c.h, c.body, rb, keys)
			if id.conversation != c.conv || id.branch != c.br || id.client != c.clientGot {
				t.Errorf("%s: %+v, want %s %s %s", c.name, id, c.conv, c.br, c.clientGot)
			}
		}
	}
}

// TestHistoryKey: a history's first message keeps its key when the client
// moves its cache breakpoint or flips string and text-block forms, and
// another first message has another key.
func TestHistoryKey(t *testing.T) {
	k := historyKey([]byte(`{"role":"user","content":"fix the bug"}`))
	for _, same := range []string{
		`{"role":"user","content":[{"type":"text","text":"fix the bug"}]}`,
		`{"content":[{"type":"text","text":"fix the bug","cache_control":{"type":"ephemeral"}}],"role":"user"}`,
		`{"role":"user","content":"fix the \u0062ug"}`,
	} {
		if got := historyKey([]byte(same)); got != k {
			t.Errorf("%s: key %s, want %s", same, got, k)
		}
	}
	for _, other := range []string{
		`{"role":"user","content":"fix the bug "}`,
		`{"role":"user","content":[{"type":"text","text":"fix the bug"},{"type":"text","text":"now"}]}`,
	} {
		if historyKey([]byte(other)) == k {
			t.Errorf("%s has the key of another first message", other)
		}
	}
}

// TestHistoryKeysRemembered: a remembered key is the message's own, for
// each message; what is remembered stays within its bound, and a message
// over maxKeyed is not kept.
func TestHistoryKeysRemembered(t *testing.T) {
	var keys historyKeys
	msg := func(i int, size int) []byte {
		return []byte(fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, strings.Repeat("x", size)))
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < 3; i++ {
			m := msg(i, 10)
			if got, want := keys.of(m), historyKey(m); got != want {
				t.Fatalf("round %d, message %d: key %s, want %s", round, i, got, want)
			}
		}
	}
	if len(keys.keys) != 3 {
		t.Errorf("%d keys remembered, want 3", len(keys.keys))
	}
	big := msg(9, maxKeyed)
	if keys.of(big) != historyKey(big) || len(keys.keys) != 3 {
		t.Errorf("a first message over maxKeyed: %d keys remembered", len(keys.keys))
	}
	for i := 0; i < 2*keyedBytes/(maxKeyed/2); i++ {
		m := msg(100+i, maxKeyed/2)
		if keys.of(m) != historyKey(m) {
			t.Fatalf("message %d: another key", i)
		}
		if keys.bytes > keyedBytes {
			t.Fatalf("%d bytes remembered, over the bound of %d", keys.bytes, keyedBytes)
		}
	}
}
