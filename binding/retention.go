package binding

import (
	"iter"
	"slices"
)

// How many compiles a conversation remembers: the one retention policy,
// which the daemon applies to its mirror (and so to its rows) and the
// simulator to its own. design/binding.md asks for at least the
// MinRemembered most recent unaccepted compiles per branch; beyond that
// the bounds are settings (Retention).

// MinRemembered is how many of a branch's most recent unaccepted compiles
// bindery remembers at least.
const MinRemembered = 32

// Retention bounds what a conversation remembers of its compiles.
type Retention struct {
	PerBranch       int // newest unaccepted compiles kept per branch (>= MinRemembered), and accepted records per branch
	PerConversation int // and at most this many unaccepted per conversation
	// AcceptedRecords bounds the accepted records a conversation keeps
	// (pi makes every leaf a branch, so a per-branch bound alone would
	// keep a record per turn); Tombstones bounds the accepted compiles
	// remembered at all (a repeated accept of an older one is a 404).
	AcceptedRecords int
	Tombstones      int
}

// DefaultRetention keeps twice the minimum per branch.
var DefaultRetention = Retention{PerBranch: 64, PerConversation: 1024, AcceptedRecords: 256, Tombstones: 10000}

// Normalized raises each bound to what the others and the design require,
// and fills zero bounds with DefaultRetention's.
func (k Retention) Normalized() Retention {
	if k.PerBranch <= 0 {
		k.PerBranch = DefaultRetention.PerBranch
	}
	k.PerBranch = max(k.PerBranch, MinRemembered)
	if k.PerConversation <= 0 {
		k.PerConversation = DefaultRetention.PerConversation
	}
	k.PerConversation = max(k.PerConversation, k.PerBranch)
	if k.AcceptedRecords <= 0 {
		k.AcceptedRecords = DefaultRetention.AcceptedRecords
	}
	k.AcceptedRecords = max(k.AcceptedRecords, k.PerBranch)
	if k.Tombstones <= 0 {
		k.Tombstones = DefaultRetention.Tombstones
	}
	k.Tombstones = max(k.Tombstones, k.AcceptedRecords)
	return k
}

// RememberedCompile is what retention needs of a remembered compile.
type RememberedCompile struct {
	ID       string
	Seq      int64
	Branch   string
	Accepted bool
	Record   bool // its record is still held (an accepted compile may be kept as its id alone)
}

// RetentionPlan is what a conversation forgets once a compile is added or
// accepted.
type RetentionPlan struct {
	// DropRecords: accepted compiles whose records go; their ids stay, so
	// a repeated accept still answers 200.
	DropRecords []string
	// Forget: compiles forgotten altogether (an accept of an unaccepted
	// one is a 404 from now on).
	Forget []string
}

// Retain plans what the conversation forgets once next (a compile being
// added, or one being accepted) is committed. compiles yields the
// conversation's remembered compiles (next among them or not); owner is
// the owner of next's branch after the commit, whose record is kept:
//   - unaccepted compiles beyond the newest PerBranch of their branch or
//     PerConversation of the conversation are forgotten;
//   - accepted records beyond the newest PerBranch of next's branch (except
//     its owner) or AcceptedRecords of the conversation are dropped (pi
//     makes every leaf a branch, so the per-branch bound alone would keep
//     one per turn), both amortized (below);
//   - accepted compiles beyond the newest Tombstones are forgotten.
//
// Only next's branch is bounded per branch: a branch's bound can only be
// exceeded by a compile added to it. The record bounds are amortized: each
// runs once its bound is overshot by an eighth, and then cuts back to the
// bound, so a long session does not sort its records on every turn: the
// conversation's in pi's sessions (a branch per turn), the branch's in a
// host's that names no branch (one branch for the whole conversation).
// The compile bounds are exact: a repeated accept within Tombstones
// answers 200 and beyond them 404 (--accepted-window), and the newest
// PerBranch unaccepted compiles of a branch can be accepted.
//
// A first pass over compiles only counts: on most compiles and accepts no
// bound is exceeded and nothing is forgotten, and counting allocates
// nothing (this runs on every compile and accept, and a long conversation
// holds thousands of tombstones). Only when a bound is exceeded are
// compiles ranged over again (so compiles must yield the same compiles
// twice) to list and sort where it is.
func Retain(k Retention, compiles iter.Seq[RememberedCompile], next RememberedCompile, owner string) RetentionPlan {
	return RetainCounted(k, CountRetention(compiles, next, owner), compiles, next, owner)
}

// RetainCounted is Retain given the counts CountRetention would return
// (n), which a caller may keep as its compiles change instead of having
// them counted on every compile and accept: compiles are then ranged over
// only when a bound is exceeded.
func RetainCounted(k Retention, n RetentionCounts, compiles iter.Seq[RememberedCompile], next RememberedCompile, owner string) RetentionPlan {
	k = k.Normalized()
	if !k.exceeded(n) {
		return RetentionPlan{}
	}
	return retainListed(k, compiles, next, owner)
}

