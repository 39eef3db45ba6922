package binding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRetain(t *testing.T) {
	var cs []RememberedCompile
	for i := 1; i <= 40; i++ {
		cs = append(cs, RememberedCompile{ID: fmt.Sprint("u", i), Seq: int64(i), Branch: "b"})
	}
	for i := 41; i <= 80; i++ {
		cs = append(cs, RememberedCompile{ID: fmt.Sprint("a", i), Seq: int64(i), Branch: "b", Accepted: true, Record: true})
	}
	k := Retention{PerBranch: MinRemembered}
	plan := Retain(k, slices.Values(cs), cs[len(cs)-1], "a41")
	var wantForget, wantDrop []string
	for i := 8; i >= 1; i-- {
		wantForget = append(wantForget, fmt.Sprint("u", i))
	}
	// accepted 80..49 keep their records (32), 48..42 are kept by id, owner a41 whole
	for i := 48; i >= 42; i-- {
		wantDrop = append(wantDrop, fmt.Sprint("a", i))
	}
	for _, l := range [][]string{plan.Forget, plan.DropRecords, wantForget, wantDrop} {
		slices.Sort(l)
	}
	if !slices.Equal(plan.Forget, wantForget) || !slices.Equal(plan.DropRecords, wantDrop) {
		t.Fatalf("forget %v drop %v\nwant %v and %v", plan.Forget, plan.DropRecords, wantForget, wantDrop)
	}
	if p := Retain(k, slices.Values(cs[:MinRemembered-1]), cs[MinRemembered-1], ""); len(p.Forget)+len(p.DropRecords) != 0 {
		t.Fatalf("32 unaccepted must all be kept: %+v", p)
	}
	if p := Retain(k, slices.Values(cs[:MinRemembered]), cs[MinRemembered], ""); !slices.Equal(p.Forget, []string{"u1"}) {
		t.Fatalf("33: %+v", p)
	}
}

