package daemon

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
)

// TestRetentionTally: through compiles and accepts on several branches,
// past every retention bound (small ones here), the conversation's tally
// is always a count of its compiles, c.recorded is always the ones
// holding a record, and the counts retention decides on are
// binding.CountRetention's for a compile being added and for one being
// accepted alike.
func TestRetentionTally(t *testing.T) {
	e := newBindingEnv(t, nil)
	b := NewBinder(e.j, BinderConfig{Compiles: binding.Retention{PerBranch: 32, PerConversation: 40, AcceptedRecords: 36, Tombstones: 60}})
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	const conv = "tally"
	branches := []string{"a", "b", "c"}
	msgs := map[string][]json.RawMessage{}
	var ids []string
	check := func(step int) {
		t.Helper()
		c, err := b.lock(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		defer c.mu.Unlock()
		var want retentionTally
		for _, e := range c.compiles {
			want.add(e, 1)
		}
		if want.all != c.tally.all || len(want.branches) != len(c.tally.branches) {
			t.Fatalf("step %d: tally %+v, count %+v", step, c.tally, want)
		}
		for br, w := range want.branches {
			if g := c.tally.branches[br]; g == nil || *g != *w {
				t.Fatalf("step %d: branch %q tally %+v, count %+v", step, br, g, w)
			}
		}
		// c.recorded is exactly the compiles holding a record
		records := 0
		for id, e := range c.compiles {
			if e.rec == nil {
				continue
			}
			records++
			if got, ok := c.recorded[e]; !ok || got != id {
				t.Fatalf("step %d: compile %s holds a record, recorded as %q (%v)", step, id, got, ok)
			}
		}
		if len(c.recorded) != records {
			t.Fatalf("step %d: %d compiles recorded, %d hold a record", step, len(c.recorded), records)
		}
		all := func(yield func(binding.RememberedCompile) bool) {
			for id, e := range c.compiles {
				if !yield(e.remembered(id)) {
					return
				}
			}
		}
		for _, br := range branches {
			owner := ""
			if row := c.branches[br]; row != nil {
				owner = row.Owner
			}
			next := compileEntry{seq: 1 << 40, branch: br, rec: &binding.CompileRecord{}}
			if g, w := c.retentionCounts("new", next, owner), binding.CountRetention(all, next.remembered("new"), owner); g != w {
				t.Fatalf("step %d: a compile on %q: counts %+v, want %+v", step, br, g, w)
			}
		}
		for id, e := range c.compiles {
			if e.accepted || e.rec == nil {
				continue
			}
			next := compileEntry{seq: e.seq, branch: e.branch, accepted: true, rec: e.rec}
			for _, owner := range []string{id, "", c.branches[e.branch].Owner} {
				if g, w := c.retentionCounts(id, next, owner), binding.CountRetention(all, next.remembered(id), owner); g != w {
					t.Fatalf("step %d: accepting %s (owner %q): counts %+v, want %+v", step, id, owner, g, w)
				}
			}
		}
	}
	for step := range 400 {
		br := branches[rng.IntN(len(branches))]
		switch r := rng.IntN(10); {
		case r < 6 || len(ids) == 0:
			m := msgs[br]
			if len(m) == 0 {
				m = append(m, json.RawMessage(fmt.Sprintf(`{"role":"user","content":"start %s"}`, br)))
			}
			ans, err := b.Compile(ctx, &api.CompileCall{Conversation: conv, Branch: br, Return: api.ReturnPlan, Request: bodyWith(m)})
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			ids = append(ids, ans.CompileID)
			if rng.IntN(2) == 0 {
				sig := fmt.Sprintf("sig-%d", step)
				if _, err := b.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: reply(sig)}); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				m = append(m, reply(sig), json.RawMessage(fmt.Sprintf(`{"role":"user","content":"turn %d"}`, step)))
			}
			msgs[br] = m
		default:
			// an accept of an earlier compile: pending, repeated, or forgotten
			id := ids[rng.IntN(len(ids))]
			_, err := b.Accept(ctx, &api.AcceptCall{CompileID: id, Reply: reply(fmt.Sprintf("late-%d", step))})
			if err != nil && codeOf(err) != api.CodeUnknownCompile && codeOf(err) != api.CodeCompileForgotten {
				t.Fatalf("step %d: accept of %s: %v", step, id, err)
			}
		}
		check(step)
	}
	c, err := b.lock(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	n, tombs := len(c.compiles), c.tally.all.Tombstones
	forgot := slices.ContainsFunc(ids, func(id string) bool { return c.compiles[id] == nil })
	c.mu.Unlock()
	if !forgot || tombs == 0 {
		t.Fatalf("retention forgot nothing (%d compiles, %d remembered, %d tombstones)", len(ids), n, tombs)
	}
}
