package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// Ingested is the ingest sink's hook into the binding state, called after
// a batch committed: a reply with signed thinking that landed in a session
// file with no stamp (its accept did not come, or has not yet) is
// attributed by its parent entry (design/binding.md, "Reply seen only in
// the session file"). Linking stamps that already exist to their entries
// is not done here but in the ingest transaction itself (db.Ingest), so no
// crash or shutdown between the commit and this hook can lose a link.
// Errors are reported, never fatal to ingest: the file's rows are already
// committed, and a reply bindery cannot attribute is stripped later (safe).
func (b *Binder) Ingested(ctx context.Context, batch db.Batch, ing db.Ingested) error {
	if ing.SessionID == "" || batch.Kind == db.Removed {
		return nil
	}
	type reply struct {
		e    *db.Entry // in batch.Entries: an Entry is too large to copy per reply
		keys []binding.Digest
	}
	var replies []reply
	var all []binding.Digest
	for i := range batch.Entries {
		e := &batch.Entries[i]
		if e.Type != "message" || e.Role != "assistant" {
			continue
		}
		if keys := signedKeys(e.Thinking); len(keys) > 0 {
			replies = append(replies, reply{e, keys})
			all = append(all, keys...)
		}
	}
	if len(replies) == 0 {
		return nil
	}
	// One read decides whether there is anything to do: a cold ingest of
	// an archive bindery never compiled for writes nothing here.
	unstamped := func(have map[binding.Digest]db.StampRow) bool {
		for _, k := range all {
			if _, ok := have[k]; !ok {
				return true
			}
		}
		return false
	}
	have, err := b.db.Stamps(ctx, all)
	if err != nil {
		return err
	}
	if !unstamped(have) {
		return nil
	}
	c, err := b.lock(ctx, ing.SessionID)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if len(c.compiles) == 0 {
		return nil // nothing was compiled in this session: nothing to attribute to
	}
	// Read again under the lock: an accept that stamped these replies
	// while this hook waited for the lock has said which compile made them.
	if have, err = b.db.Stamps(ctx, all); err != nil {
		return err
	}
	type attributed struct {
		entry  string
		parent string
		stamps []binding.Stamp
		skip   *binding.StampSkip
	}
	var found []attributed
	var errs []error
	for _, r := range replies {
		missing := false
		for _, k := range r.keys {
			if _, ok := have[k]; !ok {
				missing = true
			}
		}
		if !missing {
			continue
		}
		// The reply's accept did not carry it (or has not arrived): the
		// compiles whose request was built on the reply's parent made it;
		// entries that add no message at their place may sit in between
		// (passThrough).
		cands, err := b.candidates(ctx, c, r.e.ParentID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(cands) == 0 {
			continue
		}
		msg, err := readReply(batch.Path, r.e, r.keys)
		if err != nil {
			errs = append(errs, fmt.Errorf("reply %s in %s: %w", r.e.ID, batch.Path, err))
			continue
		}
		st, skip := binding.AttributeReply(cands, msg)
		found = append(found, attributed{r.e.ID, r.e.ParentID, st, skip})
	}
	now := time.Now().UnixMilli()
	err = b.j.Write(ctx, func(ctx context.Context, tx *db.Tx, emit Emit) error {
		for _, a := range found {
			var rows []db.StampRow
			for _, s := range a.stamps {
				if _, ok := have[s.Key]; !ok {
					rows = append(rows, db.StampRow{Stamp: s, Source: "file", Conversation: c.id, Branch: a.parent, Entry: a.entry, CreatedMs: now})
				}
			}
			added, err := tx.InsertStamps(ctx, rows)
			if err != nil {
				return err
			}
			if len(added) > 0 {
				if err := emit(api.EventStamp, c.id, map[string]any{"entry": a.entry, "source": "file", "stamped": len(added)}); err != nil {
					return err
				}
			}
			if a.skip != nil {
				if err := emit(api.EventStampSkipped, c.id, map[string]any{"entry": a.entry, "compiles": a.skip.Compiles,
					"reason": "the reply's parent was the head of compiles with different prefixes and no accept said which one it answered"}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("attribute replies: %w", errs[0])
	}
	return nil
}

// passThrough: entries pi can append between the leaf a request was
// compiled at and its reply without adding a message at their place:
// custom entries (pi-condense writes them before the reply), pi 1.6's
// context_edit (an extension's or pi's recovery edit, which may land while
// the reply streams) and usage (a cache warm's spend), labels and session
// names. A compile made above one of them recorded exactly what it sent,
// edit or not, so its record is still what the reply was minted under;
// compiles at several of these heads that disagree are a stamp-skip.
func passThrough(typ string) bool {
	switch typ {
	case "custom", "custom_message", "context_edit", "usage", "label", "session_info":
		return true
	}
	return false
}

// candidates are the remembered compiles built on parent, walking up past
// the entries passThrough names.
func (b *Binder) candidates(ctx context.Context, c *conv, parent string) ([]*binding.CompileRecord, error) {
	if parent == "" {
		return nil, nil
	}
	// Walk up from the parent past custom entries only: a bounded read per
	// reply, whatever the depth of the session (a whole-path read here made
	// ingest quadratic in a session's length).
	heads := map[string]bool{parent: true}
	for n := 8; ; n *= 8 {
		up, err := b.db.Ancestors(ctx, c.id, parent, n)
		if err != nil {
			return nil, err
		}
		done := len(up) < n
		for _, e := range up {
			heads[e.ID] = true
			if !passThrough(e.Type) {
				done = true
				break
			}
		}
		if done || n > 1<<20 {
			break
		}
	}
	var out []*binding.CompileRecord
	for e := range c.recorded {
		if heads[e.branch] {
			out = append(out, e.rec)
		}
	}
	return out, nil
}

// readReply reads e's line again from the session file at path, as the
// provider's message (watcher.ReadReply: a batch carries no replies). The
// file is pi's and may have changed since the batch was read: a line whose
// signed thinking blocks are not keys, in order, is not e's reply, and
// attributing it could stamp what the reply never held, so it is an error
// and the reply is left unstamped (stripped later: safe).
func readReply(path string, e *db.Entry, keys []binding.Digest) (*binding.Message, error) {
	got, err := watcher.ReadReply(path, e.Offset, e.Length)
	if err != nil {
		return nil, err
	}
	if got.Type != "message" || got.Role != "assistant" || !slices.Equal(signedKeys(dbThinking(got.Thinking)), keys) || got.Reply == nil {
		return nil, fmt.Errorf("line %d (offset %d) is no longer this reply: the file changed since it was read", e.Line, e.Offset)
	}
	return binding.ParseReply(got.Reply)
}

// signedKeys are the stamp keys of a reply's signed thinking blocks, in
// order: what Ingested looks up, and what a reply read again must still
// hold (readReply).
func signedKeys(ts []db.Thinking) []binding.Digest {
	var keys []binding.Digest
	for _, t := range ts {
		if t.Signed && len(t.SigDigest) == 32 {
			keys = append(keys, binding.Digest(t.SigDigest))
		}
	}
	return keys
}
