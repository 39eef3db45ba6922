package daemon

import (
	"context"
	"slices"
	"unique"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// conv is one conversation's state in memory: a mirror of its rows,
// loaded lazily from the database on first use.
type conv struct {
	mu       convLock
	id       string
	loaded   bool
	stored   bool // its row exists
	row      db.ConversationRow
	branches map[string]*db.BranchRow
	compiles map[string]*compileEntry
	releases []db.ReleaseRow
	followed bool
	// tier is what it knows of the shared tier's releases (shared_facts.go).
	tier tierState
	// stamps caches the stamps this conversation's compiles found: a stamp
	// never changes once recorded (the first one of a key stands), so only
	// the keys not found yet are read again (stampsCached bounds it).
	stamps map[binding.Digest]*binding.Stamp
	// slab is where the cache's stamps are, in the order they were added
	// (cachedStamp).
	slab []binding.Stamp
	// models holds a handle of each model name its cached stamps share
	// (cachedStamp): unique keeps a canonical name only while a handle of
	// it lives, and the name's string alone does not keep one.
	models map[unique.Handle[string]]struct{}
	// keys is its compiles' StampKeys scratch (gather).
	keys []binding.Digest
	// lastStamps are the stamps its last compile was given, in that
	// request's StampKeys order (Binder.stamps).
	lastStamps []*binding.Stamp
	// absent are the keys its compiles found without a stamp: a long
	// session from before bindery holds hundreds, read again every turn
	// without it (stamps_absent.go).
	absent absentStamps
	// tip is the record arrays this conversation's next compile record may
	// extend in place (binding.ShareTail): its records share their history
	// instead of each holding it whole.
	tip binding.ShareTip
	// decide is its compiles' decision scratch (binding.DecideMemory):
	// they run one at a time, under the conversation's lock.
	decide binding.DecideMemory
	// tally counts compiles as retention does (retention_tally.go).
	tally retentionTally
	// recorded are the compiles holding a record, by entry, with their
	// ids: a few per branch, where compiles keeps up to 10,000 accepted
	// ids (binding.Retention), which a turn walked to find them.
	recorded map[*compileEntry]string
}

// stampsCached bounds a conversation's stamp cache; past it the cache
// starts again (a read per key, as without it).
const stampsCached = 1 << 16

type compileEntry struct {
	seq      int64
	branch   string
	accepted bool
	stamped  int
	released int
	rec      *binding.CompileRecord // nil once forgotten (accepted compiles only)
	chunks   []db.ChunkHash         // the chunks its stored record names (db.InsertCompile)
}

// chunkSource is what entry e's stored record gives the next record to
// share (db.ChunkSource); nil e: nothing.
func (e *compileEntry) chunkSource() db.ChunkSource {
	if e == nil || e.rec == nil {
		return db.ChunkSource{}
	}
	return db.ChunkSource{Record: e.rec, Chunks: e.chunks}
}

// sweepChunks deletes, in tx, the conversation's record chunks that no
// record it still remembers after plan names (next: the record being
// stored with plan, and its chunks). It runs only when plan drops or
// forgets a record stored in chunks: retention drops in batches
// (binding.Retain), so a long conversation sweeps now and then, not every
// turn.
func (c *conv) sweepChunks(ctx context.Context, tx *db.Tx, plan binding.RetentionPlan, next []db.ChunkHash) error {
	chunked := false
	gone := map[string]bool{}
	for _, id := range slices.Concat(plan.DropRecords, plan.Forget) {
		gone[id] = true
		if e := c.compiles[id]; e != nil && len(e.chunks) > 0 {
			chunked = true
		}
	}
	if !chunked {
		return nil
	}
	live := [][]db.ChunkHash{next}
	for e, id := range c.recorded {
		if !gone[id] {
			live = append(live, e.chunks)
		}
	}
	_, err := tx.SweepRecordChunks(ctx, c.id, live)
	return err
}

func (b *Binder) conv(id string) *conv {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.convs[id]
	if ok {
		return c
	}
	if len(b.convs) >= maxConversations {
		for k, v := range b.convs {
			if v.mu.TryLock() {
				delete(b.convs, k)
				v.mu.Unlock()
				if len(b.convs) < maxConversations {
					break
				}
			}
		}
	}
	c = &conv{id: id, mu: newConvLock()}
	b.convs[id] = c
	return c
}

// lock locks the conversation and loads it if needed. A conversation
// evicted while the caller waited is replaced by a fresh one.
func (b *Binder) lock(ctx context.Context, id string) (*conv, error) {
	for {
		c := b.conv(id)
		if err := c.mu.Lock(ctx, id); err != nil {
			return nil, err // names the conversation
		}
		b.mu.Lock()
		current := b.convs[id] == c
		b.mu.Unlock()
		if !current {
			c.mu.Unlock()
			continue
		}
		if !c.loaded {
			if err := b.load(ctx, c); err != nil {
				c.mu.Unlock()
				return nil, err
			}
		}
		return c, nil
	}
}

func (b *Binder) load(ctx context.Context, c *conv) error {
	st, err := b.db.LoadConversation(ctx, c.id)
	if err != nil {
		return err // db names the conversation
	}
	c.stored = st.Found
	c.row = st.Conversation
	c.branches = map[string]*db.BranchRow{}
	for i := range st.Branches {
		br := st.Branches[i]
		c.branches[br.Branch] = &br
	}
	compiles := make(map[string]*compileEntry, len(st.Compiles))
	for _, r := range st.Compiles {
		compiles[r.ID] = &compileEntry{seq: r.Seq, branch: r.Branch, accepted: r.AcceptedMs != 0,
			stamped: r.Stamped, released: r.Released, rec: r.Record, chunks: r.Chunks}
	}
	c.setCompiles(compiles)
	c.releases = st.Releases
	c.loaded = true
	return nil
}

// retention is what the conversation forgets once next (a compile being
// added, or one being accepted) is committed: binding.Retain over the
// mirror, owner being the owner of next's branch after the commit.
func (b *Binder) retention(c *conv, nextID string, next compileEntry, owner string) binding.RetentionPlan {
	all := func(yield func(binding.RememberedCompile) bool) {
		for id, e := range c.compiles {
			if !yield(e.remembered(id)) {
				return
			}
		}
	}
	return binding.RetainCounted(b.keep, c.retentionCounts(nextID, next, owner), all, next.remembered(nextID), owner)
}

func (e *compileEntry) remembered(id string) binding.RememberedCompile {
	return binding.RememberedCompile{ID: id, Seq: e.seq, Branch: e.branch, Accepted: e.accepted, Record: e.rec != nil}
}

// applyRetention mirrors a committed retention plan.
func (c *conv) applyRetention(plan binding.RetentionPlan) {
	for _, id := range plan.DropRecords {
		if e := c.compiles[id]; e != nil {
			c.setRecord(e, nil, e.chunks)
		}
	}
	for _, id := range plan.Forget {
		c.forgetCompile(id)
	}
}
