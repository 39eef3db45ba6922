package daemon

import (
	"context"

	"github.com/my-pi/bindery/db"
)

// TreeOwners returns bindery's owner compile of each branch of a pi
// session's tree, by leaf id (GET /v1/sessions/{id}'s frontier): the last
// accepted compile made at an entry on the leaf's path. A leaf without one
// is absent.
func (b *Binder) TreeOwners(ctx context.Context, session string, tree *db.Tree) (map[string]string, error) {
	c, err := b.lock(ctx, session)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	type owner struct {
		id  string
		seq int64
	}
	// the accepted compiles, newest per leaf they named
	newest := map[string]owner{}
	for id, e := range c.compiles {
		if e.accepted && (newest[e.branch].id == "" || e.seq > newest[e.branch].seq) {
			newest[e.branch] = owner{id, e.seq}
		}
	}
	out := map[string]string{}
	if len(newest) == 0 {
		return out, nil
	}
	for _, l := range tree.Branches() {
		path, _ := tree.PathEntries(l.Leaf)
		var best owner
		for _, e := range path {
			if o, ok := newest[e.ID]; ok && (best.id == "" || o.seq > best.seq) {
				best = o
			}
		}
		if best.id != "" {
			out[l.Leaf] = best.id
		}
	}
	return out, nil
}
