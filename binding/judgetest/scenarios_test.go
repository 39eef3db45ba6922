package judgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// Each scenario below is one of research/preserved-thinking.md section 8,
// built as the text describes and checked against the outcome it lists for
// each mode (ENF, DROP, REC, NB). Paths are messages.N.content.M as sent.

func p(n, m int) Path { return Path{n, m} }

// blocksOfFourTurns are the four thinking blocks fourTurns creates.
var blocksOfFourTurns = []Path{p(1, 0), p(3, 0), p(5, 0), p(7, 0)}

func TestScenarios(t *testing.T) {
	type scenario struct {
		name     string
		edit     func(c *conv) // applied after fourTurns
		failing  []Path        // blocks that fail the check, in request order
		sentence string        // ENF: the 400's last sentence ("" to skip)
		// recFailing, when set, replaces failing in record-only mode: each
		// block is judged alone there and read anyway (research 2.3, 2.4).
		recFailing []Path
		extra      func(c *conv) // optional: replaces fourTurns+edit
		check      func(*testing.T, mode, *conv, Result)
	}
	sys := func(c *conv) []any { return c.top["system"].([]any) }
	tools := func(c *conv) []any { return c.top["tools"].([]any) }
	scenarios := []scenario{
		{name: "01 pure append", edit: func(c *conv) {}},
		{name: "02 system changed", edit: func(c *conv) {
			c.top["system"] = []any{map[string]any{"type": "text", "text": "You are a careful coding agent. Today is 2026-11-30."}}
		}, failing: blocksOfFourTurns, sentence: "The `system` prompt differs from the one this block was created with."},
		{name: "03 non-deferred tool added", edit: func(c *conv) {
			c.top["tools"] = append(tools(c), map[string]any{"name": "grep", "description": "Search.", "input_schema": map[string]any{"type": "object"}})
		}, failing: blocksOfFourTurns, sentence: "The `tools` differ from the ones this block was created with."},
		{name: "03 tool description edited", edit: func(c *conv) {
			t0 := tools(c)[0].(map[string]any)
			t0["description"] = t0["description"].(string) + " Prefer small reads."
		}, failing: blocksOfFourTurns, sentence: "The `tools` differ from the ones this block was created with."},
		{name: "04 deferred tool added", edit: func(c *conv) {
			c.top["tools"] = append(tools(c), map[string]any{"name": "grep", "description": "Search.", "input_schema": map[string]any{"type": "object"}, "defer_loading": true})
		}},
		{name: "07 earlier user text edited", edit: func(c *conv) {
			c.msgs[0].(map[string]any)["content"] = "question A Be brief."
		}, failing: blocksOfFourTurns, sentence: "Content before this block differs from when it was created."},
		{name: "08 edit between A and B", edit: func(c *conv) {
			c.msgs[2].(map[string]any)["content"] = "question B, edited"
		}, failing: blocksOfFourTurns[1:]},
		{name: "12 cache_control added, moved, removed", extra: func(c *conv) {
			// Markers present while minting, moved or removed afterwards.
			c.user("question A")
			c.msgs[0] = map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "question A", "cache_control": map[string]any{"type": "ephemeral"}}}}
			c.turn(think("a"), say("answer"))
			c.toolResultLoop()
			c.msgs[0] = map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "question A"}}}
			c.block(1, 1)["cache_control"] = map[string]any{"type": "ephemeral"}
			c.block(3, 1)["cache_control"] = map[string]any{"type": "ephemeral"}
			c.top["system"].([]any)[0].(map[string]any)["cache_control"] = map[string]any{"type": "ephemeral"}
			c.top["tools"].([]any)[1].(map[string]any)["cache_control"] = map[string]any{"type": "ephemeral", "ttl": "1h"}
			c.top["cache_control"] = map[string]any{"type": "ephemeral"}
		}},
		{name: "14 effort, max_tokens, tool_choice, metadata, display changed", edit: func(c *conv) {
			c.top["output_config"] = map[string]any{"effort": "low"}
			c.top["max_tokens"] = 333
			c.top["tool_choice"] = map[string]any{"type": "none"}
			c.top["metadata"] = map[string]any{"user_id": "u-42"}
			c.top["thinking"].(map[string]any)["display"] = "omitted"
		}},
		{name: "15 whitespace inside a string (system)", edit: func(c *conv) {
			s := sys(c)[0].(map[string]any)
			s["text"] = s["text"].(string) + " "
		}, failing: blocksOfFourTurns, sentence: "The `system` prompt differs from the one this block was created with."},
		{name: "15 whitespace inside a string (tool result)", extra: func(c *conv) {
			c.user("go")
			c.turn(think("a"), call("t1", "read"))
			c.toolResult("t1", "file contents")
			c.turn(think("b"), say("done"))
			c.user("next")
			c.msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)["content"] = "file contents\n"
		}, failing: []Path{p(3, 0)}},
		{name: "16 oldest thinking removed", edit: func(c *conv) {
			c.removeBlock(1, 0)
			c.removeBlock(3, 0)
		}},
		{name: "17 all thinking removed, open tool round", extra: func(c *conv) {
			fourTurns(c)
			c.turn(think("e"), call("t9", "bash"))
			c.toolResult("t9", "ok")
			for _, pth := range c.thinkingPaths() {
				c.removeBlock(pth.Message, pth.Block)
			}
		}},
		{name: "18 newest run removed", edit: func(c *conv) { c.removeBlock(7, 0) }},
		{name: "19 middle block removed", edit: func(c *conv) { c.removeBlock(3, 0) },
			failing: []Path{p(5, 0), p(7, 0)}, recFailing: []Path{p(5, 0)},
			sentence: "The thinking before this block differs from when it was created."},
		{name: "20 removed block re-inserted", extra: func(c *conv) {
			c.user("q1")
			c.turn(think("a"), say("1"))
			c.user("q2")
			c.turn(think("b"), say("2"))
			b := c.block(3, 0)
			c.removeBlock(3, 0) // end removal: allowed
			c.user("q3")
			c.turn(think("c"), say("3")) // minted with a as predecessor
			m := c.msgs[3].(map[string]any)
			m["content"] = append([]any{b}, m["content"].([]any)...)
			c.user("q4")
		}, failing: []Path{p(5, 0)}},
		{name: "24 empty-text block skipped in the middle", extra: func(c *conv) {
			c.user("q1")
			c.turn(think("a"), say("1"))
			c.user("q2")
			c.turn(think(""), say("2")) // omitted display
			c.user("q3")
			c.turn(think("c"), say("3"))
			c.user("q4")
			c.removeBlock(3, 0)
		}, failing: []Path{p(5, 0)}},
		{name: "24 empty-text block skipped at the end", extra: func(c *conv) {
			c.user("q1")
			c.turn(think("a"), say("1"))
			c.user("q2")
			c.turn(think(""), say("2"))
			c.user("q3")
			c.removeBlock(3, 0)
		}},
		{name: "35 simple compaction", extra: func(c *conv) {
			fourTurns(c)
			c.msgs = []any{map[string]any{"role": "user", "content": "Summary of our work so far: ... Next: continue."}}
		}},
		{name: "39 role system appended after tool_result", extra: func(c *conv) {
			c.user("go")
			c.turn(think("a"), call("t1", "read"))
			c.toolResult("t1", "contents")
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "The date is now 2026-11-30."})
			c.turn(think("b"), say("done"))
			c.user("next")
		}},
		{name: "39 system message moved into top-level system", extra: func(c *conv) {
			c.user("go")
			c.turn(think("a"), call("t1", "read"))
			c.toolResult("t1", "contents")
			c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "The date is now 2026-11-30."})
			c.turn(think("b"), say("done"))
			c.user("next")
			c.msgs = append(c.msgs[:3:3], c.msgs[4:]...)
			c.top["system"] = append(sys(c), map[string]any{"type": "text", "text": "The date is now 2026-11-30."})
		}, failing: []Path{p(1, 0), p(3, 0)}, sentence: "The `system` prompt differs from the one this block was created with."},
		{name: "41 reminder appended then removed", extra: func(c *conv) {
			c.user("q1")
			c.turn(think("a"), say("1"))
			c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "q2"},
				map[string]any{"type": "text", "text": "<reminder>stay on task</reminder>"}}})
			c.turn(think("b"), say("2"))
			c.user("q3")
			c.msgs[2].(map[string]any)["content"] = []any{map[string]any{"type": "text", "text": "q2"}}
		}, failing: []Path{p(3, 0)}},
		{name: "42 resumed with identical values", edit: func(c *conv) {
			var v any
			if err := json.Unmarshal(c.body(), &v); err != nil {
				panic(err)
			}
			m := v.(map[string]any)
			c.msgs = m["messages"].([]any)
			delete(m, "messages")
			c.top = m
		}},
		{name: "42 resumed with a re-rendered system", edit: func(c *conv) {
			sys(c)[0].(map[string]any)["text"] = "You are a careful coding agent. Today is 2026-12-01."
		}, failing: blocksOfFourTurns},
		{name: "45 non-Claude turn appended", edit: func(c *conv) {
			c.msgs = append(c.msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "from another model"}, map[string]any{"type": "tool_use", "id": "x1", "name": "bash", "input": map[string]any{}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "x1", "content": "ok"}}})
		}},
	}
	for _, sc := range scenarios {
		for _, m := range allModes {
			t.Run(sc.name+"/"+string(m), func(t *testing.T) {
				c := newConv(t, m, Documented())
				if sc.extra != nil {
					sc.extra(c)
				} else {
					fourTurns(c)
				}
				if sc.edit != nil {
					sc.edit(c)
				}
				res := c.send()
				failing := sc.failing
				if m == REC && sc.recFailing != nil {
					failing = sc.recFailing
				}
				expectFailing(t, m, c, res, failing, sc.sentence)
				if sc.check != nil {
					sc.check(t, m, c, res)
				}
			})
		}
	}
}

