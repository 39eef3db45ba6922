package binding

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// loopCPU runs f b.N times (via b.Loop) and reports CPU ns/op.
func loopCPU(b *testing.B, f func()) {
	n := 0
	start := cpuTime()
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
}

// BenchmarkParse1MB compares the whole parse (scan, canonicalize, SHA-256 of
// every frame and block, the chain) with json.Valid over the same bytes, in
// the same run: a realistic ~1 MB request of 500 messages.
func BenchmarkParse1MB(b *testing.B) {
	body := genRequest(42, 500)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		loopCPU(b, func() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		})
	})
	b.Run("ParseRequest", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		loopCPU(b, func() {
			if _, err := ParseRequest(body); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Parser.Parse(reused)", func(b *testing.B) {
		var p Parser
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		loopCPU(b, func() {
			if _, err := p.Parse(body); err != nil {
				b.Fatal(err)
			}
		})
	})
	r, err := ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	last := len(r.Messages) - 1
	for last >= 0 && r.Messages[last].Role != "assistant" {
		last--
	}
	// Strip every thinking block but the latest assistant message's.
	strip := func(i, j int) bool {
		k := r.Messages[i].Blocks[j].Kind
		return i != last && (k == KindThinking || k == KindRedacted)
	}
	b.Run("Rewrite", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		loopCPU(b, func() { Rewrite(body, r, strip, nil) })
	})
	b.Run("SentChain", func(b *testing.B) {
		b.ReportAllocs()
		loopCPU(b, func() { r.SentChain(func(i int) bool { return i == 3 }) })
	})
}

// BenchmarkGrowing parses a conversation of N and then N+1 messages (the
// next request of the same conversation), for growing N: the cost of a
// fresh parse grows linearly with the conversation.
func BenchmarkGrowing(b *testing.B) {
	for _, n := range []int{50, 100, 200, 400, 800} {
		for _, k := range []int{n, n + 1} {
			body := genRequest(42, k)
			b.Run(fmt.Sprintf("msgs=%d", k), func(b *testing.B) {
				var p Parser
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				loopCPU(b, func() {
					if _, err := p.Parse(body); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// BenchmarkNextRequest is the steady state of a conversation: each
// iteration parses the next request of a growing conversation (one more
// message than the last; the previous last message also changes, as it loses
// its cache marker), with a Parser reused across calls, without and with a
// Memo primed by the request before. json.Valid over the same bytes is the
// baseline.
func BenchmarkNextRequest(b *testing.B) {
	const k = 32
	for _, n := range []int{100, 500} {
		prime := genRequest(42, n)
		var bodies [][]byte
		size := 0
		for i := range k {
			bodies = append(bodies, genRequest(42, n+1+i))
			size += len(bodies[i])
		}
		b.Run(fmt.Sprintf("msgs=%d/json.Valid", n), func(b *testing.B) {
			b.SetBytes(int64(size / k))
			i := 0
			loopCPU(b, func() { json.Valid(bodies[i%k]); i++ })
		})
		b.Run(fmt.Sprintf("msgs=%d/no-memo", n), func(b *testing.B) {
			var p Parser
			b.SetBytes(int64(size / k))
			b.ReportAllocs()
			i := 0
			loopCPU(b, func() {
				if _, err := p.Parse(bodies[i%k]); err != nil {
					b.Fatal(err)
				}
				i++
			})
		})
		b.Run(fmt.Sprintf("msgs=%d/memo", n), func(b *testing.B) {
			var p Parser
			b.SetBytes(int64(size / k))
			b.ReportAllocs()
			misses := 0
			var cpu time.Duration
			t0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if i%k == 0 {
					b.StopTimer()
					cpu += cpuTime() - t0
					if p.Memo != nil {
						_, m := p.Memo.Stats()
						misses += m
					}
					p.Memo = &Memo{}
					if _, err := p.Parse(prime); err != nil {
						b.Fatal(err)
					}
					_, m := p.Memo.Stats()
					misses -= m
					t0 = cpuTime()
					b.StartTimer()
				}
				if _, err := p.Parse(bodies[i%k]); err != nil {
					b.Fatal(err)
				}
			}
			cpu += cpuTime() - t0
			_, m := p.Memo.Stats()
			b.ReportMetric(float64(misses+m)/float64(b.N), "misses/op")
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
