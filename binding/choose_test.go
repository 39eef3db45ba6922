package binding

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// chooseReference is the kept set by choose.go's head comment, written
// apart from choose: chains found by scanning back for each block's parent
// (no index), the choice made once per candidate latest message.
func (d *decider) chooseReference() {
	n := len(d.tb)
	cand := func(i int) bool { t := &d.tb[i]; return t.reason == "" && !t.unreadable }
	parent := make([]int, n)
	depth := make([]int, n)
	for i := 0; i < n; i++ {
		parent[i] = -1
		if !cand(i) {
			continue
		}
		depth[i] = 1
		if d.tb[i].pred.IsZero() {
			continue
		}
		for k := i - 1; k >= 0; k-- {
			if cand(k) && d.tb[k].key == d.tb[i].pred {
				parent[i], depth[i] = k, depth[k]+1
				break
			}
		}
	}
	keep := make([]bool, n)
	latest, hi := d.latest, n
	first := true
	for {
		lfrom := hi
		for lfrom > 0 && d.tb[lfrom-1].msg == latest {
			lfrom--
		}
		clear(keep)
		if d.binds {
			whole := lfrom < hi
			for i := lfrom; i < hi; i++ {
				if !cand(i) || (i > lfrom && parent[i] != i-1) {
					whole = false
				}
			}
			best, end := 0, -1
			for i := 0; i < lfrom; i++ {
				if cand(i) && depth[i] >= best {
					best, end = depth[i], i
				}
			}
			manualOpen := first && d.req.Manual && openCycle(d.req, d.latest)
			if whole && (manualOpen || depth[hi-1] >= best) {
				end = hi - 1
			}
			for i := end; i >= 0; i = parent[i] {
				keep[i] = true
			}
			for i := 0; i < hi; i++ {
				if d.tb[i].reason == "" && d.tb[i].unreadable {
					keep[i] = true
				}
			}
		} else {
			for i := 0; i < hi; i++ {
				keep[i] = d.tb[i].reason == ""
			}
		}
		all := true
		for i := lfrom; i < hi; i++ {
			all = all && keep[i]
		}
		if !all {
			for i := lfrom; i < hi; i++ {
				keep[i] = false
			}
		}
		if lfrom == hi || keep[lfrom] || len(d.req.Messages[latest].Blocks) != hi-lfrom {
			break
		}
		prev := -1
		for i := latest - 1; i >= 0 && prev < 0; i-- {
			if d.req.Messages[i].Role == "assistant" {
				prev = i
			}
		}
		if prev < 0 {
			break
		}
		latest, hi, first = prev, lfrom, false
	}
	for i := range d.tb {
		t := &d.tb[i]
		t.kept = keep[i]
		if t.reason == "" && !t.kept {
			t.reason = ReasonGap
		}
	}
}

// TestChooseIsReference: on random block tables (chains, forks back to
// any earlier block, repeated keys, blocks that are not candidates, the
// latest message's blocks, messages a strip empties, targets that bind or
// not, manual thinking in an open tool-use cycle or not), choose keeps and
// strips exactly what chooseReference does, in a DecideMemory reused
// throughout.
func TestChooseIsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var mem DecideMemory
	reasons := []Reason{"", "", "", "", ReasonNoStamp, ReasonPrefixChanged}
	for round := range 3000 {
		n := rng.IntN(40)
		keys := make([]Digest, 8+rng.IntN(40))
		for i := range keys {
			keys[i] = Digest{byte(i), byte(i >> 8), 1}
		}
		tb := make([]tblock, n)
		req := &Request{Manual: rng.IntN(2) == 0, Messages: []Message{{Role: "assistant"}}}
		msg := 0
		for i := range tb {
			if rng.IntN(3) == 0 {
				if rng.IntN(3) == 0 {
					// a message holding text as well: not emptied by a strip
					req.Messages[msg].Blocks = append(req.Messages[msg].Blocks, Block{})
				}
				req.Messages = append(req.Messages, Message{Role: []string{"assistant", "assistant", "user"}[rng.IntN(3)]})
				msg++
			}
			m := &req.Messages[msg]
			m.Blocks = append(m.Blocks, Block{Kind: KindThinking})
			b := tblock{msg: msg, blk: len(m.Blocks) - 1, key: keys[rng.IntN(len(keys))], reason: reasons[rng.IntN(len(reasons))], unreadable: rng.IntN(12) == 0}
			switch r := rng.IntN(10); {
			case i > 0 && r < 6:
				b.pred = tb[i-1].key // a chain
			case i > 0 && r < 9:
				b.pred = tb[rng.IntN(i)].key // a fork back
			}
			tb[i] = b
		}
		req.Messages[msg].Role = "assistant"
		if rng.IntN(2) == 0 {
			// the last message with thinking is followed by tool results (an open cycle) or text
			req.Messages = append(req.Messages, Message{Role: "user", Blocks: []Block{{Result: rng.IntN(3) > 0}}})
		}
		latest := msg
		if rng.IntN(4) == 0 {
			latest = -1
		}
		binds := rng.IntN(4) > 0
		got := &decider{tb: append([]tblock(nil), tb...), latest: latest, mem: &mem, req: req, binds: binds}
		want := &decider{tb: append([]tblock(nil), tb...), latest: latest, req: req, binds: binds}
		got.choose()
		want.chooseReference()
		for i := range tb {
			if got.tb[i].kept != want.tb[i].kept || got.tb[i].reason != want.tb[i].reason {
				t.Fatalf("round %d block %d: kept %v reason %q, reference kept %v reason %q", round, i,
					got.tb[i].kept, got.tb[i].reason, want.tb[i].kept, want.tb[i].reason)
			}
		}
	}
}