// toolResultLoop adds a user question and a tool round after the current reply.
func (c *conv) toolResultLoop() {
	c.user("question B")
	c.turn(think("b"), call("t1", "read"))
	c.toolResult("t1", "contents")
	c.turn(think("c"), say("done"))
	c.user("next")
}

// reencode writes v with keys in reverse order and generous whitespace.
func reencode(buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		buf.WriteString("{\n ")
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(" ,\n\t")
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteString(" :  ")
			reencode(buf, x[k])
		}
		buf.WriteString("\n}")
	case []any:
		buf.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				buf.WriteString(" , ")
			}
			reencode(buf, e)
		}
		buf.WriteString(" ]")
	case string:
		// \u escapes for every ASCII letter: the same value, other bytes.
		buf.WriteByte('"')
		for _, r := range x {
			switch {
			case r >= 'a' && r <= 'z':
				fmt.Fprintf(buf, "\\u%04x", r)
			default:
				b, _ := json.Marshal(string(r))
				buf.Write(b[1 : len(b)-1])
			}
		}
		buf.WriteByte('"')
	default:
		b, _ := json.Marshal(x)
		buf.Write(b)
	}
}

func TestScenario15Reserialized(t *testing.T) {
	for _, m := range allModes {
		c := newConv(t, m, Documented())
		fourTurns(c)
		var v any
		if err := json.Unmarshal(c.body(), &v); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		reencode(&buf, v)
		if bytes.Equal(buf.Bytes(), c.body()) {
			t.Fatal("re-encoding produced the same bytes")
		}
		res := c.j.Judge(Call{Body: buf.Bytes(), Beta: c.beta})
		expectFailing(t, m, c, res, nil, "")
	}
}

