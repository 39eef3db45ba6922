package binding

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// stampsFor stamps every signed thinking block of r as valid where it stands
// (the steady state of an engaged conversation), and returns a record of a
// compile that sent r, as the owner for cache.firstChange.
func stampsFor(r *Request) map[Digest]*Stamp {
	st := map[Digest]*Stamp{}
	var prev Digest
	for i := range r.Messages {
		for _, b := range r.Messages[i].Blocks {
			if isThinking(b.Kind) && b.Signed {
				st[b.Key] = &Stamp{Key: b.Key, Seed: r.Seed, Chain: b.Chain, Pred: prev, Model: r.Model}
				prev = b.Key
			}
		}
	}
	return st
}

// compileBody is the whole compile path the daemon runs for one request:
// parse, load (here: a map lookup per key), decide, rewrite.
func compileBody(p *Parser, body []byte, all map[Digest]*Stamp, owner *CompileRecord) (*Compiled, []byte, error) {
	r, err := p.Parse(body)
	if err != nil {
		return nil, nil, err
	}
	keys := StampKeys(r)
	st := make(map[Digest]*Stamp, len(keys))
	for _, k := range keys {
		if s, ok := all[k]; ok {
			st[k] = s
		}
	}
	c, err := Compile(CompileInput{ID: "c", Request: r, Engaged: true, Stamps: StampsFor(r, st), Owner: owner})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Rewrite(body, r), nil
}

