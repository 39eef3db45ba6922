package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
)

// sharedFacts is the binder's side of the shared tier for what needs one
// order across machines (issue 29): releases (decided in PostgreSQL, read
// by every compile before it decides), and compiles and accepts (so an
// accept may reach any machine). nil: this machine alone.
//
// Releases and forks across machines. On one machine a release made on
// the branch ending at leaf L reaches a compile at leaf L' when the
// released message is on L's path and either L' descends from L or the
// first entry of L' not on L's path was ingested after the release
// (binding.ReleaseReaches), "after" read in the machine's own ingest
// order. Across machines there is no common ingest order, so "after" is
// restated against the one order the tier gives releases:
//
//	an entry is after a release unless this machine ingested it before a
//	read of the tier's releases that did not see the release.
//
// A read that did not see a release began before the release committed
// (ReleasesAfter waits on a release being written), so an entry ingested
// before that read was ingested before the release was made: the release
// does not reach a fork starting there, as on one machine. Any other
// entry may have come after it, and is taken to (the release reaches: a
// strip, never a refusal). So a release learned from the tier is recorded
// here with, as its seq, the ingest high-water taken just before the last
// read of the conversation's releases that did not see it (0 when there
// was none since this daemon started: it then reaches every fork of L).
// A release this machine made keeps its own ingest high-water, as before.
// Forks named with parent (releases.id order) need no restating: a fork's
// first compile reads the tier's releases before its branch row records
// the last release it inherits, so it inherits every release committed
// before that read.
//
// Past the wait (the tier slow or away), a compile on a conversation
// another machine is known to have touched strips every thinking block it
// sends: one of them may have been released there. A conversation only
// this machine has served keeps working alone.
type sharedFacts struct {
	store *sharedtier.Store
	wait  time.Duration
	log   *slog.Logger
	// poke wakes the shipper (compile records and accepts are shipped by
	// it, not on the call's path).
	poke   func()
	failed atomic.Bool // said once until a read works again
	// stampsPaused: until then (Unix ns), an accept does not write its
	// stamps to the tier (pushStamps)
	stampsPaused atomic.Int64

	// beforePush, when set (tests), runs after an accept or release
	// committed its releases here and before they are written to the tier.
	beforePush func()
}

// tierState is what a conversation knows of the tier's releases.
type tierState struct {
	ord     int64 // the last release ord read
	readHW  int64 // ingest high-water taken before the last read that saw nothing new past ord
	foreign bool  // another machine is known to have served this conversation
}