// RetentionCounts is what Retain counts of a conversation's compiles, next
// in its state after the commit.
type RetentionCounts struct {
	BranchUnaccepted int // unaccepted compiles on next's branch
	Unaccepted       int // unaccepted compiles
	BranchRecords    int // accepted compiles with their record, on next's branch, but its owner
	Records          int // accepted compiles with their record
	Tombstones       int // accepted compiles
}

// CountRetention counts compiles (next among them or not, and next in its
// new state) as Retain does before deciding anything.
func CountRetention(compiles iter.Seq[RememberedCompile], next RememberedCompile, owner string) RetentionCounts {
	var n RetentionCounts
	for c := range compiles {
		if c.ID != next.ID {
			n.Add(c, next.Branch, owner, 1)
		}
	}
	n.Add(next, next.Branch, owner, 1)
	return n
}

// Add counts c (sign 1) or takes it out (sign -1) as CountRetention counts
// it for a compile on branch whose owner is owner ("": none): the one place a
// compile's kind (unaccepted, accepted with its record, tombstone) is
// decided, for CountRetention and for a caller keeping counts
// (daemon/retention_tally.go).
func (n *RetentionCounts) Add(c RememberedCompile, branch, owner string, sign int) {
	switch {
	case !c.Accepted:
		n.Unaccepted += sign
		if c.Branch == branch {
			n.BranchUnaccepted += sign
		}
	case c.Record:
		n.Records += sign
		n.Tombstones += sign
		if c.Branch == branch && (owner == "" || c.ID != owner) {
			n.BranchRecords += sign
		}
	default:
		n.Tombstones += sign
	}
}

// exceeded is whether Retain forgets or drops anything at counts n (k
// normalized): the compile bounds exactly, the record bounds once
// overshot by an eighth.
func (k Retention) exceeded(n RetentionCounts) bool {
	return n.BranchUnaccepted > k.PerBranch || n.Unaccepted > k.PerConversation || n.Tombstones > k.Tombstones ||
		n.BranchRecords > k.PerBranch+k.PerBranch/8 || n.Records > k.AcceptedRecords+k.AcceptedRecords/8
}

// retainListed is Retain's plan from the lists themselves (k normalized).
func retainListed(k Retention, compiles iter.Seq[RememberedCompile], next RememberedCompile, owner string) RetentionPlan {
	// Only ids and seqs go into the bounded lists: a long conversation holds
	// thousands of tombstones, and this runs on every compile and accept.
	type item struct {
		id  string
		seq int64
	}
	var brUnacc, unacc, brRec, rec, tombs []item
	visit := func(c RememberedCompile) {
		it := item{c.ID, c.Seq}
		switch {
		case !c.Accepted:
			unacc = append(unacc, it)
			if c.Branch == next.Branch {
				brUnacc = append(brUnacc, it)
			}
		case c.Record:
			rec = append(rec, it)
			if c.Branch == next.Branch && c.ID != owner {
				brRec = append(brRec, it)
			}
			tombs = append(tombs, it)
		default:
			tombs = append(tombs, it)
		}
	}
	for c := range compiles {
		if c.ID != next.ID {
			visit(c)
		}
	}
	visit(next)
	// beyond returns the items older than the newest n.
	beyond := func(items []item, n int) []item {
		if len(items) <= n {
			return nil
		}
		slices.SortFunc(items, func(a, b item) int {
			switch {
			case a.seq > b.seq:
				return -1
			case a.seq < b.seq:
				return 1
			}
			return 0
		})
		return items[n:]
	}
	gone := map[string]bool{}
	var plan RetentionPlan
	forget := func(items []item) {
		for _, it := range items {
			if !gone[it.id] {
				gone[it.id] = true
				plan.Forget = append(plan.Forget, it.id)
			}
		}
	}
	forget(beyond(brUnacc, k.PerBranch))
	forget(beyond(unacc, k.PerConversation))
	forget(beyond(tombs, k.Tombstones))
	dropped := map[string]bool{}
	drop := func(items []item) {
		for _, it := range items {
			if !gone[it.id] && !dropped[it.id] {
				dropped[it.id] = true
				plan.DropRecords = append(plan.DropRecords, it.id)
			}
		}
	}
	if len(brRec) > k.PerBranch+k.PerBranch/8 {
		drop(beyond(brRec, k.PerBranch))
	}
	if len(rec) > k.AcceptedRecords+k.AcceptedRecords/8 {
		drop(beyond(rec, k.AcceptedRecords))
	}
	return plan
}
