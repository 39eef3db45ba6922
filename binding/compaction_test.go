package binding

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// compactionConv drives Compile and Accept the way the daemon does, holding
// the state it would persist: stamps, releases and compaction records.
type compactionConv struct {
	t           *testing.T
	system      string
	model       string
	seq         int64
	engaged     bool
	stamps      map[Digest]*Stamp
	released    map[Digest]bool
	remembered  []*CompileRecord
	owner       *CompileRecord
	compactions map[Digest]Compaction
}

func newCompactionConv(t *testing.T) *compactionConv {
	return &compactionConv{t: t, system: "You help.", model: "claude-fable-5-1", stamps: map[Digest]*Stamp{},
		released: map[Digest]bool{}, compactions: map[Digest]Compaction{}}
}

func (c *compactionConv) body(msgs []any) []byte {
	b, err := json.Marshal(map[string]any{"model": c.model, "system": c.system, "max_tokens": 1024, "messages": msgs})
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// compile decides msgs; it returns the strips as "path reason" strings.
func (c *compactionConv) compile(msgs []any) (*Compiled, []string) {
	c.t.Helper()
	req, err := ParseRequest(c.body(msgs))
	if err != nil {
		c.t.Fatal(err)
	}
	comps := map[Digest]Compaction{}
	for _, k := range CompactionKeys(req) {
		if x, ok := c.compactions[k]; ok {
			comps[k] = x
		}
	}
	c.seq++
	out, err := Compile(CompileInput{ID: fmt.Sprint("c", c.seq), Conversation: "conv", Branch: "main", Seq: c.seq, Request: req,
		Engaged: c.engaged, Stamps: StampsFor(req, c.stamps), Released: c.released, Remembered: c.remembered, Owner: c.owner, Compactions: comps})
	if err != nil {
		c.t.Fatal(err)
	}
	c.remembered = append(c.remembered, out.Record)
	var strips []string
	for _, s := range out.Strips {
		strips = append(strips, s.Pos.Path()+" "+string(s.Reason))
	}
	return out, strips
}

func (c *compactionConv) accept(out *Compiled, reply any) *AcceptOutcome {
	c.t.Helper()
	raw, err := json.Marshal(reply)
	if err != nil {
		c.t.Fatal(err)
	}
	acc, err := Accept(AcceptInput{Record: out.Record, Owner: c.owner, Engaged: c.engaged, Reply: raw, Stamps: c.stamps})
	if err != nil {
		c.t.Fatal(err)
	}
	c.engaged = true
	if acc.Owner {
		c.owner = acc.Record
	}
	for _, s := range acc.Stamps {
		if _, ok := c.stamps[s.Key]; !ok {
			c.stamps[s.Key] = &s
		}
	}
	for _, r := range acc.Releases {
		c.released[r.Key] = true
	}
	for _, x := range acc.Compactions {
		if _, ok := c.compactions[x.Key]; !ok {
			c.compactions[x.Key] = x
		}
	}
	return acc
}

func cUser(text string) any { return map[string]any{"role": "user", "content": text} }

func cReply(sig, text string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "thinking", "thinking": "about " + text, "signature": sig},
		map[string]any{"type": "text", "text": text}}}
}

func cCompaction(summary, sig string) map[string]any {
	b := map[string]any{"type": "compaction", "content": summary}
	if sig != "" {
		b["signature"] = sig
	}
	return map[string]any{"role": "assistant", "content": []any{b}}
}

// turn compiles msgs (which must come back with no strip), accepts the reply
// and returns msgs with the reply appended.
func (c *compactionConv) turn(msgs []any, reply map[string]any) []any {
	c.t.Helper()
	out, strips := c.compile(msgs)
	if len(strips) != 0 && c.engaged {
		c.t.Fatalf("turn: strips %v", strips)
	}
	c.accept(out, reply)
	return append(append([]any{}, msgs...), reply)
}