// BenchmarkCompile1MB: the whole compile decision on a ~1 MB request (500
// messages) against json.Valid over the same bytes, in the same run; once
// in the steady state (nothing stripped) and once after a fold of the first
// message (every block after it stripped, the bytes rewritten).
func BenchmarkCompile1MB(b *testing.B) {
	body := genRequest(42, 500)
	r, err := ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	all := stampsFor(r)
	owner, _ := Compile(CompileInput{ID: "o", Request: r, Engaged: true, Stamps: StampsFor(r, all)})
	folded := genRequest(43, 500) // another conversation's bytes: every stamp's prefix differs
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("compile/steady", func(b *testing.B) {
		var p Parser
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			c, _, err := compileBody(&p, body, all, owner.Record)
			if err != nil || len(c.Strips) != 0 {
				b.Fatal(err, len(c.Strips))
			}
		}
	})
	b.Run("decide-only/steady", func(b *testing.B) {
		b.ReportAllocs()
		stamps := StampsFor(r, all)
		for b.Loop() {
			if _, err := Compile(CompileInput{ID: "c", Request: r, Engaged: true, Stamps: stamps, Owner: owner.Record}); err != nil {
				b.Fatal(err)
			}
		}
	})
	fr, _ := ParseRequest(folded)
	fall := stampsFor(fr)
	for k, s := range fall {
		s.Chain = Digest{1} // minted under another prefix
		fall[k] = s
	}
	b.Run("compile/all-stripped", func(b *testing.B) {
		var p Parser
		b.SetBytes(int64(len(folded)))
		b.ReportAllocs()
		for b.Loop() {
			c, out, err := compileBody(&p, folded, fall, owner.Record)
			if err != nil || len(c.Strips) == 0 || len(out) >= len(folded) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCompileGrowing: a conversation of N then N+1 messages, each
// compiled with the state the one before left (owner = the previous
// compile): the per-request cost grows linearly with the conversation.
func BenchmarkCompileGrowing(b *testing.B) {
	for _, n := range []int{100, 200, 400, 800} {
		prev := genRequestPrefix(42, n, n+1)
		next := genRequestPrefix(42, n+1, n+1)
		pr, err := ParseRequest(prev)
		if err != nil {
			b.Fatal(err)
		}
		all := stampsFor(pr)
		owner, _ := Compile(CompileInput{ID: "o", Request: pr, Engaged: true, Stamps: StampsFor(pr, all)})
		nr, _ := ParseRequest(next)
		for k, s := range stampsFor(nr) {
			if _, ok := all[k]; !ok {
				all[k] = s
			}
		}
		for _, body := range [][]byte{prev, next} {
			b.Run(fmt.Sprintf("bytes=%d/json.Valid", len(body)), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					json.Valid(body)
				}
			})
			b.Run(fmt.Sprintf("bytes=%d/compile", len(body)), func(b *testing.B) {
				var p Parser
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := compileBody(&p, body, all, owner.Record); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCompileAfterCompaction: the decision on a ~1 MB request whose
// first two messages were swapped for an on-demand compaction block, every
// later turn kept (the worst case for keptChains: every thinking block needs
// the expanded chain), against the same decision on the request before the
// swap (steady state), in the same run.
func BenchmarkCompileAfterCompaction(b *testing.B) {
	body := genRequest(42, 500)
	orig, err := ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	all := stampsFor(orig)
	var top map[string]any
	if err := json.Unmarshal(body, &top); err != nil {
		b.Fatal(err)
	}
	msgs := top["messages"].([]any)
	comp := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "compaction", "content": "summary", "signature": "sig"}}}
	top["messages"] = append([]any{comp}, msgs[2:]...)
	swappedBody, _ := json.Marshal(top)
	swapped, err := ParseRequest(swappedBody)
	if err != nil {
		b.Fatal(err)
	}
	key := swapped.Messages[0].Blocks[0].Digest
	comps := map[Digest]Compaction{key: {Key: key, Chain: orig.Messages[1].End, Seed: orig.Seed, LastRole: orig.Messages[1].Role}}
	kept := 0
	for _, m := range swapped.Messages {
		for _, bl := range m.Blocks {
			if isThinking(bl.Kind) && bl.Signed {
				kept++
			}
		}
	}
	b.Run("decide-only/before-swap", func(b *testing.B) {
		b.ReportAllocs()
		stamps := StampsFor(orig, all)
		for b.Loop() {
			if c, err := Compile(CompileInput{ID: "c", Request: orig, Engaged: true, Stamps: stamps}); err != nil || len(c.Strips) != 0 {
				b.Fatal(err, c.Strips)
			}
		}
	})
	b.Run("decide-only/after-swap", func(b *testing.B) {
		b.ReportAllocs()
		stamps := StampsFor(swapped, all)
		for b.Loop() {
			c, err := Compile(CompileInput{ID: "c", Request: swapped, Engaged: true, Stamps: stamps, Compactions: comps})
			if err != nil || len(c.Strips) != 0 || len(c.Kept) != kept {
				b.Fatal(err, len(c.Strips), len(c.Kept), kept)
			}
		}
	})
}

// BenchmarkDecideMemory: the decision alone on a long conversation's
// request (2,500 messages, every block stamped), in one DecideMemory
// reused turn after turn as the daemon does, against a fresh decision
// each time (the simplest baseline), alternated in every iteration:
// ratio is reused ÷ fresh.
func BenchmarkDecideMemory(b *testing.B) {
	r, err := ParseRequest(genRequest(42, 2500))
	if err != nil {
		b.Fatal(err)
	}
	all := stampsFor(r)
	owner, _ := Compile(CompileInput{ID: "o", Request: r, Engaged: true, Stamps: StampsFor(r, all)})
	in := CompileInput{ID: "c", Request: r, Engaged: true, Stamps: StampsFor(r, all), Owner: owner.Record}
	var mem DecideMemory
	var fresh, reused time.Duration
	for b.Loop() {
		t0 := time.Now()
		in.Memory = nil
		if _, err := Compile(in); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		in.Memory = &mem
		if _, err := Compile(in); err != nil {
			b.Fatal(err)
		}
		fresh += t1.Sub(t0)
		reused += time.Since(t1)
	}
	b.ReportMetric(float64(reused)/float64(fresh), "ratio")
	b.ReportMetric(float64(reused.Microseconds())/float64(b.N), "reused-µs/op")
	b.ReportMetric(float64(fresh.Microseconds())/float64(b.N), "fresh-µs/op")
}