func TestScenario18PartialLatestRun(t *testing.T) {
	for _, m := range allModes {
		t.Run(string(m), func(t *testing.T) {
			c := newConv(t, m, Documented())
			c.user("q1")
			c.turn(think("a"), say("1"))
			c.user("q2")
			c.turn(think("b1"), redacted(), think("b3"), call("t1", "bash"))
			c.toolResult("t1", "ok") // an open tool round: message 3 is the latest assistant message
			whole := c.send()
			if whole.Status != 200 {
				t.Fatalf("whole latest run: %d %s", whole.Status, whole.Error)
			}
			for k := 0; k < 3; k++ {
				d := newConvCopy(c)
				d.removeBlock(3, k)
				res := d.send()
				if res.Status != 400 || !strings.Contains(res.Error, "thinking or redacted_thinking blocks in the latest assistant message cannot be modified") {
					t.Fatalf("removing block %d of the latest run: status %d %q, want the latest-message 400", k, res.Status, res.Error)
				}
			}
			// Reordering inside the latest run is also a modification.
			d := newConvCopy(c)
			content := d.msgs[3].(map[string]any)["content"].([]any)
			content[0], content[2] = content[2], content[0]
			if res := d.send(); res.Status != 400 {
				t.Fatalf("reordered latest run: status %d", res.Status)
			}
			// Removing the whole run is an end removal: fine.
			d = newConvCopy(c)
			for k := 0; k < 3; k++ {
				d.removeBlock(3, 0)
			}
			if res := d.send(); res.Status != 200 || len(res.Transformations) != 0 {
				t.Fatalf("whole latest run removed: %d %s %v", res.Status, res.Error, res.Transformations)
			}
		})
	}
}

