package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// Accept implements api.Binder.
func (b *Binder) Accept(ctx context.Context, call *api.AcceptCall) (*api.AcceptAnswer, error) {
	ans, conv, err := b.accept(ctx, call)
	if err != nil {
		if conv != "" {
			return nil, fmt.Errorf("accept of compile %s of conversation %q: %w", call.CompileID, conv, err)
		}
		return nil, fmt.Errorf("accept of compile %s: %w", call.CompileID, err)
	}
	return ans, nil
}

// accept is Accept, also returning the conversation (once known) for
// the error's context.
func (b *Binder) accept(ctx context.Context, call *api.AcceptCall) (*api.AcceptAnswer, string, error) {
	switch {
	case strings.HasPrefix(call.CompileID, idDryRun):
		return nil, "", api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run: it cannot be accepted", call.CompileID)
	case strings.HasPrefix(call.CompileID, idUnbound):
		// Not a Messages request: nothing was bound, nothing to record.
		return &api.AcceptAnswer{Accepted: true}, "", nil
	}
	convID, err := b.lookup(ctx, call.CompileID)
	if err != nil && b.shared != nil && b.foreignID(call.CompileID) && api.IsCode(err, api.CodeUnknownCompile) {
		// made on another machine of the shared tier: read from there
		// (shared_facts.go)
		var ans *api.AcceptAnswer
		if convID, ans, err = b.acceptForeign(ctx, call.CompileID); err != nil || ans != nil {
			return ans, convID, err
		}
	}
	if err != nil {
		return nil, "", err
	}
	c, err := b.lock(ctx, convID)
	if err != nil {
		return nil, convID, err
	}
	defer c.mu.Unlock()
	e := c.compiles[call.CompileID]
	if e == nil || (e.rec == nil && !e.accepted) {
		return nil, convID, b.unknownCompile(ctx, call.CompileID)
	}
	if e.accepted {
		return &api.AcceptAnswer{Accepted: true, Stamped: e.stamped, Released: e.released, Repeated: true}, convID, nil
	}
	// From here to the write is computation only: announce the write, so
	// a synced group open meanwhile (another conversation's accept) stays
	// open to share its fsync with this one (Journal.Expect).
	exp := b.j.Expect()
	defer exp.Withdraw()
	var owner *binding.CompileRecord
	if br := c.branches[e.branch]; br != nil && br.Owner != "" {
		if oe := c.compiles[br.Owner]; oe != nil {
			owner = oe.rec
		}
	}
	trs := make([]binding.InputTransformation, len(call.InputTransformations))
	for i, t := range call.InputTransformations {
		trs[i] = binding.InputTransformation{Type: t.Type, Path: t.Path, Reason: t.Reason}
	}
	if len(trs) == 0 && len(call.Reply) > 0 {
		// A whole provider response as the reply (Messages, Converse, a
		// ConverseStream event list) carries its own input_transformations;
		// ones the host lists apart win. A reply that does not read is
		// refused by binding.Accept below, with its reason.
		if got, ok, err := binding.InputTransformationsOf(call.Reply); err == nil && ok {
			trs = got
		}
	}
	out, err := binding.Accept(binding.AcceptInput{Record: e.rec, Owner: owner, Engaged: c.row.EngagedCompile != "",
		Reply: call.Reply, Transformations: trs, Models: b.models})
	if err != nil {
		exp.Withdraw() // what follows may read the database
		switch binding.Code(err) {
		case "unknown-compile":
			return nil, convID, b.unknownCompile(ctx, call.CompileID)
		case "dry-run":
			return nil, convID, api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run", call.CompileID)
		case "bad-reply", "bad-path", "bad-request":
			return nil, convID, api.Errorf(api.CodeBadRequest, "accept: %v", err)
		}
		return nil, convID, err
	}
	if out.Noop {
		return &api.AcceptAnswer{Accepted: true, Stamped: e.stamped, Released: e.released, Repeated: true}, convID, nil
	}
	rec := out.Record
	now := time.Now().UnixMilli()
	ownerID := rec.ID // an accept that makes rec the owner keeps its record
	if !out.Owner {
		if br := c.branches[rec.Branch]; br != nil {
			ownerID = br.Owner
		}
	}
	plan := b.retention(c, rec.ID, compileEntry{seq: rec.Seq, branch: rec.Branch, accepted: true, rec: rec}, ownerID)
	var stamped []db.StampRow
	var released []db.ReleaseRow
	err = exp.Write(ctx, func(ctx context.Context, tx *db.Tx, emit Emit) error {
		stamped, released = nil, nil
		var err error
		var srows []db.StampRow
		for _, s := range out.Stamps {
			srows = append(srows, db.StampRow{Stamp: s, Source: "accept", Conversation: c.id, Branch: rec.Branch, Compile: rec.ID, CreatedMs: now})
		}
		if stamped, err = tx.InsertStamps(ctx, srows); err != nil {
			return err
		}
		if _, err := linkStamps(ctx, tx, c.id, stamped); err != nil {
			return err
		}
		if _, err := tx.InsertCompactions(ctx, c.id, out.Compactions, now); err != nil {
			return err
		}
		var rrows []db.ReleaseRow
		var hw int64 // read only when there is a release to give it (most accepts release nothing)
		if len(out.Releases) > 0 {
			if hw, err = tx.IngestHighWater(ctx); err != nil {
				return err
			}
		}
		for _, r := range out.Releases {
			r.Seq = hw
			rrows = append(rrows, db.ReleaseRow{Release: r, Conversation: c.id, Branch: rec.Branch, CreatedMs: now})
		}
		if released, err = tx.InsertReleases(ctx, rrows); err != nil {
			return err
		}
		if out.Owner {
			if err := tx.SetBranchOwner(ctx, c.id, rec.Branch, rec.ID, now); err != nil {
				return err
			}
		}
		if out.Engage {
			row := c.row
			row.ID, row.EngagedCompile, row.EngagedMs = c.id, rec.ID, now
			if row.CreatedMs == 0 {
				row.CreatedMs = now
			}
			if err := tx.UpsertConversation(ctx, row); err != nil {
				return err
			}
			if err := emit(api.EventEngage, c.id, map[string]any{"compileId": rec.ID, "branch": rec.Branch}); err != nil {
				return err
			}
		}
		if err := tx.MarkAccepted(ctx, rec.ID, rec.LastRead, now, len(stamped), len(released)); err != nil {
			return err
		}
		// for the shared tier, in this same transaction (no-ops alone)
		if err := tx.QueueAccept(ctx, rec.ID, now); err != nil {
			return err
		}
		if err := tx.QueueReleases(ctx, released, now); err != nil {
			return err
		}
		if usage, ok := replyUsage(call.Usage, call.Reply); ok && c.row.SessionFile == "" {
			// A pi session's usage is read from its file; a host without
			// one (bindery proxy) has only what its accepts carry.
			usage.Compile, usage.Conversation, usage.Branch, usage.Model, usage.AcceptedMs = rec.ID, c.id, rec.Branch, rec.Model, now
			if err := tx.InsertAcceptUsage(ctx, usage); err != nil {
				return err
			}
		}
		if err := tx.ForgetCompiles(ctx, plan.DropRecords, plan.Forget); err != nil {
			return err
		}
		if err := c.sweepChunks(ctx, tx, plan, nil); err != nil {
			return err
		}
		if err := emit(api.EventAccept, c.id, acceptFields{Branch: rec.Branch, CompileID: rec.ID, Owner: out.Owner,
			Released: len(released), Reply: len(call.Reply) > 0, Stamped: len(stamped)}); err != nil {
			return err
		}
		if len(released) > 0 {
			if err := emit(api.EventRelease, c.id, releaseFields(rec.ID, rec.Branch, "accept", released)); err != nil {
				return err
			}
		}
		for _, ev := range out.Events {
			f := map[string]any{"compileId": rec.ID, "branch": rec.Branch, "transformation": ev.Type, "reason": ev.Reason, "path": ev.Path}
			if ev.Orig != "" {
				f["hostPath"] = ev.Orig
			}
			if err := emit(api.EventTransform, c.id, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, convID, err
	}
	// Decided in the tier before the answer (shared_facts.go).
	b.pushReleases(ctx, c.id, released)
	b.pushStamps(ctx, c.id, stamped)
	if b.shared != nil {
		b.shared.poke()
	}
	// mirror what was committed
	c.markAccepted(e, len(stamped), len(released), rec)
	c.cacheStamps(stamped) // the next compile carries these blocks
	if len(stamped) > 0 && b.stamped != nil {
		b.stamped()
	}
	for _, r := range released {
		c.releases = append(c.releases, r)
	}
	if out.Owner {
		br := c.branches[rec.Branch]
		if br == nil {
			br = &db.BranchRow{Conversation: c.id, Branch: rec.Branch, CreatedMs: now}
			c.branches[rec.Branch] = br
		}
		br.Owner = rec.ID
	}
	if out.Engage {
		c.row.EngagedCompile, c.row.EngagedMs, c.stored = rec.ID, now, true
	}
	c.applyRetention(plan)
	return &api.AcceptAnswer{Accepted: true, Stamped: len(stamped), Released: len(released)}, convID, nil
}

// acceptFields is an accept event's fields (api.md, "accept"). A struct,
// not a map: marshalling it costs a fraction of a map's (no key sort, no
// boxed values), on every accept. Its fields are in the keys' sorted
// order, so the JSON is byte for byte what a map of them gave.
type acceptFields struct {
	Branch    string `json:"branch"`
	CompileID string `json:"compileId"`
	Owner     bool   `json:"owner"`
	Released  int    `json:"released"`
	Reply     bool   `json:"reply"`
	Stamped   int    `json:"stamped"`
}
