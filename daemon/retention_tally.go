package daemon

import (
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// retentionTally keeps what binding.CountRetention counts of a
// conversation's compiles as they change, so that a compile or an accept
// does not count every compile the conversation remembers (up to
// Retention.Tombstones, 10,000 by default) to learn that no bound is
// exceeded. Every change to c.compiles goes through the conv methods
// below, which keep it; TestRetentionTally checks it against a count.
type retentionTally struct {
	unaccepted, records, tombstones int
	branches                        map[string]*branchTally
}

type branchTally struct{ unaccepted, records int }

// add counts e (sign 1) or takes it out (sign -1).
func (t *retentionTally) add(e *compileEntry, sign int) {
	if t.branches == nil {
		t.branches = map[string]*branchTally{}
	}
	b := t.branches[e.branch]
	if b == nil {
		b = &branchTally{}
		t.branches[e.branch] = b
	}
	switch {
	case !e.accepted:
		t.unaccepted += sign
		b.unaccepted += sign
	case e.rec != nil:
		t.records += sign
		b.records += sign
		t.tombstones += sign
	default:
		t.tombstones += sign
	}
	if b.unaccepted == 0 && b.records == 0 {
		delete(t.branches, e.branch)
	}
}

// retentionCounts is binding.CountRetention over the mirror, next (id
// nextID) in its state after the commit and owner the owner of next's
// branch then.
func (c *conv) retentionCounts(nextID string, next compileEntry, owner string) binding.RetentionCounts {
	t := &c.tally
	n := binding.RetentionCounts{Unaccepted: t.unaccepted, Records: t.records, Tombstones: t.tombstones}
	if b := t.branches[next.branch]; b != nil {
		n.BranchUnaccepted, n.BranchRecords = b.unaccepted, b.records
	}
	apply := func(e *compileEntry, sign int) {
		switch {
		case !e.accepted:
			n.Unaccepted += sign
			if e.branch == next.branch {
				n.BranchUnaccepted += sign
			}
		case e.rec != nil:
			n.Records += sign
			n.Tombstones += sign
			if e.branch == next.branch {
				n.BranchRecords += sign
			}
		default:
			n.Tombstones += sign
		}
	}
	if old := c.compiles[nextID]; old != nil {
		apply(old, -1)
	}
	apply(&next, 1)
	// The owner's record is not among the branch's records Retain may drop.
	own := c.compiles[owner]
	if owner == nextID {
		own = &next
	}
	if owner != "" && own != nil && own.accepted && own.rec != nil && own.branch == next.branch {
		n.BranchRecords--
	}
	return n
}

// setCompiles replaces the mirror's compiles (a load).
func (c *conv) setCompiles(m map[string]*compileEntry) {
	c.compiles, c.tally = m, retentionTally{}
	for _, e := range m {
		c.tally.add(e, 1)
	}
}

// addCompile mirrors a compile just stored.
func (c *conv) addCompile(id string, e *compileEntry) {
	if old := c.compiles[id]; old != nil {
		c.tally.add(old, -1)
	}
	c.compiles[id] = e
	c.tally.add(e, 1)
}

// markAccepted mirrors an accept just committed: e accepted, holding rec.
func (c *conv) markAccepted(e *compileEntry, stamped, released int, rec *binding.CompileRecord) {
	c.tally.add(e, -1)
	e.accepted, e.stamped, e.released, e.rec = true, stamped, released, rec
	c.tally.add(e, 1)
}

// setRecord mirrors a record stored again (a refusal marked), or dropped
// (nil).
func (c *conv) setRecord(e *compileEntry, rec *binding.CompileRecord, chunks []db.ChunkHash) {
	c.tally.add(e, -1)
	e.rec, e.chunks = rec, chunks
	c.tally.add(e, 1)
}

// forgetCompile mirrors a compile forgotten.
func (c *conv) forgetCompile(id string) {
	if e := c.compiles[id]; e != nil {
		c.tally.add(e, -1)
		delete(c.compiles, id)
	}
}
