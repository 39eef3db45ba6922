package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// Compile implements api.Binder.
func (b *Binder) Compile(ctx context.Context, call *api.CompileCall) (*api.CompileAnswer, error) {
	var proved *shared
	if call.Base != nil {
		// By reference: the whole request rebuilt, then compiled as one
		// sent whole (bases.go).
		whole, p, err := b.bases.rebuild(call, b.maxBody)
		if err != nil {
			return nil, err
		}
		b.log.Debug("compile by reference", "conversation", call.Conversation, "base", call.Base.CompileID,
			"shared", call.Base.Messages, "sent", len(call.Request), "whole", len(whole))
		full := *call
		full.Request = whole // Base stays: the compile event names it
		call, proved = &full, p
	}
	var known *binding.KnownPrefix
	var spare binding.RequestMemory
	if proved != nil {
		known, spare = proved.known, proved.spare
	}
	req, mem, err := b.parse(ctx, call.Conversation, call.Request, known, spare)
	if proved != nil {
		// The base is read no more (its memory may be reused from here).
		b.bases.release(proved.from)
		proved.known, proved.from = nil, nil
	}
	switch {
	case errors.Is(err, binding.ErrCanceled):
		return nil, fmt.Errorf("compile of conversation %q: %w", call.Conversation, context.Cause(ctx))
	case errors.Is(err, binding.ErrTooManyMessages):
		return nil, api.Errorf(api.CodeLimitExceeded, "compile: request: %v (--max-messages)", err)
	case err != nil:
		return nil, api.Errorf(api.CodeBadRequest, "compile: request: %v", err)
	}
	if !req.Bound {
		// Not a Messages body: an empty plan, nothing to remember.
		if req.NotMessages != "" {
			b.log.Debug("compile: another API's body passed through", "conversation", call.Conversation, "why", req.NotMessages)
		}
		ans := &api.CompileAnswer{CompilePlan: api.CompilePlan{CompileID: newCompileID(idUnbound, 0, b.tag), Strips: []api.Strip{},
			DroppedMessages: []string{}, Cache: api.CacheChange{Cause: binding.CauseNone}, NotMessages: req.NotMessages}}
		if call.Return != api.ReturnPlan {
			ans.Request = call.Request
		}
		return ans, nil
	}

	seq, err := b.nextSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("compile of conversation %q: %w", call.Conversation, err)
	}
	id := newCompileID(idReal, seq, b.tag)
	if call.DryRun {
		id = newCompileID(idDryRun, seq, b.tag)
	}

	compiled, err := func() (*binding.Compiled, error) {
		c, err := b.lock(ctx, call.Conversation)
		if err != nil {
			return nil, err
		}
		defer c.mu.Unlock() // a panic (net/http recovers it) must not keep the conversation locked
		return b.compileLocked(ctx, c, call, req, id, seq)
	}()
	if err != nil {
		return nil, fmt.Errorf("compile %s of conversation %q: %w", id, call.Conversation, err)
	}
	// The answer before the base is kept: once kept, a later compile may
	// drop it and reuse req's memory (bases_spare.go).
	ans := compileAnswer(call, req, compiled)
	if !call.DryRun {
		b.mu.Lock()
		if len(b.byID) >= maxRememberedIDs {
			clear(b.byID) // a lookup falls back to the database
		}
		b.byID[id] = call.Conversation
		b.mu.Unlock()
		b.bases.put(&base{id: id, conversation: call.Conversation, body: call.Request, req: req, mem: mem,
			ownBody: proved != nil, lent: call.Return != api.ReturnPlan}, proved)
	}
	return ans, nil
}

