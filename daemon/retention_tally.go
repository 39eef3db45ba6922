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
// below, which keep it, and c.recorded; TestRetentionTally checks both
// against a count.
// binding.RetentionCounts.Add decides what each compile counts as.
type retentionTally struct {
	all      binding.RetentionCounts             // the conversation's (its Branch counts unused)
	branches map[string]*binding.RetentionCounts // each branch's Branch counts (the others zero)
}

// add counts e (sign 1) or takes it out (sign -1). Its id does not count:
// the tally leaves out no owner (retentionCounts does).
func (t *retentionTally) add(e *compileEntry, sign int) {
	c := e.remembered("")
	t.all.Add(c, "", "", sign)
	if t.branches == nil {
		t.branches = map[string]*binding.RetentionCounts{}
	}
	b := t.branches[e.branch]
	if b == nil {
		b = &binding.RetentionCounts{}
		t.branches[e.branch] = b
	}
	b.Add(c, e.branch, "", sign)
	b.Unaccepted, b.Records, b.Tombstones = 0, 0, 0 // all's
	if b.BranchUnaccepted == 0 && b.BranchRecords == 0 {
		delete(t.branches, e.branch)
	}
}

// retentionCounts is binding.CountRetention over the mirror, next (id
// nextID) in its state after the commit and owner the owner of next's
// branch then.
func (c *conv) retentionCounts(nextID string, next compileEntry, owner string) binding.RetentionCounts {
	n := c.tally.all
	n.BranchUnaccepted, n.BranchRecords = 0, 0
	if b := c.tally.branches[next.branch]; b != nil {
		n.BranchUnaccepted, n.BranchRecords = b.BranchUnaccepted, b.BranchRecords
	}
	if old := c.compiles[nextID]; old != nil {
		n.Add(old.remembered(nextID), next.branch, "", -1)
	}
	n.Add(next.remembered(nextID), next.branch, "", 1)
	// The owner's record is not among the branch's records Retain may drop.
	own := c.compiles[owner]
	if owner == nextID {
		own = &next
	}
	if owner != "" && own != nil {
		var o binding.RetentionCounts
		o.Add(own.remembered(owner), next.branch, "", 1)
		n.BranchRecords -= o.BranchRecords
	}
	return n
}

// setCompiles replaces the mirror's compiles (a load).
func (c *conv) setCompiles(m map[string]*compileEntry) {
	c.compiles, c.tally, c.recorded = m, retentionTally{}, nil
	for id, e := range m {
		c.tally.add(e, 1)
		c.track(id, e)
	}
}

// addCompile mirrors a compile just stored.
func (c *conv) addCompile(id string, e *compileEntry) {
	if old := c.compiles[id]; old != nil {
		c.tally.add(old, -1)
		delete(c.recorded, old)
	}
	c.compiles[id] = e
	c.tally.add(e, 1)
	c.track(id, e)
}

// markAccepted mirrors an accept just committed: e accepted, holding rec.
func (c *conv) markAccepted(e *compileEntry, stamped, released int, rec *binding.CompileRecord) {
	c.tally.add(e, -1)
	id := c.recorded[e]
	e.accepted, e.stamped, e.released, e.rec = true, stamped, released, rec
	c.tally.add(e, 1)
	if rec != nil {
		id = rec.ID
	}
	c.track(id, e)
}

// setRecord mirrors a record stored again (a refusal marked), or dropped
// (nil).
func (c *conv) setRecord(e *compileEntry, rec *binding.CompileRecord, chunks []db.ChunkHash) {
	c.tally.add(e, -1)
	id := c.recorded[e]
	e.rec, e.chunks = rec, chunks
	c.tally.add(e, 1)
	if rec != nil {
		id = rec.ID
	}
	c.track(id, e)
}

// forgetCompile mirrors a compile forgotten.
func (c *conv) forgetCompile(id string) {
	if e := c.compiles[id]; e != nil {
		c.tally.add(e, -1)
		delete(c.compiles, id)
		delete(c.recorded, e)
	}
}

// track keeps c.recorded: e (compile id) is in it while it holds a record.
func (c *conv) track(id string, e *compileEntry) {
	switch {
	case e.rec == nil:
		delete(c.recorded, e)
	case c.recorded == nil:
		c.recorded = map[*compileEntry]string{e: id}
	default:
		c.recorded[e] = id
	}
}
