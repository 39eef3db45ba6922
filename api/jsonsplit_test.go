package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSplitObject(t *testing.T) {
	body := `  {"a" : "x\"y\\", "request":{"k":["}",{"q":"\\\"]"}],"n":1.5e3} ,"b":[1,{"c":"]"}], "t":true,"z":null,"e\u0031":2}  `
	got := map[string]string{}
	err := splitObject([]byte(body), func(k string, v []byte) error { got[k] = string(v); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `"x\"y\\"`, "request": `{"k":["}",{"q":"\\\"]"}],"n":1.5e3}`, "b": `[1,{"c":"]"}]`, "t": "true", "z": "null", "e1": "2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, v := range got {
		if !json.Valid([]byte(v)) {
			t.Errorf("value %q is not valid JSON", v)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":1`, `{"a" 1}`, `{"a":1,}`, `{"a":"x}`, `{"a":1}x`, `{"a":1,"a":2}`, `{a:1}`, `{"a":}`, `{"a":[1,2}`, `{"a":"\"}`} {
		if err := splitObject([]byte(bad), func(string, []byte) error { return nil }); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if err := splitObject([]byte(` { } `), func(string, []byte) error { t.Fatal("a key in {}"); return nil }); err != nil {
		t.Fatal(err)
	}
	// a long string with many escaped quotes and backslashes
	long := `{"s":"` + strings.Repeat(`ab\"\\`, 10000) + `"}`
	if err := splitObject([]byte(long), func(k string, v []byte) error {
		if len(v) != len(long)-len(`{"s":}`) {
			t.Errorf("long string: %d bytes", len(v))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeCompile(t *testing.T) {
	c, err := decodeCompile([]byte(`{"conversation":"c","branch":"b","dryRun":true,"return":"plan","bindsThinking":false,"parent":{"conversation":"p"},"future":{"x":1},"request":{"messages":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Conversation != "c" || c.Branch != "b" || !c.DryRun || c.Return != ReturnPlan || c.BindsThinking == nil || *c.BindsThinking || c.Parent.Conversation != "p" || string(c.Request) != `{"messages":[]}` {
		t.Fatalf("%+v", c)
	}
	for _, bad := range []string{`{"request":{}}`, `{"conversation":"c"}`, `{"conversation":1,"request":{}}`, `{"conversation":"c","return":"x","request":{}}`, `{"conversation":"c","future":[,],"request":{}}`} {
		if _, err := decodeCompile([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// BenchmarkDecodeCompile splits a ~1 MB compile body (the request kept as
// raw bytes); json.Valid over the same body is the baseline of a pass that
// reads every byte.
func BenchmarkDecodeCompile(b *testing.B) {
	var msgs []map[string]any
	for i := range 250 {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{
			{"type": "thinking", "thinking": strings.Repeat("a \"quoted\" step\n", 220) + string(rune('a'+i%26)), "signature": strings.Repeat("Eq+/", 60)},
			{"type": "text", "text": "done"},
		}})
	}
	req, _ := json.Marshal(map[string]any{"model": "claude", "messages": msgs})
	body, _ := json.Marshal(map[string]any{"conversation": "c", "branch": "b", "future": map[string]any{"x": []int{1, 2}}, "request": json.RawMessage(req)})
	b.Run("decodeCompile", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := decodeCompile(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}
