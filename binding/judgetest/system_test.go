package judgetest

import (
	"strings"
	"testing"
)

// pi 1.6 sends per-turn {role: "system", output_config: {effort}} messages
// for models with mid-conversation effort: one before each assistant reply
// (the effort it was made with) and one at the end (the effort asked now).
// Research 1.1: every entry of messages before a block is its prefix,
// "whatever its role", mid-conversation system messages included; 1.3:
// appending one is an append, rewording or deleting one an edit. The
// top-level output_config stays outside the prefix. A system message is no
// assistant message: the latest-assistant-message rule looks past it.

func effortMsg(e string) map[string]any {
	return map[string]any{"role": "system", "content": []any{}, "output_config": map[string]any{"effort": e}}
}

// piEffortTurns builds [u1, sys high, a1, u2, sys low, a2, u3, sys max] the
// way pi 1.6 does: each request ends with the active effort's message,
// which stays in place before the reply it produced.
func piEffortTurns(c *conv) {
	c.user("q1")
	c.msgs = append(c.msgs, effortMsg("high"))
	c.top["output_config"] = map[string]any{"effort": "high"}
	c.turn(think("a"), say("1"))
	c.user("q2")
	c.msgs = append(c.msgs, effortMsg("low"))
	c.top["output_config"] = map[string]any{"effort": "low"}
	c.turn(think("b"), say("2"))
	c.user("q3")
	c.msgs = append(c.msgs, effortMsg("max"))
	c.top["output_config"] = map[string]any{"effort": "max"}
}

func TestPi16EffortSystemMessages(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(c *conv)
		failing []Path
	}{
		{"appended each turn", func(c *conv) {}, nil},
		{"top-level effort changed", func(c *conv) { c.top["output_config"] = map[string]any{"effort": "low"} }, nil},
		{"an earlier effort message reworded", func(c *conv) { c.msgs[1] = effortMsg("medium") }, []Path{p(2, 0), p(5, 0)}},
		{"the effort message before the second reply deleted", func(c *conv) {
			c.msgs = append(c.msgs[:4:4], c.msgs[5:]...)
		}, []Path{p(4, 0)}},
		{"an effort message inserted before the first reply", func(c *conv) {
			c.msgs = append(c.msgs[:1:1], append([]any{effortMsg("high")}, c.msgs[1:]...)...)
		}, []Path{p(3, 0), p(6, 0)}},
		{"the trailing effort message dropped", func(c *conv) { c.msgs = c.msgs[:len(c.msgs)-1] }, nil},
	}
	for _, tc := range cases {
		for _, m := range allModes {
			t.Run(tc.name+"/"+string(m), func(t *testing.T) {
				c := newConv(t, m, Documented())
				if m != NB { // NB stays on newConv's claude-sonnet-5
					c.top["model"] = "claude-opus-5-5"
				}
				piEffortTurns(c)
				tc.edit(c)
				expectFailing(t, m, c, c.send(), tc.failing, "")
			})
		}
	}
}

// A trailing effort message after an open tool round leaves the assistant
// message before it the latest one: a partial drop of its run is the
// latest-message 400, its whole removal an end removal.
func TestPi16LatestAssistantBeforeSystem(t *testing.T) {
	for _, m := range allModes {
		t.Run(string(m), func(t *testing.T) {
			c := newConv(t, m, Documented())
			if m != NB {
				c.top["model"] = "claude-opus-5-5"
			}
			c.user("q1")
			c.msgs = append(c.msgs, effortMsg("high"))
			c.turn(think("b1"), think("b2"), call("t1", "bash"))
			c.toolResult("t1", "ok")
			c.msgs = append(c.msgs, effortMsg("high"))
			if res := c.send(); res.Status != 200 || len(res.Transformations) != 0 {
				t.Fatalf("whole run: %d %s %v", res.Status, res.Error, res.Transformations)
			}
			d := newConvCopy(c)
			d.removeBlock(2, 1)
			if res := d.send(); res.Status != 400 || !strings.Contains(res.Error, "latest assistant message cannot be modified") {
				t.Fatalf("partial drop before a trailing system message: %d %q", res.Status, res.Error)
			}
			d = newConvCopy(c)
			d.removeBlock(2, 0)
			d.removeBlock(2, 0)
			if res := d.send(); res.Status != 200 || len(res.Transformations) != 0 {
				t.Fatalf("whole run removed: %d %s %v", res.Status, res.Error, res.Transformations)
			}
		})
	}
}
