package binding

// Which releases are in force on a branch: the one reading of
// design/binding.md "Branches and forks" that a compile (what it strips),
// the conversation view (what it counts per branch) and the simulator all
// call. The daemon gathers the facts (paths, entries, a fork's ancestry)
// from its database first; deciding from them is here.
//
// Decisions where the design is silent, each pinned by a test in
// reach_test.go:
//   - A release made on the branch being decided (by name) reaches it,
//     whatever the tree says (TestReachesSameBranch).
//   - A release by signature (Branch SignatureBranch) reaches every branch
//     of its conversation (TestReachesSignature).
//   - On a pi tree, a release whose leaf the tree does not show (a leaf
//     never ingested), or any release while the branch's own path is not
//     known (its leaf is not ingested yet and nothing in the request proves
//     an ancestor), reaches: stripping a block the provider would keep costs
//     retention; keeping one it refuses costs the request
//     (TestReachesUnknownPaths).
//   - A released block whose entry is not known is taken as on the path of
//     the leaf it was released at, so only the fork rule decides
//     (TestReachesUnknownEntry).
//   - Off a pi tree, a release on another branch reaches only through a
//     fork named with parent (Forks), up to the release order recorded at
//     the fork; a fork of a fork is bounded by the smaller of the two
//     (TestReleasedOnForkChain). The chain is followed at most MaxForkDepth
//     links.
//   - No gap release reaches a target that does not bind (NotBinding),
//     whoever made it: such a target has no run rule, and a gap release
//     recorded for one before issue 31 would keep a block stripped there
//     for good. The store keeps them (they still reach a target that binds),
//     so a database written before needs no migration
//     (TestReleasedOnNotBinding).

// SignatureBranch is the branch a release by signature is recorded on: it
// scopes the release to every branch of the conversation.
const SignatureBranch = "*"

// MaxForkDepth bounds the fork ancestry ReleasedOn follows.
const MaxForkDepth = 16

// BranchRelease is a release as a conversation recorded it.
type BranchRelease struct {
	Release
	Branch string // the branch it was made on; SignatureBranch: every branch
	Order  int64  // its place in the recording order (forks named with parent inherit by it)
}

// ReleaseTree is what a pi session tree shows, as a release needs it.
type ReleaseTree struct {
	// At is the decided branch's path, root first; nil when it is not
	// known (the leaf is not ingested yet). For a leaf not ingested whose
	// request proves an ancestor, the daemon gives that ancestor's path.
	At []PathEntry
	// Paths holds the path of each leaf a release was made at; a leaf
	// absent from it is not in the tree.
	Paths map[string][]PathEntry
	// Entries holds the session entry holding each released block, where
	// the session file shows it.
	Entries map[Digest]string
}

// Fork is a branch, or a conversation, the decided branch was forked from
// by a host naming parent (or a pi session file naming parentSession):
// its releases recorded up to UpTo (Order) reach the fork.
type Fork struct {
	// Branch restricts the parent's releases to those made on it (and by
	// signature); "" takes every branch of the parent.
	Branch   string
	UpTo     int64 // the parent's release order at the fork; ForkNow for a fork made by this call
	Releases []BranchRelease
	// Parent is the parent's own fork (a fork of a fork), nil at the root.
	Parent *Fork
}

// ForkNow is the UpTo of a fork being made now: it inherits every release
// recorded so far.
const ForkNow int64 = 1<<62 - 1

// ReachInput is what ReleasedOn decides from.
type ReachInput struct {
	Branch   string
	Releases []BranchRelease // the conversation's own
	Tree     *ReleaseTree    // nil: not a pi session tree
	Forks    []*Fork         // forks it descends from, nearest first
	// NotBinding: the decided target does not bind (TargetBinds), so no
	// gap release reaches it: such a target has no run rule and records no
	// gap release (choose.go), and one recorded for it before issue 31, or
	// on a target that binds, stands for a run rule it does not have.
	NotBinding bool
}

// ReleasedOn returns which of keys (the thinking blocks a request holds)
// are released on the branch. A nil keys decides every key the releases
// name.
func ReleasedOn(in ReachInput, keys []Digest) map[Digest]bool {
	want := func(Digest) bool { return true }
	if keys != nil {
		if len(keys) == 0 {
			return nil
		}
		var set map[Digest]bool
		want = func(k Digest) bool {
			// made at the first release: a long conversation's request
			// has thousands of keys, and most conversations no release
			if set == nil {
				set = make(map[Digest]bool, len(keys))
				for _, x := range keys {
					set[x] = true
				}
			}
			return set[k]
		}
	}
	out := map[Digest]bool{}
	for _, r := range in.Releases {
		if in.NotBinding && r.Reason == string(ReasonGap) {
			continue
		}
		if want(r.Key) && !out[r.Key] && Reaches(r, in.Branch, in.Tree) {
			out[r.Key] = true
		}
	}
	for _, f := range in.Forks {
		upTo := ForkNow
		for depth := 0; f != nil && depth < MaxForkDepth; depth++ {
			upTo = min(upTo, f.UpTo)
			for _, r := range f.Releases {
				if in.NotBinding && r.Reason == string(ReasonGap) {
					continue
				}
				if want(r.Key) && r.Order <= upTo && (f.Branch == "" || r.Branch == f.Branch || r.Branch == SignatureBranch) {
					out[r.Key] = true
				}
			}
			f = f.Parent
		}
	}
	return out
}

// Reaches reports whether one release of the conversation applies on the
// branch (not through a fork: ReleasedOn adds those).
func Reaches(r BranchRelease, branch string, tree *ReleaseTree) bool {
	switch {
	case r.Branch == branch || r.Branch == SignatureBranch:
		return true
	case tree == nil:
		return false
	case tree.At == nil:
		return true
	}
	madeOn, ok := tree.Paths[r.Branch]
	if !ok || len(madeOn) == 0 {
		return true
	}
	entry, ok := tree.Entries[r.Key]
	if !ok {
		entry = madeOn[len(madeOn)-1].ID
	}
	return ReleaseReaches(madeOn, entry, r.Seq, tree.At)
}

// PathEntry is one entry on a pi branch's path from the root, with the
// daemon's ingest sequence for it (the order bindery ingested entries in,
// not their timestamps).
type PathEntry struct {
	ID  string
	Seq int64
}

// ReleaseReaches decides, for pi's session tree, whether a release made on
// the branch ending at leaf L applies to a compile at leaf L'
// (design/binding.md "Branches and forks"):
//
//	madeOn:   L's path, root first;
//	released: the entry id of the message that holds the block;
//	seq:      the daemon's sequence when the release was recorded;
//	at:       L''s path, root first (for a leaf not ingested yet, the path of
//	          the deepest known ancestor the request proves).
//
// It applies when the released message is on L's path and either L'
// descends from L (or is L), or the first entry of L' not on L's path was
// ingested after the release. Decision where the design is silent: when L'
// is a proper ancestor of L (the user went back, or the new leaf is not
// ingested yet) it applies, since the entry that will diverge from L is
// necessarily ingested after the release. A released message that is not
// on L's path does not matter to L' either way; this reports it as
// reaching when the rule says so.
func ReleaseReaches(madeOn []PathEntry, released string, seq int64, at []PathEntry) bool {
	on := false
	for _, e := range madeOn {
		if e.ID == released {
			on = true
			break
		}
	}
	if !on {
		return false
	}
	for i, e := range at {
		if i >= len(madeOn) {
			return true // L' descends from L
		}
		if e.ID != madeOn[i].ID {
			return e.Seq > seq // first entry of L' not on L's path
		}
	}
	return true // L' is L or an ancestor of L
}