// newConvCopy deep-copies a conversation (same judge).
func newConvCopy(c *conv) *conv {
	var top map[string]any
	if err := json.Unmarshal(c.body(), &top); err != nil {
		panic(err)
	}
	msgs := top["messages"].([]any)
	delete(top, "messages")
	return &conv{t: c.t, j: c.j, top: top, msgs: msgs, beta: c.beta}
}

func TestScenario21Reordered(t *testing.T) {
	for _, m := range []mode{ENF, DROP, REC} {
		t.Run(string(m), func(t *testing.T) {
			c := newConv(t, m, Documented())
			c.user("q1")
			c.turn(think("a1"), think("a2"), say("1"))
			c.user("q2")
			c.turn(think("b"), say("2"))
			c.user("q3")
			d := newConvCopy(c)
			content := d.msgs[1].(map[string]any)["content"].([]any)
			content[0], content[1] = content[1], content[0]
			res := d.send()
			if res.Status == 200 && len(res.Transformations) == 0 {
				t.Fatalf("two blocks reordered: passed unreported")
			}
			if m == ENF && (res.Status != 400 || !strings.HasPrefix(res.Error, "messages.1.content.1: ")) {
				t.Fatalf("ENF: %d %q, want 400 at messages.1.content.1", res.Status, res.Error)
			}
			// A block moved to another message: its prefix and its run change.
			d = newConvCopy(c)
			b := d.block(3, 0)
			d.removeBlock(3, 0)
			m1 := d.msgs[1].(map[string]any)
			m1["content"] = append([]any{b}, m1["content"].([]any)...)
			res = d.send()
			if m == ENF && (res.Status != 400 || !strings.HasPrefix(res.Error, "messages.1.content.0: ")) {
				t.Fatalf("moved block: ENF %d %q", res.Status, res.Error)
			}
			if m != ENF && (res.Status != 200 || len(res.Transformations) == 0) {
				t.Fatalf("moved block: %s %d %v", m, res.Status, res.Transformations)
			}
		})
	}
}

