package report

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// cachedSummary is what the db's per-session cache holds.
type cachedSummary struct {
	stamp string
	sum   Summary
}

// incrementalReport is the report loop the daemon runs: reuse each
// session's cached summary while its stamp holds, analyse the others, then
// merge. It returns how many sessions it analysed.
func incrementalReport(inputs []SessionInput, cache map[string]cachedSummary, prices *Prices) (Report, int) {
	sums := make([]Summary, 0, len(inputs))
	analysed := 0
	for i := range inputs {
		in := &inputs[i]
		stamp := Stamp(strconv.Itoa(len(in.Entries)), int64(len(in.Compiles)), prices)
		c, ok := cache[in.Session]
		if !ok || c.stamp != stamp {
			c = cachedSummary{stamp: stamp, sum: Analyze(*in, prices).Summary}
			cache[in.Session] = c
			analysed++
		}
		sums = append(sums, c.sum)
	}
	return ArchiveReport(sums, prices), analysed
}

func benchArchive(n int) []SessionInput {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]SessionInput, n)
	for i := range out {
		lens := randomLens(rng, 3+rng.IntN(10))
		breaks := map[int]bool{5: true, 40: true}
		out[i] = genSession(fmt.Sprintf("s%04d", i), "claude-sonnet-4-5", lens, 800, breaks, i%2 == 0)
	}
	return out
}

// BenchmarkReport measures a report over 1,000 sessions from cold, then
// again after 10 more sessions are added (the 1,000 summaries cached), and
// the two baselines the second is made of: analysing the 10 new sessions
// alone, and merging 1,010 cached summaries alone.
func BenchmarkReport(b *testing.B) {
	prices := DefaultPrices()
	archive := benchArchive(1010)
	first, added := archive[:1000], archive[1000:]
	entries := 0
	for _, s := range first {
		entries += len(s.Entries)
	}
	b.Logf("archive: 1000 sessions, %d entries", entries)

	b.Run("cold-1000", func(b *testing.B) {
		for b.Loop() {
			cache := make(map[string]cachedSummary, 1010)
			if _, n := incrementalReport(first, cache, prices); n != 1000 {
				b.Fatalf("analysed %d", n)
			}
		}
	})
	b.Run("plus-10", func(b *testing.B) {
		cache := make(map[string]cachedSummary, 1010)
		incrementalReport(first, cache, prices)
		for b.Loop() {
			if _, n := incrementalReport(archive, cache, prices); n != 10 {
				b.Fatalf("analysed %d, want 10", n)
			}
			b.StopTimer()
			for _, s := range added {
				delete(cache, s.Session)
			}
			b.StartTimer()
		}
	})
	b.Run("baseline-analyse-10", func(b *testing.B) {
		for b.Loop() {
			for _, s := range added {
				Analyze(s, prices)
			}
		}
	})
	b.Run("baseline-merge-1010", func(b *testing.B) {
		sums := make([]Summary, len(archive))
		for i, s := range archive {
			sums[i] = Analyze(s, prices).Summary
		}
		b.ResetTimer()
		for b.Loop() {
			ArchiveReport(sums, prices)
		}
	})
}