// syncReleases reads the conversation's releases the tier holds past what
// it read before and records them here (under the conversation's lock).
// safe is false when the read failed within the wait on a conversation
// another machine has touched: the caller then strips every block.
func (b *Binder) syncReleases(ctx context.Context, c *conv) (safe bool, err error) {
	s := b.shared
	hw, err := b.db.IngestHighWater(ctx)
	if err != nil {
		return false, fmt.Errorf("releases of conversation %q: %w", c.id, err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.wait)
	s.store.Ready(rctx) // a failure is the read's to report
	got, err := s.store.ReleasesAfter(rctx, c.id, c.tier.ord, 0)
	if err != nil && rctx.Err() == nil {
		// a pooled connection the server closed fails at once: one more
		// try within the same wait
		got, err = s.store.ReleasesAfter(rctx, c.id, c.tier.ord, 0)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !s.failed.Swap(true) {
			s.log.Warn("shared tier's releases not read in time; a conversation another machine served has its thinking stripped until they are", "shared", s.store.Name(), "conversation", c.id, "wait", s.wait, "err", err)
		}
		return !c.tier.foreign, nil
	}
	if s.failed.Swap(false) {
		s.log.Info("shared tier's releases read again", "shared", s.store.Name())
	}
	if len(got) == 0 {
		c.tier.readHW = hw
		return true, nil
	}
	rows := make([]db.ReleaseRow, len(got))
	for i, r := range got {
		rows[i] = r.ReleaseRow
		rows[i].Seq = c.tier.readHW // the restated order (sharedFacts)
		if r.Machine != s.store.Machine() {
			c.tier.foreign = true
		}
	}
	var added []db.ReleaseRow
	err = b.j.Write(ctx, func(ctx context.Context, tx *db.Tx, emit Emit) error {
		var err error
		// Never queued: they came from the tier. Ours come back as
		// duplicates and insert nothing.
		if added, err = tx.InsertReleases(ctx, rows); err != nil {
			return err
		}
		for _, r := range added {
			if err := emit(api.EventRelease, c.id, releaseFields(r.Compile, r.Branch, "shared", []db.ReleaseRow{r})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("releases of conversation %q from the shared tier: %w", c.id, err)
	}
	c.releases = append(c.releases, added...)
	c.tier.ord = got[len(got)-1].Ord
	if len(got) < sharedtier.MaxReleases {
		// read to the end: the next read's misses are ordered after hw
		c.tier.readHW = hw
	}
	return true, nil
}

// pushReleases writes releases this machine just recorded (and queued) to
// the tier, within the wait, before the call that made them answers: a
// compile on another machine that starts after the answer sees them. A
// failed write is logged; the outbox ships them when the tier is back.
func (b *Binder) pushReleases(ctx context.Context, conversation string, rels []db.ReleaseRow) {
	s := b.shared
	if s == nil || len(rels) == 0 {
		return
	}
	if s.beforePush != nil {
		s.beforePush()
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait)
	defer cancel()
	s.store.Ready(pctx) // a failure is the write's to report
	if _, err := s.store.PutReleases(pctx, rels); err != nil {
		s.log.Warn("releases not written to the shared tier; the outbox ships them when it is back (meanwhile another machine may send a released block)", "conversation", conversation, "released", len(rels), "err", err)
	}
}

// pushStamps writes the stamps an accept just recorded (and queued) to
// the tier, within the wait, before the accept answers: an acknowledged
// accept is then in PostgreSQL, and a replica killed right after it loses
// none of it (its outbox would ship it only if it came back). A stamp
// shipped twice changes nothing.
//
// Every accept carries stamps, so a tier that is away must not cost each
// one the wait: after a failed write, accepts skip the write for
// stampsPause (the outbox ships their stamps when the tier is back), and
// the failure is logged once a pause. Releases are rare and always wait
// (pushReleases): a release another machine must not miss is worth it.
func (b *Binder) pushStamps(ctx context.Context, conversation string, rows []db.StampRow) {
	s := b.shared
	if s == nil || len(rows) == 0 || time.Now().UnixNano() < s.stampsPaused.Load() {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait)
	defer cancel()
	s.store.Ready(pctx) // a failure is the write's to report
	if _, err := s.store.PutStamps(pctx, rows); err != nil {
		s.stampsPaused.Store(time.Now().Add(stampsPause).UnixNano())
		s.log.Warn("stamps not written to the shared tier before the accept answered; the outbox ships them when it is back, and accepts do not wait on the tier for a while", "conversation", conversation, "stamps", len(rows), "pause", stampsPause, "err", err)
	}
}

// stampsPause is how long accepts skip writing their stamps to a tier
// that just failed a write.
const stampsPause = 10 * time.Second

// foreignCompile finds a compile another machine made, in the tier,
// polling within the wait (its shipper may not have shipped it yet): the
// conversation it belongs to, and whether any machine accepted it already.
func (b *Binder) foreignCompile(ctx context.Context, id string) (sharedtier.Compile, bool, error) {
	s := b.shared
	wctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	for {
		c, found, err := s.store.Compile(wctx, id)
		if err == nil && found {
			return c, true, nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return c, false, ctx.Err()
			}
			if err != nil {
				s.log.Warn("compile made on another machine not read from the shared tier", "compile", id, "err", err)
			}
			return c, false, nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// importCompile records here a compile another machine made, under the
// conversation's lock, so its accept proceeds as for one of ours: the
// record with a seq of this machine (the order it learned it in), the
// conversation's and branch's rows if it had none. Nothing of it is
// queued: it came from the tier.
func (b *Binder) importCompile(ctx context.Context, c *conv, sc sharedtier.Compile) (*compileEntry, error) {
	rec, err := db.DecodeRecord(sc.Record)
	if err != nil {
		return nil, fmt.Errorf("compile %s from the shared tier: %w", sc.ID, err)
	}
	if rec.ID != sc.ID || rec.Conversation != c.id {
		return nil, fmt.Errorf("compile %s from the shared tier names compile %s of conversation %q", sc.ID, rec.ID, rec.Conversation)
	}
	seq, err := b.nextSeq(ctx)
	if err != nil {
		return nil, err
	}
	rec.Seq = seq
	now := time.Now().UnixMilli()
	var newConv *db.ConversationRow
	var newBranch *db.BranchRow
	var chunks []db.ChunkHash
	err = b.j.Write(ctx, func(ctx context.Context, tx *db.Tx, _ Emit) error {
		newConv, newBranch = nil, nil
		if !c.stored {
			row := c.row
			row.ID, row.CreatedMs = c.id, now
			if err := tx.UpsertConversation(ctx, row); err != nil {
				return err
			}
			newConv = &row
		}
		if c.branches[rec.Branch] == nil {
			br := db.BranchRow{Conversation: c.id, Branch: rec.Branch, CreatedMs: now}
			if err := tx.UpsertBranch(ctx, br); err != nil {
				return err
			}
			newBranch = &br
		}
		var err error
		chunks, err = tx.InsertCompile(ctx, rec, now, db.ChunkSource{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("compile %s from the shared tier: %w", sc.ID, err)
	}
	if newConv != nil {
		c.row, c.stored = *newConv, true
	}
	if newBranch != nil {
		c.branches[newBranch.Branch] = newBranch
	}
	e := &compileEntry{seq: seq, branch: rec.Branch, rec: rec, chunks: chunks}
	c.addCompile(rec.ID, e)
	c.tier.foreign = true
	b.mu.Lock()
	b.byID[rec.ID] = c.id
	b.mu.Unlock()
	return e, nil
}

// acceptForeign is an accept of a compile this machine does not hold: one
// another machine made (its id's tag), read from the tier. It answers
// repeated when another machine accepted it already; otherwise it imports
// it and returns its conversation, for the accept to go on as usual.
func (b *Binder) acceptForeign(ctx context.Context, id string) (string, *api.AcceptAnswer, error) {
	sc, found, err := b.foreignCompile(ctx, id)
	if err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, b.unknownCompile(ctx, id)
	}
	actx, cancel := context.WithTimeout(ctx, b.shared.wait)
	a, accepted, err := b.shared.store.Accepted(actx, id)
	cancel()
	if err != nil && ctx.Err() == nil {
		// Not known: accepted here again at worst, which records the
		// same stamps (first wins) and releases (kept once) again.
		b.shared.log.Warn("whether another machine accepted the compile is not known", "compile", id, "err", err)
	}
	if accepted {
		return sc.Conversation, &api.AcceptAnswer{Accepted: true, Stamped: a.Stamped, Released: a.Released, Repeated: true}, nil
	}
	return sc.Conversation, nil, b.importLocked(ctx, sc)
}

// lookupForeign is lookup for a compile another machine made: read from
// the tier and imported; its conversation.
func (b *Binder) lookupForeign(ctx context.Context, id string) (string, error) {
	sc, found, err := b.foreignCompile(ctx, id)
	if err != nil {
		return "", err
	}
	if !found {
		return "", b.unknownCompile(ctx, id)
	}
	return sc.Conversation, b.importLocked(ctx, sc)
}

func (b *Binder) importLocked(ctx context.Context, sc sharedtier.Compile) error {
	c, err := b.lock(ctx, sc.Conversation)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if c.compiles[sc.ID] == nil {
		if _, err := b.importCompile(ctx, c, sc); err != nil {
			return err
		}
	}
	return nil
}

// stripAll marks every key released for this compile only (not recorded):
// the safe answer when the tier's releases could not be read.
func stripAll(released map[binding.Digest]bool, keys []binding.Digest) map[binding.Digest]bool {
	if released == nil {
		released = make(map[binding.Digest]bool, len(keys))
	}
	for _, k := range keys {
		released[k] = true
	}
	return released
}