func TestScenario22ThinkingTextEdited(t *testing.T) {
	for _, edits := range []bool{false, true} {
		r := Documented()
		r.ThinkingEditAccepted = edits
		for _, m := range allModes {
			c := newConv(t, m, r)
			fourTurns(c)
			c.block(3, 0)["thinking"] = "reasoning b, summarized differently"
			res := c.send()
			if !edits && (res.Status != 400 || res.Error != "messages.3.content.0: Invalid `signature` in `thinking` block") {
				t.Fatalf("%s docs reading: %d %q, want the invalid-signature 400", m, res.Status, res.Error)
			}
			if edits && (res.Status != 200 || len(res.Transformations) != 0) {
				t.Fatalf("%s probe reading: %d %q %v, want accepted", m, res.Status, res.Error, res.Transformations)
			}
			// Text put into an omitted (empty) block's field is ignored in both readings.
			d := newConv(t, m, r)
			d.user("q")
			d.turn(think(""), say("a"))
			d.user("q2")
			d.block(1, 0)["thinking"] = "filled in by a client"
			if res := d.send(); res.Status != 200 {
				t.Fatalf("%s: text in an omitted block: %d %q", m, res.Status, res.Error)
			}
		}
	}
}

func TestScenario23SignatureFlipped(t *testing.T) {
	for _, m := range allModes {
		for _, kind := range []string{"thinking", "redacted_thinking"} {
			c := newConv(t, m, Documented())
			c.user("q")
			if kind == "thinking" {
				c.turn(think("a"), say("1"))
			} else {
				c.turn(redacted(), say("1"))
			}
			c.user("q2")
			c.turn(think("b"), say("2"))
			c.user("q3")
			field := sigField(kind)
			sig := c.block(1, 0)[field].(string)
			for _, at := range []int{0, len(sig) / 2, len(sig) - 1} {
				d := newConvCopy(c)
				b := []byte(sig)
				if b[at] == 'A' {
					b[at] = 'B'
				} else {
					b[at] = 'A'
				}
				d.block(1, 0)[field] = string(b)
				res := d.send()
				want := fmt.Sprintf("messages.1.content.0: Invalid `%s` in `%s` block", field, kind)
				if res.Status != 400 || res.Error != want || res.Blocks[0].Fate != FateBadSignature {
					t.Fatalf("%s %s flip at %d: %d %q", m, kind, at, res.Status, res.Error)
				}
			}
			d := newConvCopy(c)
			d.block(1, 0)[field] = ""
			if res := d.send(); res.Status != 400 || !strings.Contains(res.Error, "Invalid `"+field+"`") {
				t.Fatalf("%s %s empty: %d %q", m, kind, res.Status, res.Error)
			}
		}
	}
}

func TestScenario28RetryIsDeterministic(t *testing.T) {
	c := newConv(t, ENF, Documented())
	fourTurns(c)
	c.msgs[0].(map[string]any)["content"] = "edited"
	first := c.send()
	for i := 0; i < 3; i++ {
		again := c.send()
		if again.Status != 400 || again.Error != first.Error {
			t.Fatalf("retry %d: %d %q, first %q", i, again.Status, again.Error, first.Error)
		}
	}
}

