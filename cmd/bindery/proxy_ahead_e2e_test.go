package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// withoutThinking is a body's JSON with every thinking block, and every
// message left with no content by that, taken out: what a plan may change.
func withoutThinking(t *testing.T, body []byte) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("a body that is not JSON: %v\n%.300s", err, body)
	}
	var msgs []any
	for _, m := range v["messages"].([]any) {
		mm := m.(map[string]any)
		blocks, ok := mm["content"].([]any)
		if !ok {
			msgs = append(msgs, m)
			continue
		}
		var kept []any
		for _, b := range blocks {
			if typ := b.(map[string]any)["type"]; typ != "thinking" && typ != "redacted_thinking" {
				kept = append(kept, b)
			}
		}
		if len(kept) > 0 {
			mm["content"] = kept
			msgs = append(msgs, mm)
		}
	}
	v["messages"] = msgs
	return v
}

// TestProxySendsAheadOfTheCompile: a history over 128 KB goes upstream
// while the daemon compiles it (speculate.go), and the upstream still
// receives, for every request, exactly one complete body: the compiled
// one. A pruner's edit midway makes one prediction wrong (the plan strips
// what the last one kept): that request is abandoned short of its length,
// which the upstream reads as no request, and sent again whole; the turns
// after it, whose plans cut the same blocks again, go ahead and complete.
func TestProxySendsAheadOfTheCompile(t *testing.T) {
	pe := newProxyE2E(t, "--metrics", "127.0.0.1:0")
	pe.up.SetReply(toolLoop(2))
	pe.up.SetStream(true, 0)
	h := newAPIHost(t, pe.addr, "claude-opus-5-5")
	pad := strings.Repeat("the spec, pasted whole. ", 6000) // 144 KB
	h.cycle("read this and fix the parser: " + pad)
	h.cycle("now the tests")
	h.clearOldestToolResult()
	h.cycle("and the docs")
	h.cycle("ship it")

	got := pe.up.Messages()
	if len(got) != len(h.sent) {
		t.Fatalf("upstream answered %d requests for the host's %d", len(got), len(h.sent))
	}
	stripped := 0
	for i, r := range got {
		if r.Status != 200 {
			t.Errorf("request %d: upstream answered %d: %s", i, r.Status, r.Refused)
		}
		valid, total := pe.valid(h.sent[i])
		if read := len(r.Result.Read()); read != valid {
			t.Errorf("request %d: the provider read %d blocks; %d of the host's %d were valid", i, read, valid, total)
		}
		if string(r.Body) != string(h.sent[i]) {
			stripped++
			if !reflect.DeepEqual(withoutThinking(t, r.Body), withoutThinking(t, h.sent[i])) {
				t.Errorf("request %d: the upstream's body differs from the host's in more than thinking blocks", i)
			}
		}
	}
	for i, s := range h.answers {
		if s != 200 {
			t.Errorf("the host got %d on request %d", s, i)
		}
	}
	m, text := pe.scrape()
	completed := m[`bindery_proxy_sent_ahead_total{outcome="completed"}`]
	abandoned := m[`bindery_proxy_sent_ahead_total{outcome="abandoned"}`]
	// Every request but the first (no history yet) is over 128 KB and
	// shares it with the last one.
	if int(completed+abandoned) != len(h.sent)-1 {
		t.Errorf("%v sent ahead and completed, %v abandoned, of %d follow-up requests\n%s", completed, abandoned, len(h.sent)-1, text)
	}
	if abandoned != 1 {
		t.Errorf("%v requests abandoned; want 1, the one after the edit (its plan strips what the last kept)", abandoned)
	}
	if n := pe.up.Incomplete(); n != int(abandoned) {
		t.Errorf("the upstream saw %d bodies cut short; the proxy abandoned %v", n, abandoned)
	}
	if stripped < 3 {
		t.Errorf("%d requests stripped: the edit should strip the turns after it", stripped)
	}
	// Every follow-up compiled by reference, the daemon finding the
	// digest of the messages shared (the host's prompts are strings, which
	// the daemon is shown as text blocks) equal to the bytes it holds.
	if by, refused := m[`bindery_proxy_compiles_total{by="reference"}`], m[`bindery_proxy_compiles_total{by="refused"}`]; int(by) != len(h.sent)-1 || refused != 0 {
		t.Errorf("%v of %d follow-ups compiled by reference, %v refused\n%s", by, len(h.sent)-1, refused, text)
	}
	pe.checkNoCredential()
}
