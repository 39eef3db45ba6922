package judgetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// conv is a small host for the judge's own tests: it keeps a conversation as
// plain JSON values and sends it to a judge.
type conv struct {
	t    testing.TB
	j    *Judge
	top  map[string]any
	msgs []any
	beta bool
}

// mode names the research's outcome legend (section 8).
type mode string

const (
	ENF  mode = "ENF"  // new account, field unset
	DROP mode = "DROP" // explicit drop_block with the beta
	REC  mode = "REC"  // old account, field unset, beta sent
	NB   mode = "NB"   // a model without the prefix check
)

var allModes = []mode{ENF, DROP, REC, NB}

func newConv(t testing.TB, m mode, r Reading) *conv {
	t.Helper()
	c := &conv{t: t, top: map[string]any{
		"model":      "claude-fable-5-1",
		"max_tokens": 1024,
		"system":     []any{map[string]any{"type": "text", "text": "You are a careful coding agent. Today is 2026-11-29."}},
		"tools": []any{
			map[string]any{"name": "read", "description": "Read a file.", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
			map[string]any{"name": "bash", "description": "Run a command.", "input_schema": map[string]any{"type": "object"}},
		},
		"thinking": map[string]any{"type": "adaptive"},
	}}
	switch m {
	case ENF:
		c.j = New(Options{Reading: r, NewAccount: true})
	case DROP:
		c.j = New(Options{Reading: r, NewAccount: true})
		c.top["thinking"].(map[string]any)["block_binding"] = map[string]any{"prefix_mismatch_behavior": "drop_block"}
		c.beta = true
	case REC:
		c.j = New(Options{Reading: r, NewAccount: false})
		c.beta = true
	case NB:
		c.j = New(Options{Reading: r, NewAccount: true})
		c.top["model"] = "claude-sonnet-5"
	}
	return c
}

func (c *conv) body() []byte {
	c.t.Helper()
	top := make(map[string]any, len(c.top)+1)
	for k, v := range c.top {
		top[k] = v
	}
	top["messages"] = c.msgs
	b, err := json.Marshal(top)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

func (c *conv) user(text string) {
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": text})
}

func (c *conv) toolResult(id, text string) {
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": text}}})
}

// turn sends the conversation, requires a 200, and appends the reply.
func (c *conv) turn(reply ...ReplyBlock) Result {
	c.t.Helper()
	res := c.j.Answer(Call{Body: c.body(), Beta: c.beta}, reply)
	if res.Status != 200 {
		c.t.Fatalf("turn: status %d: %s", res.Status, res.Error)
	}
	var msg any
	if err := json.Unmarshal(res.Reply, &msg); err != nil {
		c.t.Fatal(err)
	}
	c.msgs = append(c.msgs, msg)
	return res
}

func (c *conv) send() Result { return c.j.Judge(Call{Body: c.body(), Beta: c.beta}) }

func think(text string) ReplyBlock { return ReplyBlock{Type: "thinking", Text: text} }
func say(text string) ReplyBlock   { return ReplyBlock{Type: "text", Text: text} }
func redacted() ReplyBlock         { return ReplyBlock{Type: "redacted_thinking"} }
func call(id, name string) ReplyBlock {
	return ReplyBlock{Type: "tool_use", ID: id, Name: name, Input: map[string]any{"path": "a.go", "n": 1.5}}
}

// block returns the content block at messages[i].content[k] as a map.
func (c *conv) block(i, k int) map[string]any {
	return c.msgs[i].(map[string]any)["content"].([]any)[k].(map[string]any)
}

// removeBlock deletes messages[i].content[k].
func (c *conv) removeBlock(i, k int) {
	m := c.msgs[i].(map[string]any)
	content := m["content"].([]any)
	m["content"] = append(append([]any{}, content[:k]...), content[k+1:]...)
}

// thinkingPaths lists the paths of every thinking block in the conversation.
func (c *conv) thinkingPaths() []Path {
	var out []Path
	for i, mv := range c.msgs {
		content, _ := mv.(map[string]any)["content"].([]any)
		for k, bv := range content {
			if isThinking(bv.(map[string]any)) {
				out = append(out, Path{i, k})
			}
		}
	}
	return out
}

// fourTurns builds user / [thinking, text] four times (thinking at
// messages.1, .3, .5, .7, content 0) and a final user message.
func fourTurns(c *conv) {
	for i := 0; i < 4; i++ {
		c.user("question " + string(rune('A'+i)))
		c.turn(think("reasoning "+string(rune('a'+i))), say("answer"))
	}
	c.user("next")
}

// expectFailing checks a result against the research's legend, given the
// thinking blocks that fail (in request order).
func expectFailing(t *testing.T, m mode, c *conv, res Result, failing []Path, sentence string) {
	t.Helper()
	switch m {
	case NB:
		if res.Status != 200 || len(res.Transformations) != 0 {
			t.Fatalf("NB: status %d, transformations %v", res.Status, res.Transformations)
		}
		if got, want := res.Read(), c.thinkingPaths(); !reflect.DeepEqual(got, want) {
			t.Fatalf("NB: read %v, want every block %v", got, want)
		}
		return
	case ENF:
		if len(failing) == 0 {
			if res.Status != 200 {
				t.Fatalf("ENF: status %d: %s", res.Status, res.Error)
			}
			if res.Transformations != nil {
				t.Fatalf("ENF without the beta: transformations %v, want absent", res.Transformations)
			}
			return
		}
		if res.Status != 400 || !strings.HasPrefix(res.Error, failing[0].String()+": Invalid `signature` in `thinking` block. The block is bound to a different conversation.") {
			t.Fatalf("ENF: status %d error %q, want 400 at %s", res.Status, res.Error, failing[0])
		}
		if !strings.Contains(res.Error, "requires the `thinking-binding-controls-2026-08-01` value") {
			t.Fatalf("ENF without beta: error lacks the header sentence: %q", res.Error)
		}
		if sentence != "" && !strings.HasSuffix(res.Error, sentence) {
			t.Fatalf("ENF: error %q does not end with %q", res.Error, sentence)
		}
		return
	}
	want := []Transformation{}
	typ := "thinking_dropped"
	if m == REC {
		typ = "thinking_mismatch_allowed"
	}
	for _, p := range failing {
		want = append(want, Transformation{typ, p.String(), "prefix_binding_mismatch"})
	}
	if res.Status != 200 || !reflect.DeepEqual(res.Transformations, want) {
		t.Fatalf("%s: status %d %s, transformations %v, want %v", m, res.Status, res.Error, res.Transformations, want)
	}
	failed := map[Path]bool{}
	for _, p := range failing {
		failed[p] = true
	}
	var read []Path
	for _, p := range c.thinkingPaths() {
		if m == REC || !failed[p] {
			read = append(read, p)
		}
	}
	if got := res.Read(); !reflect.DeepEqual(got, read) {
		t.Fatalf("%s: read %v, want %v", m, got, read)
	}
}
