package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
)

// readThrough is a compile's look into the shared tier (issue 29): the
// stamps of blocks this machine holds none of (a session continued from
// another machine, a conversation another replica served) are read from
// PostgreSQL within wait, recorded here (source "shared": never shipped
// back), and vouch for their blocks as a local stamp would. Past wait, or
// with the server unreachable, the blocks have no stamp and are stripped:
// never sent unvouched.
type readThrough struct {
	store  *sharedtier.Store
	wait   time.Duration
	log    *slog.Logger
	failed atomic.Bool // said once until a read works again
}

// fill adds to rows the stamps of need the shared tier holds.
func (r *readThrough) fill(ctx context.Context, j *Journal, conversation string, need []binding.Digest, rows map[binding.Digest]db.StampRow) error {
	var missing []binding.Digest
	for _, k := range need {
		if _, ok := rows[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > sharedtier.MaxKeys {
		missing = missing[:sharedtier.MaxKeys]
	}
	rctx, cancel := context.WithTimeout(ctx, r.wait)
	got, err := r.store.Stamps(rctx, missing)
	if err != nil && rctx.Err() == nil {
		// A pooled connection the server closed (it restarted) fails at
		// once: one more try, on a fresh one, within the same wait.
		got, err = r.store.Stamps(rctx, missing)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !r.failed.Swap(true) {
			r.log.Warn("shared tier did not answer in time; blocks without a stamp here are stripped", "shared", r.store.Name(), "conversation", conversation, "wait", r.wait, "err", err)
		}
		return nil
	}
	if r.failed.Swap(false) {
		r.log.Info("shared tier answers again", "shared", r.store.Name())
	}
	if len(got) == 0 {
		return nil
	}
	now := time.Now().UnixMilli()
	var add []db.StampRow
	for k, st := range got {
		st.Source, st.CreatedMs, st.Entry = db.SourceShared, now, ""
		rows[k] = st
		add = append(add, st)
	}
	// Recorded here so the next compile (and a restart) has them without
	// asking again; the compile goes on with them either way.
	if err := j.Write(ctx, func(ctx context.Context, tx *db.Tx, _ Emit) error {
		_, err := tx.InsertStamps(ctx, add)
		return err
	}); err != nil {
		r.log.Warn("stamps read from the shared tier not recorded here", "conversation", conversation, "err", err)
	}
	return nil
}
