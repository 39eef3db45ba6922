package judgetest

import "testing"

// A scalar as an object's last member ("stream":true}, as Claude Code ends
// every body) or an array's last element is a value, not a stray bracket.
func TestSplitScalarLast(t *testing.T) {
	top, err := splitObject([]byte(`{"model":"claude-opus-5-5","messages":[1,true],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(top["stream"]) != "true" {
		t.Errorf("stream = %q, want true", top["stream"])
	}
	els, err := splitArray(top["messages"])
	if err != nil || len(els) != 2 || string(els[1]) != "true" {
		t.Errorf("messages = %q, %v; want [1 true]", els, err)
	}
	if _, err := splitObject([]byte(`{"a":}`)); err == nil {
		t.Error(`{"a":} split without an error`)
	}
}

// Options.StringIsTextBlock: a message whose content flips between a
// string and one text block (Claude Code's moving cache breakpoint) keeps
// the later blocks valid under it, and fails them without it.
func TestStringIsTextBlock(t *testing.T) {
	for _, same := range []bool{true, false} {
		c := newConv(t, ENF, Documented())
		c.j = New(Options{Reading: Documented(), NewAccount: true, StringIsTextBlock: same})
		c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "fix the bug", "cache_control": map[string]any{"type": "ephemeral"}}}})
		c.turn(think("look first"), say("looking"))
		c.msgs[0] = map[string]any{"role": "user", "content": "fix the bug"}
		c.user("go on")
		res := c.send()
		if same && (res.Status != 200 || len(res.Read()) != 1) {
			t.Errorf("StringIsTextBlock: status %d, read %v: %s; want the block read", res.Status, res.Read(), res.Error)
		}
		if !same && res.Status != 400 {
			t.Errorf("string and text block told apart: status %d, want 400", res.Status)
		}
	}
}

// A dated model id is its model (opencode's title call names
// claude-haiku-4-5-20251001).
func TestLookupDated(t *testing.T) {
	for _, id := range []string{"claude-haiku-4-5-20251001", "claude-haiku-4-5", "anthropic.claude-haiku-4-5-20251001-v1:0"} {
		if m, ok := lookup(id); !ok || m.name != "claude-haiku-4-5" {
			t.Errorf("lookup(%q) = %v, %v", id, m.name, ok)
		}
	}
	if _, ok := lookup("claude-haiku-4-5-2025"); ok {
		t.Error("a short numeric tail is not a date")
	}
}
