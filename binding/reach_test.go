package binding

import (
	"fmt"
	"slices"
	"testing"
)

// path builds root-first paths from "id@seq" names.
func path(names ...string) []PathEntry {
	var out []PathEntry
	for _, n := range names {
		var id string
		var seq int64
		fmt.Sscanf(n, "%1s@%d", &id, &seq)
		out = append(out, PathEntry{ID: id, Seq: seq})
	}
	return out
}

func TestReleaseReachesPiTree(t *testing.T) { // forks inheriting releases
	// Tree: r@1 - a@2 - b@3 - c@4 (leaf L, release made at seq 10 on a@2's block)
	//                      \ x@5 (a branch made before the release)
	//                      \ y@11 (a branch made after the release)
	L := path("r@1", "a@2", "b@3", "c@4")
	for _, c := range []struct {
		name string
		at   []PathEntry
		want bool
	}{
		{"same leaf", L, true},
		{"descendant", append(slices.Clone(L), path("d@12")...), true},
		{"ancestor (leaf not ingested yet, or went back)", path("r@1", "a@2", "b@3"), true},
		{"branch older than the release", path("r@1", "a@2", "x@5"), false},
		{"branch newer than the release", path("r@1", "a@2", "y@11"), true},
		{"branch newer, grown", path("r@1", "a@2", "y@11", "z@12"), true},
		{"fork before the released message", path("r@1", "q@11"), true},
	} {
		if got := ReleaseReaches(L, "a", 10, c.at); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	if ReleaseReaches(L, "x", 10, L) {
		t.Error("a released message not on L's path reaches L")
	}
}

// The tree of TestReleaseReachesPiTree, as the daemon gives it: a release
// recorded at seq 10 on leaf c of the block held by entry a.
func reachTree(at []PathEntry) *ReleaseTree {
	return &ReleaseTree{At: at,
		Paths:   map[string][]PathEntry{"c": path("r@1", "a@2", "b@3", "c@4"), "x": path("r@1", "a@2", "x@5")},
		Entries: map[Digest]string{key("A"): "a"}}
}

func TestReaches(t *testing.T) {
	atC := BranchRelease{Release: Release{Key: key("A"), Seq: 10}, Branch: "c"}
	for _, c := range []struct {
		name   string
		r      BranchRelease
		branch string
		tree   *ReleaseTree
		want   bool
	}{
		// TestReachesSameBranch
		{"same branch, no tree", atC, "c", nil, true},
		{"same branch, entry off the path", BranchRelease{Release: Release{Key: key("A"), Seq: 10}, Branch: "x"}, "x", reachTree(path("r@1", "a@2", "x@5")), true},
		// TestReachesSignature
		{"signature, no tree", BranchRelease{Release: Release{Key: key("A")}, Branch: SignatureBranch}, "other", nil, true},
		{"signature, tree", BranchRelease{Release: Release{Key: key("A")}, Branch: SignatureBranch}, "x", reachTree(path("r@1", "a@2", "x@5")), true},
		// without a tree, another branch's release reaches only by a fork
		{"other branch, no tree", atC, "x", nil, false},
		// the tree's rule
		{"older branch", atC, "x", reachTree(path("r@1", "a@2", "x@5")), false},
		{"newer branch", atC, "y", reachTree(path("r@1", "a@2", "y@11")), true},
		{"descendant", atC, "d", reachTree(path("r@1", "a@2", "b@3", "c@4", "d@12")), true},
		// TestReachesUnknownPaths
		{"branch's own path unknown", atC, "x", reachTree(nil), true},
		{"release's leaf not in the tree", BranchRelease{Release: Release{Key: key("A"), Seq: 10}, Branch: "gone"}, "x", reachTree(path("r@1", "a@2", "x@5")), true},
		// TestReachesUnknownEntry: the block's entry unknown is taken as
		// the release's leaf c, which x does not hold
		{"entry unknown", BranchRelease{Release: Release{Key: key("B"), Seq: 10}, Branch: "c"}, "x", reachTree(path("r@1", "a@2", "x@5")), false},
		{"entry unknown, newer branch", BranchRelease{Release: Release{Key: key("B"), Seq: 10}, Branch: "c"}, "y", reachTree(path("r@1", "a@2", "y@11")), true},
	} {
		if got := Reaches(c.r, c.branch, c.tree); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReleasedOn(t *testing.T) {
	own := []BranchRelease{
		{Release: Release{Key: key("A"), Seq: 10}, Branch: "c", Order: 1},
		{Release: Release{Key: key("S")}, Branch: SignatureBranch, Order: 2},
		{Release: Release{Key: key("O")}, Branch: "other", Order: 3},
	}
	in := ReachInput{Branch: "x", Releases: own, Tree: reachTree(path("r@1", "a@2", "x@5"))}
	got := ReleasedOn(in, []Digest{key("A"), key("S"), key("O"), key("N")})
	if len(got) != 2 || !got[key("S")] || !got[key("O")] {
		t.Fatalf("released on x: %v; want S (signature) and O (a leaf not in the tree)", got)
	}
	if got := ReleasedOn(in, []Digest{}); got != nil {
		t.Fatalf("no keys: %v", got)
	}
	// keys nil decides every key the releases name
	if got := ReleasedOn(ReachInput{Branch: "c", Releases: own}, nil); len(got) != 2 || !got[key("A")] || !got[key("S")] {
		t.Fatalf("all keys on c: %v", got)
	}
}

// TestReleasedOnForkChain: a fork inherits its parent's releases up to the
// fork, a fork of a fork the smaller bound of the two, and ForkNow
// everything recorded so far.
func TestReleasedOnForkChain(t *testing.T) {
	rels := func(branch string, keys ...string) []BranchRelease {
		var out []BranchRelease
		for i, k := range keys {
			out = append(out, BranchRelease{Release: Release{Key: key(k)}, Branch: branch, Order: int64(i + 1)})
		}
		return out
	}
	grand := &Fork{Branch: "main", UpTo: 2, Releases: rels("main", "G1", "G2", "G3")}
	parent := &Fork{UpTo: 1, Releases: rels("p", "P1", "P2"), Parent: grand}
	got := ReleasedOn(ReachInput{Branch: "b", Forks: []*Fork{parent}}, nil)
	// parent up to 1: P1; grandparent up to min(1, 2): G1
	if len(got) != 2 || !got[key("P1")] || !got[key("G1")] {
		t.Fatalf("inherited %v; want P1 and G1", got)
	}
	now := &Fork{Branch: "main", UpTo: ForkNow, Releases: append(rels("main", "M1", "M2"), BranchRelease{Release: Release{Key: key("Z")}, Branch: "elsewhere", Order: 3})}
	got = ReleasedOn(ReachInput{Branch: "b", Forks: []*Fork{now}}, nil)
	if len(got) != 2 || !got[key("M1")] || !got[key("M2")] {
		t.Fatalf("fork now %v; want M1 and M2 (not a release of another branch)", got)
	}
	// a cycle is followed at most MaxForkDepth links
	loop := &Fork{UpTo: ForkNow, Releases: rels("l", "L1")}
	loop.Parent = loop
	if got := ReleasedOn(ReachInput{Branch: "b", Forks: []*Fork{loop}}, nil); len(got) != 1 {
		t.Fatalf("loop: %v", got)
	}
}

// TestReleasedOnNotBinding: a target that does not bind is reached by no
// gap release, on its branch or through a fork; every other release
// reaches it as before, and a gap release still reaches a target that
// binds (issue 31: one recorded for a target that does not bind, under the
// old run rule, kept its block stripped there for good).
func TestReleasedOnNotBinding(t *testing.T) {
	gap, host, prefix, forked := Digest{1}, Digest{2}, Digest{3}, Digest{4}
	in := ReachInput{Branch: "main", Releases: []BranchRelease{
		{Release: Release{Key: gap, Reason: string(ReasonGap)}, Branch: "main", Order: 1},
		{Release: Release{Key: host, Reason: ReleaseHost}, Branch: SignatureBranch, Order: 2},
		{Release: Release{Key: prefix, Reason: string(ReasonPrefixChanged)}, Branch: "main", Order: 3},
	}, Forks: []*Fork{{Branch: "up", UpTo: ForkNow, Releases: []BranchRelease{
		{Release: Release{Key: forked, Reason: string(ReasonGap)}, Branch: "up", Order: 1},
	}}}}
	keys := []Digest{gap, host, prefix, forked}
	all := ReleasedOn(in, keys)
	if len(all) != 4 {
		t.Fatalf("binding target: released %v", all)
	}
	in.NotBinding = true
	got := ReleasedOn(in, keys)
	if len(got) != 2 || !got[host] || !got[prefix] {
		t.Fatalf("target that does not bind: released %v", got)
	}
	if got := ReleasedOn(in, nil); len(got) != 2 {
		t.Fatalf("every key: released %v", got)
	}
}