func TestScenario29ModelSwitchDownAndBack(t *testing.T) {
	for _, behavior := range []string{"error", "drop_block"} {
		c := newConv(t, ENF, Documented())
		c.beta = true
		c.top["thinking"].(map[string]any)["block_binding"] = map[string]any{"prefix_mismatch_behavior": behavior}
		fourTurns(c)
		c.top["model"] = "claude-opus-5-5"
		res := c.send()
		want := []Transformation{}
		for _, pth := range blocksOfFourTurns {
			want = append(want, Transformation{"thinking_dropped", pth.String(), "model_binding_mismatch"})
		}
		if res.Status != 200 || !reflect.DeepEqual(res.Transformations, want) || len(res.Read()) != 0 {
			t.Fatalf("%s: switch down: %d %q %v", behavior, res.Status, res.Error, res.Transformations)
		}
		// The Opus turn replies without thinking; back on Fable 5.1 every block is read again.
		d := newConvCopy(c)
		d.turn(say("from opus"))
		d.user("again")
		d.top["model"] = "claude-fable-5-1"
		if res := d.send(); res.Status != 200 || len(res.Transformations) != 0 || len(res.Read()) != 4 {
			t.Fatalf("%s: switch back: %d %q %v read %v", behavior, res.Status, res.Error, res.Transformations, res.Read())
		}
		// An Opus block minted while the Fable blocks were unread has no
		// predecessor: behind them it is a block produced while they were absent.
		d = newConvCopy(c)
		d.turn(think("opus thought"), say("from opus"))
		d.user("again")
		d.top["model"] = "claude-fable-5-1"
		res = d.send()
		if behavior == "error" && (res.Status != 400 || !strings.HasPrefix(res.Error, "messages.9.content.0: ")) {
			t.Fatalf("error: switch back with an Opus block: %d %q", res.Status, res.Error)
		}
		if behavior == "drop_block" && (res.Status != 200 || len(res.Read()) != 4 || res.Blocks[4].Fate != FateDroppedPrefix) {
			t.Fatalf("drop_block: switch back with an Opus block: %d %v", res.Status, res.Blocks)
		}
		// On Bedrock/Vertex (the other reading) Fable 5.1 does not read Opus 5.5 blocks.
		r := Documented()
		r.Opus55ToFable51 = false
		e := newConvCopy(d)
		e.j = New(Options{Reading: r, NewAccount: true, Secret: nil})
		res = e.send()
		if res.Status != 200 || res.Blocks[4].Fate != FateDroppedModel || len(res.Read()) != 4 {
			t.Fatalf("%s: bedrock reading: %d %q %v", behavior, res.Status, res.Error, res.Blocks)
		}
	}
}

func TestScenario31Fable52Blocks(t *testing.T) {
	for _, older := range []bool{false, true} {
		r := Documented()
		r.Fable52ReadsOlder = older
		c := newConv(t, ENF, r)
		c.top["model"] = "claude-fable-5-2"
		c.user("q")
		c.turn(think("a"), say("1"))
		c.user("q2")
		for _, target := range []string{"claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5"} {
			c.top["model"] = target
			res := c.send()
			if res.Status != 200 || res.Blocks[0].Fate != FateDroppedModel {
				t.Fatalf("fable 5.2 block on %s: %d %v", target, res.Status, res.Blocks)
			}
		}
		c.top["model"] = "claude-mythos-5-2"
		if res := c.send(); res.Status != 200 || res.Blocks[0].Fate != FateRead {
			t.Fatalf("fable 5.2 block on mythos 5.2: %d %v", res.Status, res.Blocks)
		}
		// Fable 5.1 blocks on Fable 5.2: only under the reading that it reads older models.
		d := newConv(t, ENF, r)
		d.user("q")
		d.turn(think("a"), say("1"))
		d.user("q2")
		d.top["model"] = "claude-fable-5-2"
		want := FateDroppedModel
		if older {
			want = FateRead
		}
		if res := d.send(); res.Status != 200 || res.Blocks[0].Fate != want {
			t.Fatalf("fable 5.1 block on fable 5.2 (older=%v): %d %v", older, res.Status, res.Blocks)
		}
	}
}

