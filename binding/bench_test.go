package binding

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkParse1MB compares the whole parse (scan, canonicalize, SHA-256 of
// every frame and block, the chain) with json.Valid over the same bytes, in
// the same run: a realistic ~1 MB request of 500 messages.
func BenchmarkParse1MB(b *testing.B) {
	body := genRequest(42, 500)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("ParseRequest", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parser.Parse(reused)", func(b *testing.B) {
		var p Parser
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Parse(body); err != nil {
				b.Fatal(err)
			}
		}
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
		for b.Loop() {
			Rewrite(body, r, strip, nil)
		}
	})
	b.Run("SentChain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.SentChain(func(i int) bool { return i == 3 })
		}
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
				for b.Loop() {
					if _, err := p.Parse(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
