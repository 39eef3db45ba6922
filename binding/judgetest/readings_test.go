package judgetest

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadingsEnumeratesEveryCombination(t *testing.T) {
	rs := Readings()
	if len(rs) != 128 {
		t.Fatalf("%d readings, want 128", len(rs))
	}
	if rs[0] != Documented() {
		t.Fatalf("first reading %v, want Documented()", rs[0])
	}
	seen := map[Reading]bool{}
	for _, r := range rs {
		if seen[r] {
			t.Fatalf("duplicate reading %v", r)
		}
		seen[r] = true
	}
}

func TestMythos51Conflict(t *testing.T) {
	for _, binds := range []bool{false, true} {
		r := Documented()
		r.Mythos51Binds = binds
		c := newConv(t, REC, r) // an old account: only the November reading enforces
		c.beta = false
		c.top["model"] = "claude-mythos-5-1"
		fourTurns(c)
		c.msgs[0].(map[string]any)["content"] = "edited"
		res := c.send()
		if binds && (res.Status != 400 || res.Mode != ModeEnforced) {
			t.Fatalf("november reading: %d %v, want a 400 on every account", res.Status, res.Mode)
		}
		if !binds && (res.Status != 200 || res.Mode != ModeNoCheck || len(res.Read()) != 4) {
			t.Fatalf("september reading: %d %v, want no check", res.Status, res.Mode)
		}
		// Mythos 5.1 blocks carry a conversation record either way.
		c.top["model"] = "claude-fable-5-1"
		c.j = New(Options{Reading: r, NewAccount: true})
		if res := c.send(); res.Status != 400 || strings.Contains(res.Error, "no record") {
			t.Fatalf("mythos 5.1 block on fable 5.1 after an edit: %d %q", res.Status, res.Error)
		}
	}
}

// A gap in the middle of a drop_block request, under each scope and each
// reading of whether a dropped block counts as read.
func TestDropScopeAndDroppedRead(t *testing.T) {
	cases := []struct {
		scope      DropScope
		droppedRd  bool
		wantDrop   []Path
		wantPredOf string // which block the reply's thinking names as its predecessor
	}{
		{DropRestOfTurn, false, []Path{p(5, 0), p(7, 0)}, "a"},
		{DropAllLater, false, []Path{p(5, 0), p(7, 0)}, "a"},
		// The dropped block counts as read: d follows c, so d passes.
		{DropRestOfTurn, true, []Path{p(5, 0)}, "d"},
		{DropAllLater, true, []Path{p(5, 0), p(7, 0)}, "d"},
	}
	for _, tc := range cases {
		r := Documented()
		r.Scope, r.DroppedCountsAsRead = tc.scope, tc.droppedRd
		c := newConv(t, DROP, r)
		fourTurns(c)
		keys := map[string][32]byte{}
		for i, n := range []string{"a", "b", "c", "d"} {
			keys[n] = KeyOf(c.block(blocksOfFourTurns[i].Message, 0)["signature"].(string))
		}
		c.removeBlock(3, 0)
		res := c.turn(think("e"), say("5"))
		var dropped []Path
		for _, v := range res.Blocks {
			if v.Fate == FateDroppedPrefix {
				dropped = append(dropped, v.Path)
			}
		}
		if !reflect.DeepEqual(dropped, tc.wantDrop) {
			t.Fatalf("%v: dropped %v, want %v", r, dropped, tc.wantDrop)
		}
		facts, err := c.j.Facts(c.body())
		if err != nil {
			t.Fatal(err)
		}
		e := facts[len(facts)-1]
		if !e.HasPred || e.Pred != keys[tc.wantPredOf] {
			t.Fatalf("%v: the reply's block does not name %s as predecessor", r, tc.wantPredOf)
		}
	}
}

// Rest-of-turn: a failing block takes the rest of its message's consecutive
// run with it, and a later turn is judged on its own.
func TestRestOfTurnTakesConsecutiveRun(t *testing.T) {
	r := Documented()
	c := newConv(t, DROP, r)
	c.user("q1")
	c.turn(think("a"), say("1"))
	c.user("q2")
	c.turn(think("b1"), think("b2"), redacted(), say("2"))
	c.user("q3")
	c.turn(think("c"), say("3"))
	c.user("q4")
	c.removeBlock(1, 0) // b1 now first: fine. Make b1 fail instead: edit q2? That fails all. Use reordering:
	content := c.msgs[3].(map[string]any)["content"].([]any)
	content[0], content[1] = content[1], content[0] // b2 first (passes: nothing read before), b1 fails
	res := c.send()
	fates := []Fate{}
	for _, v := range res.Blocks {
		fates = append(fates, v.Fate)
	}
	want := []Fate{FateRead, FateDroppedPrefix, FateDroppedPrefix, FateDroppedPrefix}
	if !reflect.DeepEqual(fates, want) {
		t.Fatalf("fates %v, want %v", fates, want)
	}
	if res.Blocks[2].Cause != CauseScope {
		t.Fatalf("the redacted block after b1 was dropped for %v, want scope", res.Blocks[2].Cause)
	}
	// c (messages.5) names the redacted block as predecessor: judged alone, it
	// fails because that block was not read.
	if res.Blocks[3].Cause != CausePredecessor {
		t.Fatalf("c: cause %v, want predecessor", res.Blocks[3].Cause)
	}
}

