package daemon

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// TestAbsentStampsStayExact: a conversation's compiles cache the keys
// they found without a stamp (a session from before bindery holds many),
// and a stamp recorded later for one of them, by any conversation's
// write, is seen by the next compile exactly as by a daemon that never
// cached them (here: an engaged conversation strips a block without a
// stamp, and keeps it once its stamp is recorded).
func TestAbsentStampsStayExact(t *testing.T) {
	body := request("a", 4, 50)
	req, err := binding.ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	keys := binding.StampKeys(req)
	// stamp records keys[from:to] as minted under the prefix they have in
	// body (stampAll's stamps, some of them): a compile may keep them.
	stamp := func(e *bindingEnv, from, to int) {
		t.Helper()
		var rows []db.StampRow
		var pred binding.Digest
		for _, m := range req.Messages {
			for _, bl := range m.Blocks {
				if bl.Kind == binding.KindThinking {
					rows = append(rows, db.StampRow{Stamp: binding.Stamp{Key: bl.Key, Seed: req.Seed, Chain: bl.Chain, Pred: pred, Model: req.Model},
						Source: "accept", Conversation: "other", CreatedMs: 1})
					pred = bl.Key
				}
			}
		}
		if err := e.j.Write(context.Background(), func(ctx context.Context, tx *db.Tx, _ Emit) error {
			_, err := tx.InsertStamps(ctx, rows[from:to])
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// engage conversation a (as its first accept would), so its blocks'
	// stamps bind
	engage := func(e *bindingEnv) {
		t.Helper()
		if err := e.j.Write(context.Background(), func(ctx context.Context, tx *db.Tx, _ Emit) error {
			return tx.UpsertConversation(ctx, db.ConversationRow{ID: "a", EngagedCompile: "setup", EngagedMs: 1, CreatedMs: 1})
		}); err != nil {
			t.Fatal(err)
		}
	}
	compile := func(e *bindingEnv, conv string) *api.CompileAnswer {
		t.Helper()
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: conv, Request: body, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		return ans
	}
	e := newBindingEnv(t, nil)
	engage(e)
	for range 2 { // the second compile reads through the cache
		if ans := compile(e, "a"); ans.ThinkingKept != 0 || ans.ThinkingStripped != len(keys) {
			t.Fatalf("unstamped, engaged: kept %d stripped %d, want all %d stripped", ans.ThinkingKept, ans.ThinkingStripped, len(keys))
		}
	}
	if !e.b.convs["a"].absent.has(keys[0]) {
		t.Fatal("the keys found without a stamp were not cached")
	}
	for _, step := range [][2]int{{0, 1}, {1, 4}} {
		stamp(e, step[0], step[1])
		got := compile(e, "a")
		twin := newBindingEnv(t, nil) // never cached anything
		engage(twin)
		stamp(twin, 0, step[1])
		want := compile(twin, "a")
		if got.ThinkingKept != want.ThinkingKept || got.ThinkingStripped != want.ThinkingStripped || len(got.Strips) != len(want.Strips) {
			t.Fatalf("after stamping keys %v: kept %d stripped %d, a daemon without the cache: kept %d stripped %d",
				step, got.ThinkingKept, got.ThinkingStripped, want.ThinkingKept, want.ThinkingStripped)
		}
		if got.ThinkingKept < step[1] {
			t.Fatalf("after stamping keys %v: kept %d: the stamps recorded were not seen", step, got.ThinkingKept)
		}
	}
}

// TestRepeatedSignedBlock: a request that repeats a signed block (a host
// replaying one) is decided whole: binding.StampKeys lists the key twice,
// and every reader of the list (stamps, absent keys, releases) takes it as
// a set. The plan is the one of a daemon that stamped the same blocks.
func TestRepeatedSignedBlock(t *testing.T) {
	body := request("r", 3, 20)
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	msgs := v["messages"].([]any)
	// the first reply's thinking block again, in a last assistant turn
	first := msgs[1].(map[string]any)["content"].([]any)[0]
	msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{first, map[string]any{"type": "text", "text": "again"}}},
		map[string]any{"role": "user", "content": "and?"})
	v["messages"] = msgs
	repeated, _ := json.Marshal(v)
	req, err := binding.ParseRequest(repeated)
	if err != nil {
		t.Fatal(err)
	}
	keys := binding.StampKeys(req)
	if len(keys) != 4 || keys[3] != keys[0] {
		t.Fatalf("StampKeys: %d keys, the repeat last: %v", len(keys), len(keys) == 4 && keys[3] == keys[0])
	}
	for _, stamped := range []bool{false, true} {
		e := newBindingEnv(t, nil)
		if stamped {
			stampAll(t, e, "r", repeated)
		}
		var plans []*api.CompileAnswer
		for range 2 {
			ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "r", Request: repeated, Return: api.ReturnPlan})
			if err != nil {
				t.Fatal(err)
			}
			if ans.ThinkingKept+ans.ThinkingStripped != len(keys) {
				t.Fatalf("stamped %v: kept %d + stripped %d, want %d blocks decided", stamped, ans.ThinkingKept, ans.ThinkingStripped, len(keys))
			}
			plans = append(plans, ans)
		}
		if plans[0].ThinkingKept != plans[1].ThinkingKept || len(plans[0].Strips) != len(plans[1].Strips) {
			t.Fatalf("stamped %v: the second compile decided otherwise: %+v, then %+v", stamped, plans[0].Strips, plans[1].Strips)
		}
		if stamped && plans[0].ThinkingKept < 3 {
			t.Fatalf("stamped: kept %d of the 3 distinct blocks' uses, strips %+v", plans[0].ThinkingKept, plans[0].Strips)
		}
	}
}