func TestScenario36OnDemandCompaction(t *testing.T) {
	for _, m := range allModes {
		c := newConv(t, m, Documented())
		fourTurns(c) // messages 0..8
		// Compact messages 0..3; keep turns 3 and 4 (messages 4..8).
		comp, err := c.j.Compaction(c.body(), 4, "We discussed questions A and B.")
		if err != nil {
			t.Fatal(err)
		}
		kept := c.msgs[4:]
		c.msgs = append([]any{map[string]any{"role": "assistant", "content": []any{comp}}}, kept...)
		res := c.send()
		if res.Status != 200 || len(res.Transformations) != 0 || len(res.Read()) != 2 {
			t.Fatalf("%s: kept thinking after the compaction block: %d %q %v", m, res.Status, res.Error, res.Transformations)
		}
		// New thinking after the compaction, then the history before it pruned
		// further: the checked prefix starts at the compaction block.
		c.turn(think("e"), say("answer"))
		c.user("more")
		if res := c.send(); res.Status != 200 || len(res.Read()) != 3 {
			t.Fatalf("%s: after compaction: %d %q", m, res.Status, res.Error)
		}
		// Threshold style: the compaction block inserted in front of the kept
		// turns while the summarized messages are still there, then pruned.
		d := newConv(t, m, Documented())
		fourTurns(d)
		comp2, _ := d.j.Compaction(d.body(), 4, "summary")
		d.msgs = append(append(append([]any{}, d.msgs[:4]...), map[string]any{"role": "assistant", "content": []any{comp2}}), d.msgs[4:]...)
		if res := d.send(); res.Status != 200 || len(res.Read()) != 4 {
			t.Fatalf("%s: compaction inserted, history kept: %d %q %v", m, res.Status, res.Error, res.Blocks)
		}
		d.msgs = d.msgs[4:]
		if res := d.send(); res.Status != 200 || len(res.Read()) != 2 {
			t.Fatalf("%s: history before the compaction pruned: %d %q", m, res.Status, res.Error)
		}
		// One word of the compaction content edited.
		comp["content"] = "We discussed questions A and C."
		res = c.send()
		if res.Status != 400 || res.ErrorCode != "compaction_content_mismatch" {
			t.Fatalf("%s: edited compaction: %d %q", m, res.Status, res.Error)
		}
	}
}

func TestScenario50Fork(t *testing.T) {
	for _, m := range allModes {
		c := newConv(t, m, Documented())
		c.user("q1")
		c.turn(think("a"), say("1"))
		c.user("q2")
		a := newConvCopy(c)
		b := newConvCopy(c)
		a.turn(think("branch a"), say("A"))
		a.user("qa")
		b.msgs[2] = map[string]any{"role": "user", "content": "q2"} // identical history up to the fork
		b.turn(think("branch b"), say("B"))
		b.user("qb")
		b.turn(think("branch b, 2"), say("B2"))
		b.user("qb2")
		for _, x := range []*conv{a, b} {
			if res := x.send(); res.Status != 200 || len(res.Transformations) != 0 || len(res.Read()) != len(x.thinkingPaths()) {
				t.Fatalf("%s: a branch lost its thinking: %d %q", m, res.Status, res.Error)
			}
		}
		// Splice branch A's reply thinking into branch B's later reply.
		s := newConvCopy(b)
		s.msgs[5].(map[string]any)["content"].([]any)[0] = a.block(3, 0)
		res := s.send()
		if m != NB && res.Status == 200 && len(res.Transformations) == 0 {
			t.Fatalf("%s: spliced block accepted unreported", m)
		}
		if m == ENF && (res.Status != 400 || !strings.HasPrefix(res.Error, "messages.5.content.0: ")) {
			t.Fatalf("ENF splice: %d %q", res.Status, res.Error)
		}
	}
}

// The conditions of the provider's compaction-thinking-blocks page for kept
// turns: the compaction request on a model with preserved thinking, system
// and tools unchanged from the minting requests, and a first kept message
// the API does not merge into the summarized ones. Thinking minted with the
// block in place is bound to the block and holds whatever the conditions.
func TestScenario36KeptTurnConditions(t *testing.T) {
	cases := []struct {
		name    string
		compact func(c *conv) map[string]any // mints the block; c.msgs is the history
		keep    int                          // messages kept after the block (from the end of history)
	}{
		{"other system on the compaction request", func(c *conv) map[string]any {
			sys := c.top["system"]
			c.top["system"] = "A different system prompt."
			comp, _ := c.j.Compaction(c.body(), 4, "summary")
			c.top["system"] = sys
			return comp
		}, 5},
		{"compaction on a model without preserved thinking", func(c *conv) map[string]any {
			c.top["model"] = "claude-opus-5"
			comp, _ := c.j.Compaction(c.body(), 4, "summary")
			c.top["model"] = "claude-fable-5-1"
			return comp
		}, 5},
	}
	for _, tc := range cases {
		c := newConv(t, ENF, Documented())
		fourTurns(c) // messages 0..8
		comp := tc.compact(c)
		kept := c.msgs[len(c.msgs)-tc.keep:]
		c.msgs = append([]any{map[string]any{"role": "assistant", "content": []any{comp}}}, kept...)
		res := c.send()
		if res.Status != 400 || !strings.Contains(res.Error, "bound to a different conversation") {
			t.Fatalf("%s: kept thinking after the swap: %d %q, want the prefix 400", tc.name, res.Status, res.Error)
		}
		// Thinking minted with the block in place holds (the kept turns'
		// thinking stripped first, as a host following the 400 would).
		for i := 1; i < len(c.msgs); i++ {
			m := c.msgs[i].(map[string]any)
			if content, ok := m["content"].([]any); ok && len(content) > 0 && isThinking(content[0].(map[string]any)) {
				c.removeBlock(i, 0)
			}
		}
		c.turn(think("after the swap"), say("ok"))
		c.user("more")
		if res := c.send(); res.Status != 200 || len(res.Read()) != 1 {
			t.Fatalf("%s: thinking minted after the swap: %d %q", tc.name, res.Status, res.Error)
		}
	}
}