func TestBlockBindingNeedsBeta(t *testing.T) {
	c := newConv(t, DROP, Documented())
	c.user("q")
	c.beta = false
	res := c.send()
	if res.Status != 400 || res.Error != "thinking.block_binding: Extra inputs are not permitted" {
		t.Fatalf("%d %q", res.Status, res.Error)
	}
}

func TestRecordOnlyWithoutBetaReportsNothing(t *testing.T) {
	c := newConv(t, REC, Documented())
	fourTurns(c)
	c.beta = false
	c.msgs[0].(map[string]any)["content"] = "edited"
	res := c.send()
	if res.Status != 200 || res.Transformations != nil || len(res.Read()) != 4 || res.Blocks[0].Fate != FateAllowed {
		t.Fatalf("%d %v %v", res.Status, res.Transformations, res.Blocks)
	}
}

func TestUnboundBlockOnBindingModel(t *testing.T) {
	c := newConv(t, ENF, Documented())
	c.top["model"] = "claude-opus-5"
	c.user("q")
	c.turn(think("a"), say("1"))
	c.user("q2")
	c.top["model"] = "claude-fable-5-1" // reads Opus 5 blocks, but they carry no conversation record
	res := c.send()
	if res.Status != 400 || !strings.HasSuffix(res.Error, "This block carries no record of a conversation.") {
		t.Fatalf("%d %q", res.Status, res.Error)
	}
}

func TestMalformedBodies(t *testing.T) {
	j := New(Options{Reading: Documented(), NewAccount: true})
	good := `{"model":"claude-fable-5-1","messages":[{"role":"user","content":"hi"}]}`
	if res := j.Judge(Call{Body: []byte(good)}); res.Status != 200 {
		t.Fatalf("good body: %d %s", res.Status, res.Error)
	}
	for _, b := range []string{
		``, `[]`, `{`, good[:len(good)-1], good + `x`, good + `{}`,
		`{"model":"claude-fable-5-1","messages":{}}`,
		`{"model":"claude-fable-5-1","messages":[{"role":"user","content":"hi"},]}`,
		`{"model":"claude-fable-5-1","messages":[{"role":"user","content":"hi}]}`,
		`{"model":"claude-fable-5-1","messages":[{"role":"user","content":[tru]}]}`,
		`{"model":"claude-fable-5-1","system":[1,],"messages":[]}`,
		`{"model":"claude-fable-5-1"}`,
		`{"model":"claude-fable-5-1","messages":[1]}`,
	} {
		res := j.Judge(Call{Body: []byte(b)})
		if res.Status != 400 || res.Error == "" {
			t.Errorf("%q: status %d %q, want a 400 with a message", b, res.Status, res.Error)
		}
	}
	if res := j.Judge(Call{Body: []byte(`{"model":"gpt-9","messages":[]}`)}); res.Status != 404 {
		t.Errorf("unknown model: %d", res.Status)
	}
}

// Scenarios 26 and 27: the beta header alone, no block_binding, edited history.
func TestScenario26And27BetaHeaderAlone(t *testing.T) {
	for _, newAccount := range []bool{false, true} {
		for _, beta := range []bool{false, true} {
			m := REC
			if newAccount {
				m = ENF
			}
			c := newConv(t, m, Documented())
			fourTurns(c)
			c.beta = beta
			c.msgs[0].(map[string]any)["content"] = "edited"
			res := c.send()
			switch {
			case !newAccount && beta: // 26, old account: 200 + thinking_mismatch_allowed
				if res.Status != 200 || len(res.Transformations) != 4 || res.Transformations[0].Type != "thinking_mismatch_allowed" {
					t.Errorf("old account, beta: %d %v", res.Status, res.Transformations)
				}
			case !newAccount && !beta: // old account, nothing sent: passes, nothing reported
				if res.Status != 200 || res.Transformations != nil {
					t.Errorf("old account, no beta: %d %v", res.Status, res.Transformations)
				}
			case newAccount && beta: // 26, new account: 400 without the header sentence
				if res.Status != 400 || strings.Contains(res.Error, "anthropic-beta") {
					t.Errorf("new account, beta: %d %q", res.Status, res.Error)
				}
			case newAccount && !beta: // 27: 400 with the header sentence
				if res.Status != 400 || !strings.Contains(res.Error, "That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header.") {
					t.Errorf("new account, no beta: %d %q", res.Status, res.Error)
				}
			}
		}
	}
}