func (b *Binder) compileLocked(ctx context.Context, c *conv, call *api.CompileCall, req *binding.Request, id string, seq int64) (*binding.Compiled, error) {
	if call.SessionFile != "" && !c.followed && b.follow != nil {
		if err := b.follow(ctx, call.SessionFile); err != nil {
			b.log.Warn("compile: cannot follow the session file", "conversation", c.id, "file", call.SessionFile, "err", err)
		} else {
			c.followed = true
		}
	}
	f, err := b.gather(ctx, c, call, req)
	if err != nil {
		return nil, err
	}
	var aliases map[string]string
	if call.Account != "" {
		// Only a compile that names an account compares accounts.
		if aliases, err = b.accountAliases(ctx); err != nil {
			return nil, fmt.Errorf("compile %s: %w", id, err)
		}
	}
	in := binding.CompileInput{
		ID: id, Conversation: call.Conversation, Branch: call.Branch, Seq: seq,
		Request: req, BindsThinking: call.BindsThinking, DryRun: call.DryRun, Engaged: f.engaged,
		Stamps: f.stamps, Released: f.released, Remembered: f.remembered, Owner: f.owner, Models: b.models,
		Compactions: f.compactions, Memory: &c.decide, Account: call.Account, AccountAliases: aliases,
	}
	if !call.DryRun {
		// In memory, the record shares what it repeats of the record it
		// most likely extends: the base it was compiled by reference from,
		// else its branch's owner (compared, never assumed); in the
		// database it names the chunks that record stored instead of
		// writing them again (persistCompile).
		if f.owner != nil {
			f.shareBase = c.compiles[f.owner.ID]
		}
		if call.Base != nil {
			if e := c.compiles[call.Base.CompileID]; e != nil && e.rec != nil {
				f.shareBase = e
			}
		}
		in.Share = &binding.RecordShare{Base: f.shareBase.chunkSource().Record, Tip: &c.tip}
	}
	compiled, err := binding.Compile(in)
	if err != nil {
		return nil, api.Errorf(api.CodeBadRequest, "compile: %v", err)
	}
	if call.DryRun || compiled.Persist.Record == nil {
		return compiled, nil
	}
	if ctx.Err() != nil {
		// The caller is gone: nobody will send this request, so nothing
		// of it is recorded (the host compiles again when it retries).
		return nil, fmt.Errorf("abandoned: %w", context.Cause(ctx))
	}
	if err := b.persistCompile(ctx, c, call, f, compiled); err != nil {
		return nil, err
	}
	return compiled, nil
}

