package daemon

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

func releaseFields(compile, branch, source string, rels []db.ReleaseRow) map[string]any {
	list := make([]map[string]any, len(rels))
	for i, r := range rels {
		m := map[string]any{"block": hex.EncodeToString(r.Key[:8]), "reason": r.Reason}
		if r.Path != "" {
			m["path"] = r.Path
		}
		list[i] = m
	}
	f := map[string]any{"branch": branch, "source": source, "released": len(rels), "blocks": list}
	if compile != "" {
		f["compileId"] = compile
	}
	return f
}

// Release implements api.Binder.
func (b *Binder) Release(ctx context.Context, call *api.ReleaseCall) (*api.ReleaseAnswer, error) {
	ans, err := b.release(ctx, call)
	if err != nil {
		what := "by signature"
		if call.Signature == "" {
			what = "at " + call.Path + " of compile " + call.CompileID
		}
		return nil, fmt.Errorf("release %s in conversation %q: %w", what, call.Conversation, err)
	}
	return ans, nil
}

func (b *Binder) release(ctx context.Context, call *api.ReleaseCall) (*api.ReleaseAnswer, error) {
	var convID string
	if call.CompileID != "" && call.Signature == "" {
		switch {
		case strings.HasPrefix(call.CompileID, idDryRun):
			return nil, api.Errorf(api.CodeDryRunCompile, "compile %q was a dry run: nothing of it was sent", call.CompileID)
		case strings.HasPrefix(call.CompileID, idUnbound):
			return &api.ReleaseAnswer{}, nil
		}
		var err error
		convID, err = b.lookup(ctx, call.CompileID)
		if err != nil && b.shared != nil && b.foreignID(call.CompileID) && api.IsCode(err, api.CodeUnknownCompile) {
			// a 400 reported here for a request another machine compiled
			convID, err = b.lookupForeign(ctx, call.CompileID)
		}
		if err != nil {
			return nil, err
		}
		if convID != call.Conversation {
			return nil, api.Errorf(api.CodeBadRequest, "compile %q belongs to conversation %q, not %q", call.CompileID, convID, call.Conversation)
		}
	}
	c, err := b.lock(ctx, call.Conversation)
	if err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var rels []binding.Release
	var refused *binding.CompileRecord // the compile whose request the provider refused
	branch := binding.SignatureBranch
	compile := ""
	if call.Signature != "" {
		rel := binding.SignatureRelease(call.Signature)
		known, err := b.blockKnown(ctx, c, rel.Key)
		if err != nil {
			return nil, err
		}
		if !known {
			return &api.ReleaseAnswer{Released: 0, Reason: unknownSignature}, nil
		}
		rels = []binding.Release{rel}
	} else {
		e := c.compiles[call.CompileID]
		if e == nil || e.rec == nil {
			return nil, b.unknownCompile(ctx, call.CompileID)
		}
		if rels, err = binding.ReleaseAtPath(e.rec, call.Path); err != nil {
			if binding.Code(err) == "bad-path" {
				return nil, api.Errorf(api.CodeBadRequest, "release: %v", err)
			}
			return nil, err
		}
		branch, compile = e.branch, e.rec.ID
		if !e.accepted {
			refused = binding.MarkRefused(e.rec)
		}
	}
	now := time.Now().UnixMilli()
	var added []db.ReleaseRow
	err = b.j.Write(ctx, func(ctx context.Context, tx *db.Tx, emit Emit) error {
		hw, err := tx.IngestHighWater(ctx)
		if err != nil {
			return err
		}
		// A conversation not compiled yet gets no row here: its first
		// compile creates it with its parent (persistCompile), which a
		// row made now would keep it from ever recording.
		rows := make([]db.ReleaseRow, len(rels))
		for i, r := range rels {
			r.Seq = hw
			rows[i] = db.ReleaseRow{Release: r, Conversation: c.id, Branch: branch, CreatedMs: now}
		}
		if added, err = tx.InsertReleases(ctx, rows); err != nil {
			return err
		}
		if err := tx.QueueReleases(ctx, added, now); err != nil {
			return err
		}
		if refused != nil {
			if err := tx.UpdateRecord(ctx, refused); err != nil {
				return err
			}
		}
		if len(added) > 0 {
			return emit(api.EventRelease, c.id, releaseFields(compile, branch, "host", added))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.pushReleases(ctx, c.id, added) // decided in the tier before the answer
	c.releases = append(c.releases, added...)
	if refused != nil {
		// stored again whole (db.UpdateRecord): it names no chunks now
		c.setRecord(c.compiles[call.CompileID], refused, nil)
	}
	return &api.ReleaseAnswer{Released: len(added)}, nil
}
