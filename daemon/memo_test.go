package daemon

import (
	"fmt"
	"testing"

	"github.com/my-pi/bindery/api"
)

// A conversation's second compile reuses what its first one canonicalized,
// decides exactly as a fresh parse would, and the memos stay bounded.
func TestBinderParseMemo(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("memo", 20, 300)
	stampAll(t, e, "memo", body)
	first, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "memo", Request: body, Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "memo", Request: body, Return: api.ReturnPlan})
	if err != nil {
		t.Fatal(err)
	}
	hits, _ := e.b.memos.slot("memo").memo.Stats()
	if hits < 40 {
		t.Fatalf("the second compile re-canonicalized its messages: %d memo hits", hits)
	}
	if len(first.Strips) != 0 || len(second.Strips) != 0 || first.Cache != second.Cache {
		t.Fatalf("memo changed the decision: %+v / %+v", first.CompilePlan, second.CompilePlan)
	}
	for i := range memoSlots + 5 {
		conv := fmt.Sprintf("memo-%d", i)
		if _, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: conv, Request: request(conv, 2, 100), Return: api.ReturnPlan}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.b.memos.slots); n > memoSlots {
		t.Fatalf("%d memos kept, bound is %d", n, memoSlots)
	}
	if _, ok := e.b.memos.slots["memo"]; ok {
		t.Fatal("the least recently used memo was not evicted")
	}
}