// twoTurns: [q1, A(sigA), q2, B(sigB)], both stamped.
func (c *compactionConv) twoTurns() []any {
	msgs := c.turn([]any{cUser("q1")}, cReply("sigA", "one"))
	return c.turn(append(msgs, cUser("q2")), cReply("sigB", "two"))
}

// compact sends msgs as a compaction request (whatever it strips) and
// accepts reply (the block).
func (c *compactionConv) compact(msgs []any, reply map[string]any) *AcceptOutcome {
	c.t.Helper()
	out, _ := c.compile(msgs)
	return c.accept(out, reply)
}

func TestOnDemandCompactionKeptTurns(t *testing.T) {
	comp := cCompaction("We discussed q1.", "sigC")
	cases := []struct {
		name string
		// setup builds the history; it returns the request to decide.
		setup func(c *compactionConv) []any
		want  string
	}{
		{"swap keeps the kept turn's thinking", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp) // [q1, A] summarized; [q2, B] kept
			return []any{comp, msgs[2], msgs[3], cUser("q3")}
		}, "[]"},
		{"compaction content edited", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			return []any{cCompaction("We discussed q2.", "sigC"), msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"kept turn edited", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			return []any{comp, cUser("q2, edited"), msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"kept turn skipped", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:1], comp) // [q1] summarized; A is skipped below
			return []any{comp, msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"unknown compaction block restarts", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			return []any{comp, msgs[2], msgs[3], cUser("q3")} // never accepted: bindery cannot vouch for it
		}, "[messages.2.content.0 prefix-changed]"},
		{"compaction request under another system", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.system = "You help. Today is Monday."
			c.compact(msgs[:2], comp)
			c.system = "You help."
			return []any{comp, msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"later system change is seed-changed, not a release", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			c.system = "You help. Heartbeat."
			return []any{comp, msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 seed-changed]"},
		{"compaction on a model that does not bind", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.model = "claude-sonnet-5"
			c.compact(msgs[:2], comp)
			c.model = "claude-fable-5-1"
			return []any{comp, msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"first kept message has the last replaced one's role", func(c *compactionConv) []any {
			msgs := c.turn([]any{cUser("q1")}, cReply("sigA", "one"))
			// A prefill-style second assistant message right after A.
			msgs = c.turn(msgs, cReply("sigB", "more"))
			c.compact(msgs[:2], comp) // ends on A (assistant); the kept turn starts with an assistant message
			return []any{comp, msgs[2], cUser("q3")}
		}, "[messages.1.content.0 prefix-changed]"},
		{"block not alone in the first message restarts", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			first := map[string]any{"role": "assistant", "content": []any{comp["content"].([]any)[0], map[string]any{"type": "text", "text": "note"}}}
			return []any{first, msgs[2], msgs[3], cUser("q3")}
		}, "[messages.2.content.0 prefix-changed]"},
		{"compact again keeps thinking minted after the first block", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			msgs = c.turn([]any{comp, msgs[2], msgs[3], cUser("q3")}, cReply("sigD", "three"))
			comp2 := cCompaction("We discussed q1 to q2.", "sigC2")
			c.compact(msgs[:4], comp2) // [C, q2, B, q3] summarized; D kept
			return []any{comp2, msgs[4], cUser("q4")}
		}, "[]"},
		{"thinking kept through two compactions in a row", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			msgs = c.turn([]any{comp, msgs[2], msgs[3], cUser("q3")}, cReply("sigD", "three"))
			comp2 := cCompaction("We discussed q1.", "sigC2")
			c.compact(msgs[:1], comp2) // only C summarized: B (minted before C) kept through both
			return []any{comp2, msgs[1], msgs[2], msgs[3], msgs[4], cUser("q4")}
		}, "[]"},
		{"two in a row, the second summarizing a kept message too", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			comp2 := cCompaction("We discussed q1 and q2.", "sigC2")
			c.compact([]any{comp, msgs[2]}, comp2) // [C, q2] summarized: B kept through both
			return []any{comp2, msgs[3], cUser("q3")}
		}, "[]"},
		{"three in a row", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			comp2 := cCompaction("We discussed q1, again.", "sigC2")
			c.compact([]any{comp}, comp2)
			comp3 := cCompaction("We discussed q1, once more.", "sigC3")
			c.compact([]any{comp2}, comp3)
			return []any{comp3, msgs[2], msgs[3], cUser("q3")}
		}, "[]"},
		{"two in a row, the first not recorded", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			comp2 := cCompaction("We discussed q1 and q2.", "sigC2")
			c.compact([]any{comp, msgs[2]}, comp2) // C was never accepted: what it replaced is unknown
			return []any{comp2, msgs[3], cUser("q3")}
		}, "[messages.1.content.0 prefix-changed]"},
		{"two in a row, the second under another system", func(c *compactionConv) []any {
			msgs := c.twoTurns()
			c.compact(msgs[:2], comp)
			c.system = "You help. Today is Monday."
			comp2 := cCompaction("We discussed q1 and q2.", "sigC2")
			c.compact([]any{comp, msgs[2]}, comp2)
			c.system = "You help."
			return []any{comp2, msgs[3], cUser("q3")}
		}, "[messages.1.content.0 prefix-changed]"},
		{"two in a row, the first's kept message merged into what it replaced", func(c *compactionConv) []any {
			msgs := c.turn([]any{cUser("q1")}, cReply("sigA", "one"))
			msgs = c.turn(msgs, cReply("sigB", "more")) // a prefill-style assistant message right after A
			msgs = c.turn(append(msgs, cUser("q3")), cReply("sigD", "three"))
			c.compact(msgs[:2], comp) // [q1, A] summarized; the kept turns start with B, an assistant message: merged
			comp2 := cCompaction("We discussed q1 and more.", "sigC2")
			c.compact([]any{comp, msgs[2]}, comp2)
			return []any{comp2, msgs[3], msgs[4], cUser("q4")} // D kept through both, the first failing
		}, "[messages.2.content.0 prefix-changed]"},
		{"two in a row, the second summarizing the first alone, the first ending on a user message", func(c *compactionConv) []any {
			msgs := c.turn([]any{cUser("q1"), cUser("q1, continued")}, cReply("sigA", "one"))
			c.compact(msgs[:1], comp) // [q1] summarized: the kept "q1, continued" is merged into it
			comp2 := cCompaction("We discussed q1.", "sigC2")
			c.compact([]any{comp}, comp2) // the kept turns now follow the block's assistant message
			return []any{comp2, msgs[1], msgs[2], cUser("q2")}
		}, "[messages.2.content.0 prefix-changed]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCompactionConv(t)
			msgs := tc.setup(c)
			_, strips := c.compile(msgs)
			if got := fmt.Sprint(strips); got != tc.want && !(tc.want == "[]" && strips == nil) {
				t.Fatalf("strips %s, want %s", got, tc.want)
			}
		})
	}
}

