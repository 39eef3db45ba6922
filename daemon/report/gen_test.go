package report

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/my-pi/bindery/watcher"
)

// genSession writes a session whose structure is known: one cycle per
// entry of lens (a user text message, then that many completed assistant
// turns joined by tool results), thinking of thinkChars on every turn,
// and a prompt that grows by a fixed step per turn and is read from cache
// except at the request numbers in breaks, where the cache read falls to 0.
func genSession(id, model string, lens []int, thinkChars int, breaks map[int]bool, withCost bool) SessionInput {
	var b builder
	b.add(watcher.Entry{ID: id + "-mc", Type: "model_change", ModelID: model}, "-")
	n := 0
	var prompt int64 = 4000
	var prevPrompt int64
	for c, l := range lens {
		b.user(fmt.Sprintf("%s-u%d", id, c), "")
		for k := 1; k <= l; k++ {
			n++
			prompt += 700
			a := asst{model: model, stop: "toolUse", in: 3, out: 200, think: []int{thinkChars},
				ts: fmt.Sprintf("2026-11-01T10:%02d:%02dZ", (n/60)%60, n%60)}
			if k == l {
				a.stop = "stop"
			}
			if n == 1 || breaks[n] {
				a.cr, a.cw = 0, prompt-3
			} else {
				a.cr, a.cw = prevPrompt, prompt-3-prevPrompt
			}
			if withCost {
				a.cost = &watcher.Cost{Input: f64(float64(a.in) * 3e-6), Output: f64(float64(a.out) * 15e-6),
					CacheRead: f64(float64(a.cr) * 0.3e-6), CacheWrite: f64(float64(a.cw) * 3.75e-6)}
			}
			b.assistant(fmt.Sprintf("%s-a%d", id, n), "", a)
			if a.stop == "toolUse" {
				b.toolResult(fmt.Sprintf("%s-t%d", id, n))
			}
			prevPrompt = prompt
		}
	}
	return SessionInput{Session: id, Entries: b.entries}
}

// randomLens draws cycle lengths mostly short, some past 16, rarely past 130.
func randomLens(rng *rand.Rand, cycles int) []int {
	lens := make([]int, cycles)
	for i := range lens {
		switch x := rng.IntN(100); {
		case x < 2:
			lens[i] = 131 + rng.IntN(20)
		case x < 20:
			lens[i] = 17 + rng.IntN(30)
		default:
			lens[i] = 1 + rng.IntN(8)
		}
	}
	return lens
}

func nearestRank(vals []int, q float64) int {
	s := append([]int(nil), vals...)
	sort.Ints(s)
	r := int(q*float64(len(s)) + 0.999999999)
	return s[max(r, 1)-1]
}
