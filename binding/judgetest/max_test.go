package judgetest

import (
	"encoding/json"
	"testing"
)

// withoutThinking is msgs with every thinking block left out (deep enough a
// copy that msgs keeps its own).
func withoutThinking(msgs []any) []any {
	out := make([]any, len(msgs))
	for i, mv := range msgs {
		m := mv.(map[string]any)
		content, ok := m["content"].([]any)
		if !ok {
			out[i] = m
			continue
		}
		var kept []any
		for _, b := range content {
			if !isThinking(b.(map[string]any)) {
				kept = append(kept, b)
			}
		}
		out[i] = map[string]any{"role": m["role"], "content": kept}
	}
	return out
}

// replyTo answers msgs (sent as they are) and returns the reply message.
func replyTo(c *conv, msgs []any, reply ...ReplyBlock) any {
	c.t.Helper()
	keep := c.msgs
	c.msgs = msgs
	res := c.j.Answer(Call{Body: c.body(), Beta: c.beta}, reply)
	c.msgs = keep
	if res.Status != 200 {
		c.t.Fatalf("reply: %d %s", res.Status, res.Error)
	}
	var m any
	if err := json.Unmarshal(res.Reply, &m); err != nil {
		c.t.Fatal(err)
	}
	return m
}

func maxOf(t *testing.T, c *conv) int {
	t.Helper()
	n, err := c.j.Max(c.body())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMax: the most blocks the provider would read, case by case (max.go's
// head comment).
func TestMax(t *testing.T) {
	// Three blocks in a chain, then a reply minted while the host sent the
	// history without thinking (it reads nothing before it): two runs.
	afterHostStrip := func(c *conv, last ReplyBlock, manual bool) {
		if manual {
			c.top["thinking"] = map[string]any{"type": "enabled", "budget_tokens": 1024}
		}
		for i := 0; i < 3; i++ {
			c.user("q")
			c.turn(think("t"), say("a"))
		}
		c.user("q")
		c.msgs = append(c.msgs, replyTo(c, withoutThinking(c.msgs), think("alone"), last))
	}
	toolResult := func(c *conv) { c.toolResult("t1", "r") }
	for _, tc := range []struct {
		name   string
		manual bool
		last   ReplyBlock
		then   func(c *conv)
		want   int
	}{
		{"the older chain is longer", false, say("a"), func(c *conv) { c.user("q") }, 3},
		{"adaptive, open tool-use cycle", false, call("t1", "bash"), toolResult, 3},
		{"manual, open tool-use cycle: the latest run", true, call("t1", "bash"), toolResult, 1},
		{"manual, the cycle closed by a user message", true, call("t1", "bash"), func(c *conv) { c.toolResult("t1", "r"); c.user("q") }, 3},
	} {
		c := newConv(t, ENF, Documented())
		afterHostStrip(c, tc.last, tc.manual)
		tc.then(c)
		if got := maxOf(t, c); got != tc.want {
			t.Errorf("%s: max %d, want %d", tc.name, got, tc.want)
		}
	}

	// Two replies minted at one point (a heartbeat beside an ordinary
	// turn), both in the history: a target without the prefix check reads
	// all three blocks, one that checks it at most two.
	for _, m := range []mode{NB, ENF} {
		c := newConv(t, m, Documented())
		c.user("q")
		c.turn(think("a"), say("a"))
		base := append([]any{}, c.msgs...)
		c.user("heartbeat")
		c.turn(think("h"), say("ok"))
		y := replyTo(c, append(base, map[string]any{"role": "user", "content": "q2"}), think("y"), say("a"))
		c.user("q2")
		c.msgs = append(c.msgs, y)
		c.user("q3")
		want := map[mode]int{NB: 3, ENF: 2}[m]
		if got := maxOf(t, c); got != want {
			t.Errorf("%s, two replies at one point: max %d, want %d", m, got, want)
		}
	}

	// The latest message's run counts whole or not at all: a block of it
	// edited (signature tampered) takes the run out.
	c := newConv(t, ENF, Documented())
	c.user("q")
	c.turn(think("a"), say("a"))
	c.user("q")
	c.turn(think("b"), think("c"), say("a"))
	if got := maxOf(t, c); got != 3 {
		t.Fatalf("plain chain: max %d, want 3", got)
	}
	c.msgs[3].(map[string]any)["content"].([]any)[1].(map[string]any)["signature"] = "tampered"
	if got := maxOf(t, c); got != 1 {
		t.Fatalf("latest run with a bad block: max %d, want 1", got)
	}
}