// Thinking minted with a compaction block in place is bound to the block:
// it holds when the history before the block is pruned (threshold style) and
// when bindery has no record of the block, and breaks when the block (an
// unsigned, editable threshold block) is edited.
func TestCompactionBlockRestartsForThinkingMintedAfterIt(t *testing.T) {
	for _, signed := range []string{"", "sigT"} {
		c := newCompactionConv(t)
		msgs := c.twoTurns()
		thr := cCompaction("Threshold summary.", signed)
		withBlock := append(append([]any{}, msgs...), thr, cUser("q3"))
		msgs = c.turn(withBlock, cReply("sigE", "three"))
		pruned := append([]any{}, msgs[4:]...) // [T, q3, E]
		if _, strips := c.compile(append(pruned, cUser("q4"))); len(strips) != 0 {
			t.Fatalf("signed=%q: pruned before the block: strips %v", signed, strips)
		}
		edited := append([]any{cCompaction("Threshold summary, edited.", signed)}, pruned[1:]...)
		if _, strips := c.compile(append(edited, cUser("q4"))); fmt.Sprint(strips) != "[messages.2.content.0 prefix-changed]" {
			t.Fatalf("signed=%q: edited block: strips %v", signed, strips)
		}
	}
}

// Accept records a compaction only for a reply that is one signed
// compaction block answering a compile whose target binds.
func TestAcceptRecordsOnlyOnDemandCompactions(t *testing.T) {
	cases := []struct {
		name  string
		model string
		reply map[string]any
		want  int
	}{
		{"on-demand block", "claude-fable-5-1", cCompaction("s", "sig"), 1},
		{"unsigned (threshold) block", "claude-fable-5-1", cCompaction("s", ""), 0},
		{"block with a reply after it (threshold)", "claude-fable-5-1", map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "compaction", "content": "s", "signature": "sig"}, map[string]any{"type": "text", "text": "hi"}}}, 0},
		{"target does not bind", "claude-sonnet-5", cCompaction("s", "sig"), 0},
		{"model the table does not know (binding for strips, not vouched for here)", "claude-unknown-9", cCompaction("s", "sig"), 0},
		{"ordinary reply", "claude-fable-5-1", cReply("sigA", "one"), 0},
	}
	for _, tc := range cases {
		c := newCompactionConv(t)
		c.model = tc.model
		out, _ := c.compile([]any{cUser("q1")})
		acc := c.accept(out, tc.reply)
		if len(acc.Compactions) != tc.want {
			t.Fatalf("%s: %d compactions, want %d", tc.name, len(acc.Compactions), tc.want)
		}
		if tc.want == 1 {
			x := acc.Compactions[0]
			if x.Chain != out.Record.End || x.Seed != out.Record.Seed || x.LastRole != "user" || x.Compile != out.ID {
				t.Fatalf("%s: record %+v does not stand for compile %s", tc.name, x, out.ID)
			}
		}
	}
}