// TestRetainBounds: each bound of the policy, one at a time.
func TestRetainBounds(t *testing.T) {
	mk := func(n int, branch string, accepted, record bool, from int) []RememberedCompile {
		var out []RememberedCompile
		for i := 0; i < n; i++ {
			out = append(out, RememberedCompile{ID: fmt.Sprintf("%s%d", branch, from+i), Seq: int64(from + i), Branch: branch, Accepted: accepted, Record: record})
		}
		return out
	}
	// another branch's unaccepted compiles count only toward the
	// conversation's bound
	cs := append(mk(40, "other", false, false, 1), mk(10, "b", false, false, 100)...)
	if p := Retain(Retention{PerBranch: 32, PerConversation: 48}, slices.Values(cs), cs[len(cs)-1], ""); !slices.Equal(sorted(p.Forget), []string{"other1", "other2"}) {
		t.Fatalf("per conversation: %+v", p)
	}
	// the conversation's accepted records: amortized past an eighth over the bound
	recs := mk(35, "r", true, true, 1)
	k := Retention{PerBranch: 32, AcceptedRecords: 32, Tombstones: 1000}
	if p := Retain(k, slices.Values(recs), RememberedCompile{ID: "n", Seq: 100, Branch: "n", Accepted: true, Record: true}, "n"); len(p.DropRecords) != 0 {
		t.Fatalf("within the eighth: %+v", p)
	}
	recs = mk(36, "r", true, true, 1)
	if p := Retain(k, slices.Values(recs), RememberedCompile{ID: "n", Seq: 100, Branch: "n", Accepted: true, Record: true}, "n"); !slices.Equal(sorted(p.DropRecords), []string{"r1", "r2", "r3", "r4", "r5"}) {
		t.Fatalf("past the eighth: %+v (want back to 32 of 37)", p)
	}
	// a branch's accepted records (a host that names no branch has one):
	// amortized past an eighth over the bound too, its owner's kept
	br := mk(36, "one", true, true, 1)
	k = Retention{PerBranch: 32, AcceptedRecords: 1000, Tombstones: 1000}
	if p := Retain(k, slices.Values(br), RememberedCompile{ID: "n", Seq: 100, Branch: "one", Accepted: true, Record: true}, "one1"); len(p.DropRecords) != 0 {
		t.Fatalf("branch within the eighth: %+v", p)
	}
	br = mk(38, "one", true, true, 1)
	if p := Retain(k, slices.Values(br), RememberedCompile{ID: "n", Seq: 100, Branch: "one", Accepted: true, Record: true}, "one1"); !slices.Equal(sorted(p.DropRecords), sorted([]string{"one2", "one3", "one4", "one5", "one6", "one7"})) {
		t.Fatalf("branch past the eighth: %+v (want back to 32 of 38 beside the owner)", p)
	}
	// tombstones beyond the bound (raised to MinRemembered) are forgotten
	tombs := mk(40, "t", true, false, 1)
	if p := Retain(Retention{Tombstones: 1, PerBranch: 1, AcceptedRecords: 1}, slices.Values(tombs), tombs[39], ""); !slices.Equal(sorted(p.Forget), sorted([]string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"})) || len(p.DropRecords) != 0 {
		t.Fatalf("tombstones: %+v", p)
	}
}

func TestRetentionNormalized(t *testing.T) {
	if got := (Retention{}).Normalized(); got != DefaultRetention {
		t.Fatalf("zero: %+v", got)
	}
	got := Retention{PerBranch: 1, PerConversation: 1, AcceptedRecords: 1, Tombstones: 1}.Normalized()
	if got.PerBranch != MinRemembered || got.PerConversation != MinRemembered || got.AcceptedRecords != MinRemembered || got.Tombstones != MinRemembered {
		t.Fatalf("raised: %+v", got)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestRetainCountsAgreeWithLists: the counting pass finds a bound
// exceeded exactly when the lists would forget or drop something, over
// random conversations near every bound, so Retain's shortcut never
// changes a plan.
func TestRetainCountsAgreeWithLists(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	k := Retention{PerBranch: MinRemembered, PerConversation: 40, AcceptedRecords: 32, Tombstones: 48}.Normalized()
	branches := []string{"a", "b", "c"}
	exceeded := 0
	for iter := range 4000 {
		var cs []RememberedCompile
		for i := range rng.IntN(90) {
			accepted := rng.IntN(3) > 0
			cs = append(cs, RememberedCompile{ID: fmt.Sprint("c", i), Seq: int64(i + 1), Branch: branches[rng.IntN(len(branches))],
				Accepted: accepted, Record: !accepted || rng.IntN(2) == 0})
		}
		next := RememberedCompile{ID: "next", Seq: 1000, Branch: branches[rng.IntN(len(branches))], Accepted: rng.IntN(2) == 0, Record: true}
		if len(cs) > 0 && rng.IntN(4) == 0 {
			next = cs[rng.IntN(len(cs))] // an accept of a remembered compile
			next.Accepted = true
		}
		owner := ""
		if len(cs) > 0 && rng.IntN(2) == 0 {
			owner = cs[rng.IntN(len(cs))].ID
		}
		listed := retainListed(k, slices.Values(cs), next, owner)
		got := Retain(k, slices.Values(cs), next, owner)
		if !slices.Equal(got.Forget, listed.Forget) || !slices.Equal(got.DropRecords, listed.DropRecords) {
			t.Fatalf("iteration %d: Retain %+v, the lists %+v", iter, got, listed)
		}
		if len(listed.Forget)+len(listed.DropRecords) > 0 {
			exceeded++
		}
	}
	if exceeded < 400 || exceeded > 3600 {
		t.Fatalf("%d of 4000 conversations exceeded a bound: the test does not reach both sides", exceeded)
	}
}

// BenchmarkRetain: an accept in a conversation of n remembered compiles
// (accepted, most kept by id), where no bound is exceeded, against the
// lists built as Retain did before it counted first.
func BenchmarkRetain(b *testing.B) {
	for _, n := range []int{400, 4000} {
		var cs []RememberedCompile
		for i := range n {
			cs = append(cs, RememberedCompile{ID: fmt.Sprint("c", i), Seq: int64(i + 1), Branch: fmt.Sprint("leaf", i), Accepted: true, Record: i >= n-200})
		}
		next := RememberedCompile{ID: "next", Seq: int64(n + 1), Branch: "next", Accepted: true, Record: true}
		b.Run(fmt.Sprint("lists/", n), func(b *testing.B) {
			for b.Loop() {
				retainListed(DefaultRetention, slices.Values(cs), next, "next")
			}
		})
		b.Run(fmt.Sprint("retain/", n), func(b *testing.B) {
			for b.Loop() {
				Retain(DefaultRetention, slices.Values(cs), next, "next")
			}
		})
	}
}
