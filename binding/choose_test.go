package binding

import (
	"math/rand/v2"
	"testing"
)

// chooseReference is choose as it was, with an index of every candidate's
// key built each round: the reference TestChooseIsReference holds the
// choose that builds the index only when a pred is not its neighbour's
// key to.
func (d *decider) chooseReference() {
	n := len(d.tb)
	parent := make([]int, n)
	depth := make([]int, n)
	idx := make(map[Digest]int, n)
	cand := func(i int) bool { t := &d.tb[i]; return t.reason == "" && !t.unreadable }
	for i := 0; i < n; i++ {
		parent[i] = -1
		if !cand(i) {
			continue
		}
		t := &d.tb[i]
		if p, ok := idx[t.pred]; ok && !t.pred.IsZero() {
			parent[i] = p
			depth[i] = depth[p] + 1
		} else {
			depth[i] = 1
		}
		idx[t.key] = i
	}
	// The latest assistant message's thinking blocks: the last ones.
	lfrom := n
	for lfrom > 0 && d.tb[lfrom-1].msg == d.latest {
		lfrom--
	}
	end := -1
	if lfrom < n {
		whole := true
		for i := lfrom; i < n; i++ {
			if !cand(i) || (i > lfrom && parent[i] != i-1) {
				whole = false
				break
			}
		}
		if whole {
			end = n - 1
		}
	}
	if end < 0 {
		best := 0
		for i := 0; i < lfrom; i++ {
			if cand(i) && depth[i] >= best {
				best, end = depth[i], i
			}
		}
	}
	for i := end; i >= 0; i = parent[i] {
		d.tb[i].kept = true
	}
	for i := range d.tb {
		t := &d.tb[i]
		if t.reason == "" && !t.kept {
			if t.unreadable {
				t.kept = true // non-binding target: outside the run
			} else {
				t.reason = ReasonGap
			}
		}
	}
	// A kept unreadable block in the latest assistant message would be a
	// partial keep there if the rest went: the message has one minting
	// model, so this only guards a host that spliced messages.
	if lfrom < n {
		any, all := false, true
		for i := lfrom; i < n; i++ {
			if d.tb[i].kept {
				any = true
			} else {
				all = false
			}
		}
		if any && !all {
			for i := lfrom; i < n; i++ {
				if t := &d.tb[i]; t.kept {
					t.kept, t.reason = false, ReasonGap
				}
			}
		}
	}
}

// TestChooseIsReference: on random block tables (chains, forks back to
// any earlier block, repeated keys, blocks that are not candidates, the
// latest message's blocks), choose keeps and strips exactly what
// chooseReference does, in a DecideMemory reused throughout.
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
		msg := 0
		for i := range tb {
			if rng.IntN(3) == 0 {
				msg++
			}
			b := tblock{msg: msg, blk: i, key: keys[rng.IntN(len(keys))], reason: reasons[rng.IntN(len(reasons))], unreadable: rng.IntN(12) == 0}
			switch r := rng.IntN(10); {
			case i > 0 && r < 6:
				b.pred = tb[i-1].key // a chain
			case i > 0 && r < 9:
				b.pred = tb[rng.IntN(i)].key // a fork back
			}
			tb[i] = b
		}
		latest := msg
		if rng.IntN(4) == 0 {
			latest = -1
		}
		got := &decider{tb: append([]tblock(nil), tb...), latest: latest, mem: &mem}
		want := &decider{tb: append([]tblock(nil), tb...), latest: latest}
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