// persistCompile commits a compile's record, the conversation and branch
// rows it creates, the stamps its attribution minted and its events.
func (b *Binder) persistCompile(ctx context.Context, c *conv, call *api.CompileCall, f *compileFacts, compiled *binding.Compiled) error {
	rec := compiled.Persist.Record
	now := time.Now().UnixMilli()
	var newConv *db.ConversationRow
	var newBranch *db.BranchRow
	var stampRows []db.StampRow
	owner := ""
	if br := c.branches[rec.Branch]; br != nil {
		owner = br.Owner
	}
	plan := b.retention(c, rec.ID, compileEntry{seq: rec.Seq, branch: rec.Branch, rec: rec}, owner)
	// The record shares what it repeats of f.shareBase's (compileLocked),
	// in memory and in its chunks.
	src := f.shareBase.chunkSource()
	var chunks []db.ChunkHash
	// Deferred: the accept that follows syncs the record with its own
	// commit, one fsync a turn. A power loss in between loses the record:
	// the accept then answers 404, and the reply is stripped (no stamp),
	// never refused.
	err := b.j.WriteDeferred(ctx, func(ctx context.Context, tx *db.Tx, emit Emit) error {
		newConv, newBranch, stampRows = nil, nil, nil
		lastRel := int64(-1)
		lastRelease := func() (int64, error) {
			if lastRel < 0 {
				n, err := tx.LastReleaseID(ctx)
				if err != nil {
					return 0, err
				}
				lastRel = n
			}
			return lastRel, nil
		}
		if !c.stored || (call.SessionFile != "" && c.row.SessionFile == "") {
			row := c.row
			row.ID, row.CreatedMs = c.id, now
			if call.SessionFile != "" {
				row.SessionFile = call.SessionFile
			}
			if !c.stored && f.parent != nil {
				n, err := lastRelease()
				if err != nil {
					return err
				}
				p := f.parent
				row.ParentConversation, row.ParentBranch, row.ParentRelease = p.Conversation, p.Branch, n
				if f.parentState != nil && f.parentState.Conversation.EngagedCompile != "" {
					engaged := f.parentState.Conversation.EngagedCompile
					row.EngagedCompile, row.EngagedMs = engaged, now
					if err := emit(api.EventEngage, c.id, map[string]any{"compileId": engaged,
						"branch": call.Branch, "parent": p}); err != nil {
						return err
					}
				}
			}
			if err := tx.UpsertConversation(ctx, row); err != nil {
				return err
			}
			newConv = &row
		}
		if c.branches[call.Branch] == nil {
			br := db.BranchRow{Conversation: c.id, Branch: call.Branch, CreatedMs: now}
			if call.Parent != nil && (call.Parent.Conversation == c.id || call.Parent.Conversation == "") && call.Parent.Branch != call.Branch {
				n, err := lastRelease()
				if err != nil {
					return err
				}
				br.ParentConversation, br.ParentBranch, br.ParentRelease = c.id, call.Parent.Branch, n
			}
			if err := tx.UpsertBranch(ctx, br); err != nil {
				return err
			}
			newBranch = &br
		}
		var err error
		if chunks, err = tx.InsertCompile(ctx, rec, now, src); err != nil {
			return err
		}
		// an accept may reach another machine: it finds the record there
		if err := tx.QueueCompile(ctx, rec.ID, now); err != nil {
			return err
		}
		if err := tx.ForgetCompiles(ctx, plan.DropRecords, plan.Forget); err != nil {
			return err
		}
		if err := c.sweepChunks(ctx, tx, plan, chunks); err != nil {
			return err
		}
		for _, s := range compiled.Persist.Stamps {
			stampRows = append(stampRows, db.StampRow{Stamp: s, Source: "prefix", Conversation: c.id, Branch: call.Branch, Compile: rec.ID, CreatedMs: now})
		}
		if stampRows, err = tx.InsertStamps(ctx, stampRows); err != nil {
			return err
		}
		if _, err := linkStamps(ctx, tx, c.id, stampRows); err != nil {
			return err
		}
		strips := stripsOf(compiled)
		fields := map[string]any{"compileId": rec.ID, "branch": call.Branch, "engaged": compiled.Engaged, "binds": compiled.Binds,
			"thinkingStripped": len(strips), "thinkingKept": len(compiled.Kept), "droppedMessages": droppedOf(compiled), "cache": cacheOf(compiled), "model": rec.Model}
		if len(strips) > 0 {
			fields["strips"] = strips
		}
		if compiled.FirstAfterEngagement {
			fields["firstAfterEngagement"] = true
		}
		if call.Base != nil {
			fields["base"] = call.Base.CompileID // compiled by reference
		}
		if len(stampRows) > 0 {
			fields["stamped"] = len(stampRows)
		}
		if err := emit(api.EventCompile, c.id, fields); err != nil {
			return err
		}
		for _, s := range strips {
			if err := emit(api.EventStrip, c.id, map[string]any{"compileId": rec.ID, "branch": call.Branch,
				"path": s.Path, "reason": s.Reason, "tokens": s.Tokens}); err != nil {
				return err
			}
		}
		for _, sk := range compiled.Skipped {
			if err := emit(api.EventStampSkipped, c.id, map[string]any{"compileId": rec.ID, "branch": call.Branch,
				"message": binding.MessagePath(sk.Message), "compiles": sk.Compiles,
				"reason": "two remembered compiles qualify with different prefixes and no accept said which one the reply answered"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if newConv != nil {
		c.row, c.stored = *newConv, true
	}
	if newBranch != nil {
		c.branches[newBranch.Branch] = newBranch
	}
	c.addCompile(rec.ID, &compileEntry{seq: rec.Seq, branch: rec.Branch, rec: rec, chunks: chunks})
	if b.shared != nil {
		b.shared.poke()
	}
	c.cacheStamps(stampRows)
	c.applyRetention(plan)
	return nil
}

func linkStamps(ctx context.Context, tx *db.Tx, conversation string, rows []db.StampRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	keys := make([]binding.Digest, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return tx.LinkStampsInSession(ctx, conversation, keys)
}

func stripsOf(c *binding.Compiled) []api.Strip {
	out := make([]api.Strip, len(c.Strips))
	for i, s := range c.Strips {
		out[i] = api.Strip{Path: s.Pos.Path(), Reason: string(s.Reason), Tokens: s.Tokens}
	}
	return out
}

func droppedOf(c *binding.Compiled) []string {
	out := make([]string, len(c.Dropped))
	for i, m := range c.Dropped {
		out[i] = binding.MessagePath(m)
	}
	return out
}

func cacheOf(c *binding.Compiled) api.CacheChange {
	cause := c.Cache.Cause
	if cause == "" {
		cause = binding.CauseNone
	}
	return api.CacheChange{FirstChange: c.Cache.Path, Cause: cause}
}

// compileAnswer is the host's answer to a compile: the plan, and unless the host
// asked for the plan alone, the request to send.
func compileAnswer(call *api.CompileCall, req *binding.Request, c *binding.Compiled) *api.CompileAnswer {
	ans := &api.CompileAnswer{CompilePlan: api.CompilePlan{
		CompileID: c.ID, Bound: c.Bound, Engaged: c.Engaged, DryRun: call.DryRun,
		ThinkingStripped: len(c.Strips), ThinkingKept: len(c.Kept), Strips: stripsOf(c), DroppedMessages: droppedOf(c), Cache: cacheOf(c),
	}}
	if call.Return != api.ReturnPlan {
		ans.Request = c.Rewrite(call.Request, req)
	}
	return ans
}
