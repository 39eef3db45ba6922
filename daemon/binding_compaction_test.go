package daemon

import (
	"encoding/json"
	"testing"

	"github.com/my-pi/bindery/api"
)

// An on-demand compaction through the Binder: the accept of the compaction
// request records the block (in the database), and a compile that sends it
// in place of the summarized messages keeps the kept turn's thinking, also
// after a restart; an edited block is not vouched for.
func TestBinderOnDemandCompactionKeepsKeptTurns(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("cmp", 2, 10) // [u0, a0, u1, a1, u2]
	stampAll(t, e, "cmp", body)
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	msgs := top["messages"].([]any)
	withMessages := func(m []any) []byte {
		top["messages"] = m
		b, err := json.Marshal(top)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The compaction request: [u0, a0] summarized.
	ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "cmp", Request: withMessages(msgs[:2]), Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	block := map[string]any{"type": "compaction", "content": "We discussed turn 0.", "signature": "csig"}
	replyMsg := map[string]any{"role": "assistant", "content": []any{block}}
	raw, _ := json.Marshal(replyMsg)
	if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: raw}); err != nil {
		t.Fatal(err)
	}
	swapped := append([]any{replyMsg}, msgs[2:]...) // [C, u1, a1, u2]
	for i := range 2 {
		if i == 1 {
			e.b = NewBinder(e.j, BinderConfig{}) // a restart: state from the database only
		}
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "cmp", Request: withMessages(swapped), Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Strips) != 0 {
			t.Fatalf("binder %d: strips %+v after the swap, want none", i, ans.Strips)
		}
	}
	edited := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "compaction", "content": "We discussed turn 1.", "signature": "csig"}}}
	ans, err = e.b.Compile(t.Context(), &api.CompileCall{Conversation: "cmp", Request: withMessages(append([]any{edited}, msgs[2:]...)), Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Strips) != 1 || ans.Strips[0].Path != "messages.2.content.0" || ans.Strips[0].Reason != "prefix-changed" {
		t.Fatalf("edited block: strips %+v, want messages.2.content.0 prefix-changed", ans.Strips)
	}
}