// A first kept message with the last summarized message's role is merged
// into the summarized messages: the kept thinking fails. Cut one message
// later, the same history keeps it.
func TestScenario36FirstKeptRoleMerged(t *testing.T) {
	for _, upto := range []int{2, 3} {
		c := newConv(t, ENF, Documented())
		c.user("q1")
		c.turn(think("a"), say("1"))
		c.user("q2")
		c.user("q2, continued") // two user messages in a row: messages 2 and 3
		c.turn(think("b"), say("2"))
		c.user("next") // messages: u0 a1 u2 u3 a4 u5
		comp, err := c.j.Compaction(c.body(), upto, "summary")
		if err != nil {
			t.Fatal(err)
		}
		c.msgs = append([]any{map[string]any{"role": "assistant", "content": []any{comp}}}, c.msgs[upto:]...)
		res := c.send()
		if merged := upto == 3; merged != (res.Status == 400) || (!merged && len(res.Read()) != 1) {
			t.Fatalf("summarized up to %d: %d %q", upto, res.Status, res.Error)
		}
	}
}

// Compactions in a row: thinking kept through two on-demand compactions
// holds when every compaction in the row meets the conditions (research 6:
// "this applies to every compaction in the chain, not only the latest"),
// and fails when the earlier one ran on a model without preserved thinking,
// even though the latest did not.
func TestScenario36CompactionsInARow(t *testing.T) {
	for _, firstModel := range []string{"claude-fable-5-1", "claude-opus-5"} {
		c := newConv(t, ENF, Documented())
		fourTurns(c) // u0 a1 u2 a3 u4 a5 u6 a7 u8
		c.top["model"] = firstModel
		c1, err := c.j.Compaction(c.body(), 2, "summary of u0 a1")
		if err != nil {
			t.Fatal(err)
		}
		c.top["model"] = "claude-fable-5-1"
		c.msgs = append([]any{map[string]any{"role": "assistant", "content": []any{c1}}}, c.msgs[2:]...) // C1 u2 a3 u4 a5 u6 a7 u8
		c2, err := c.j.Compaction(c.body(), 3, "summary of C1 u2 a3")
		if err != nil {
			t.Fatal(err)
		}
		c.msgs = append([]any{map[string]any{"role": "assistant", "content": []any{c2}}}, c.msgs[3:]...) // C2 u4 a5 u6 a7 u8
		res := c.send()
		if ok := firstModel == "claude-fable-5-1"; ok != (res.Status == 200) || (ok && len(res.Read()) != 2) {
			t.Fatalf("first compaction on %s: %d %q, read %d", firstModel, res.Status, res.Error, len(res.Read()))
		}
		if f, err := c.j.Facts(c.body()); err != nil || f[0].MessageOK != (firstModel == "claude-fable-5-1") {
			t.Fatalf("first compaction on %s: facts %+v %v", firstModel, f, err)
		}
	}
}