// chooseCase compiles msgs for model (manual: thinking.type "enabled")
// with every signed thinking block stamped where it lies, minted by minter
// after the block pred names ("" none): the engaged conversation's state
// when only the choice decides.
func chooseCase(t *testing.T, model, minter string, manual bool, pred map[string]string, msgs ...string) *Compiled {
	t.Helper()
	b := body(model, "sys", msgs)
	if manual {
		b = []byte(strings.Replace(string(b), `{"type":"adaptive"}`, `{"type":"enabled","budget_tokens":1024}`, 1))
	}
	req, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if req.Manual != manual {
		t.Fatalf("parsed Manual %v, want %v", req.Manual, manual)
	}
	st := map[Digest]*Stamp{}
	for i := range req.Messages {
		for _, blk := range req.Messages[i].Blocks {
			if !isThinking(blk.Kind) || !blk.Signed {
				continue
			}
			sig := ""
			for s := range pred {
				if key(s) == blk.Key {
					sig = s
				}
			}
			if sig == "" {
				t.Fatalf("no pred given for a block of messages.%d", i)
			}
			var p Digest
			if pred[sig] != "" {
				p = key(pred[sig])
			}
			st[blk.Key] = &Stamp{Key: blk.Key, Seed: req.Seed, Chain: blk.Chain, Pred: p, Model: minter}
		}
	}
	c, err := Compile(CompileInput{ID: "x", Request: req, Engaged: true, Stamps: StampsFor(req, st)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func released(c *Compiled) []string {
	var out []string
	for _, r := range c.Record.Strips {
		out = append(out, r.Path+" "+r.Reason)
	}
	return out
}

// TestChooseLongestChain: the kept set is the longest valid chain, and the
// latest assistant message's run is no longer preferred (issue 31), with
// the exception of manual thinking in an open tool-use cycle.
func TestChooseLongestChain(t *testing.T) {
	// After the host stripped thinking for one request (C's reply was sent
	// back without it), D was minted reading nothing: A<-B<-C and D alone.
	afterHostStrip := map[string]string{"A": "", "B": "A", "C": "B", "D": ""}
	older := []string{u("1"), a(th("A"), tx("x")), u("2"), a(th("B"), tx("x")), u("3"), a(th("C"), tx("x")), u("4")}
	withText := append(slices.Clone(older), a(th("D"), tx("x")), u("5"))
	openLoop := append(slices.Clone(older), a(th("D"), tu("t")), tr("t", "r"))
	closedLoop := append(slices.Clone(older), a(th("D"), tu("t")), `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"},{"type":"text","text":"and now?"}]}`)
	systemAfter := append(slices.Clone(openLoop), `{"role":"system","content":"a file changed"}`)
	olderKept := []string{"messages.7.content.0 gap"}
	latestKept := []string{"messages.1.content.0 gap", "messages.3.content.0 gap", "messages.5.content.0 gap"}
	for _, tc := range []struct {
		name   string
		manual bool
		msgs   []string
		strips []string
	}{
		{"host strip, then a longer older chain: the older chain", false, withText, olderKept},
		{"same, manual thinking, no tool-use cycle: the older chain", true, withText, olderKept},
		{"adaptive thinking in an open tool-use cycle: the older chain", false, openLoop, olderKept},
		{"manual thinking in an open tool-use cycle: the latest run", true, openLoop, latestKept},
		{"manual thinking, the cycle closed by user text: the older chain", true, closedLoop, olderKept},
		{"manual thinking, a system message after the tool results: the latest run", true, systemAfter, latestKept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chooseCase(t, opus55, opus55, tc.manual, afterHostStrip, tc.msgs...)
			expectStrips(t, c, tc.strips...)
			// A gap on a target that binds is released, as before.
			if got := released(c); !slices.Equal(got, tc.strips) {
				t.Fatalf("releases %q, want %q", got, tc.strips)
			}
		})
	}
	// Between chains of one length the one ending latest: the latest run.
	c := chooseCase(t, opus55, opus55, false, map[string]string{"A": "", "B": "A", "D": "", "E": "D"},
		u("1"), a(th("A"), tx("x")), u("2"), a(th("B"), tx("x")), u("3"), a(th("D"), th("E"), tx("x")), u("4"))
	expectStrips(t, c, "messages.1.content.0 gap", "messages.3.content.0 gap")
	// One block longer, the older chain wins.
	c = chooseCase(t, opus55, opus55, false, map[string]string{"A": "", "B": "A", "C": "B", "D": "", "E": "D"},
		u("1"), a(th("A"), tx("x")), u("2"), a(th("B"), tx("x")), u("3"), a(th("C"), tx("x")), u("4"), a(th("D"), th("E"), tx("x")), u("5"))
	expectStrips(t, c, "messages.7.content.0 gap", "messages.7.content.1 gap")
}

// TestChooseNotBinding: a target that does not bind has no run rule: two
// replies minted at one point (a heartbeat beside an ordinary turn) are
// both kept and nothing is released; the same request to a target that
// binds, or to a model the table does not know (treated as binding),
// keeps one chain and releases the other block.
func TestChooseNotBinding(t *testing.T) {
	atOnePoint := map[string]string{"A": "", "H": "A", "Y": "A"}
	msgs := []string{u("1"), a(th("A"), tx("x")), u("heartbeat"), a(th("H"), tx("ok")), u("2"), a(th("Y"), tx("x")), u("3")}
	c := chooseCase(t, "claude-sonnet-5", "claude-sonnet-5", false, atOnePoint, msgs...)
	if c.Binds {
		t.Fatal("Sonnet 5 binds")
	}
	expectStrips(t, c)
	if len(c.Kept) != 3 || len(c.Record.Strips) != 0 {
		t.Fatalf("kept %d, releases %q", len(c.Kept), released(c))
	}
	for _, model := range []string{"claude-fable-5-1", "claude-nova-7"} {
		c = chooseCase(t, model, model, false, atOnePoint, msgs...)
		if !c.Binds {
			t.Fatalf("%s does not bind", model)
		}
		// A<-H and A<-Y are one length: the one ending latest.
		expectStrips(t, c, "messages.3.content.0 gap")
		if got := released(c); !slices.Equal(got, []string{"messages.3.content.0 gap"}) {
			t.Fatalf("%s: releases %q", model, got)
		}
	}
	// The latest message's run is still whole or nothing there: an
	// unsigned block in it takes the run with it, reported as gap and not
	// released.
	c = chooseCase(t, "claude-sonnet-5", "claude-sonnet-5", false, map[string]string{"A": "", "Y": "A"},
		u("1"), a(th("A"), tx("x")), u("2"), a(th("Y"), th(""), tx("x")), u("3"))
	expectStrips(t, c, "messages.3.content.0 gap", "messages.3.content.1 unsigned")
	if len(c.Record.Strips) != 0 {
		t.Fatalf("releases %q", released(c))
	}
}

// TestChooseLatestDropped: when the latest assistant message holds only
// thinking and the choice strips it, the message is dropped and the one
// before it is the latest the provider sees: its run is kept whole or not
// at all, never cut inside.
func TestChooseLatestDropped(t *testing.T) {
	// A<-B1 is the longest chain, but B2 (minted after a block the host
	// no longer sends) ends B's run: keeping A<-B1 cuts the run that is the
	// latest once D's message is gone.
	pred := map[string]string{"A": "", "B1": "A", "B2": "X", "D": ""}
	c := chooseCase(t, opus55, opus55, false, pred,
		u("1"), a(th("A"), tx("x")), u("2"), a(th("B1"), th("B2"), tx("x")), u("3"), a(th("D")), u("4"))
	expectStrips(t, c, "messages.3.content.0 gap", "messages.3.content.1 gap", "messages.5.content.0 gap")
	if !slices.Equal(c.Dropped, []int{5}) || !slices.Equal(c.Kept, []Digest{key("A")}) {
		t.Fatalf("dropped %v kept %d", c.Dropped, len(c.Kept))
	}
	// With text beside D the message stays, and the longest chain is kept.
	c = chooseCase(t, opus55, opus55, false, pred,
		u("1"), a(th("A"), tx("x")), u("2"), a(th("B1"), th("B2"), tx("x")), u("3"), a(th("D"), tx("y")), u("4"))
	expectStrips(t, c, "messages.3.content.1 gap", "messages.5.content.0 gap")
}