// TestRecordThroughIsThroughChains: the Through a compile records, taken
// from keptChains' walk while the messages dropped have not changed since,
// is what throughChains works out from the final state, in requests after
// one compaction, two in a row, with a message the strip empties, and
// under another seed (none).
func TestRecordThroughIsThroughChains(t *testing.T) {
	c := newCompactionConv(t)
	msgs := c.twoTurns()
	comp := cCompaction("We discussed q1.", "sigC")
	c.compact(msgs[:2], comp)
	comp2 := cCompaction("We discussed q1 and q2.", "sigC2")
	c.compact([]any{comp, msgs[2]}, comp2)
	thinkingOnly := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "x", "signature": "never-stamped"}}}
	for i, rq := range [][]any{
		{comp, msgs[2], msgs[3], cUser("q3")},
		{comp2, msgs[3], cUser("q3")},
		{comp, msgs[2], msgs[3], cUser("q3"), thinkingOnly, cUser("q4")},
		{comp2, msgs[3], cUser("q3"), thinkingOnly, cUser("q4")},
	} {
		for _, system := range []string{c.system, "another"} {
			req, err := ParseRequest(c.body(rq))
			if err != nil {
				t.Fatal(err)
			}
			if system != c.system {
				req.Seed = Digest{1}
			}
			in := CompileInput{ID: "x", Request: req, Engaged: true, Stamps: StampsFor(req, c.stamps), Compactions: c.compactions}
			d := decider{in: &in, req: req, models: DefaultModelTable(), binds: true, attributed: map[Digest]*Stamp{}, mem: &DecideMemory{}}
			if err := d.collect(); err != nil {
				t.Fatal(err)
			}
			d.decide()
			got, want := d.recordThrough(), d.throughChains()
			if !slices.Equal(got, want) || (system == c.system) != (len(want) > 0) {
				t.Fatalf("request %d, system %q: recorded %x, throughChains %x", i, system, got, want)
			}
		}
	}
}
