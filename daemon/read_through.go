package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync"
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
	tally  readTally

	// polled are the newest blocks already waited for (pollNewest): a
	// block no machine stamped (a reply never accepted) stays newest when
	// its request is retried, and is waited for once, not at each retry.
	mu     sync.Mutex
	polled map[binding.Digest]struct{}
}

// polledMax bounds polled; past it the set starts again.
const polledMax = 4096

// pollOnce reports whether newest may be waited for, and marks it.
func (r *readThrough) pollOnce(newest binding.Digest) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.polled[newest]; ok {
		return false
	}
	if r.polled == nil || len(r.polled) >= polledMax {
		r.polled = map[binding.Digest]struct{}{}
	}
	r.polled[newest] = struct{}{}
	return true
}

// readTally counts read-throughs for `bindery status` and the gateway's
// metrics: how many, how long they waited, how many the tier could not
// answer in time (their blocks stripped), and the stamps they found.
type readTally struct {
	asked, missed, found atomic.Int64
	waitedNs             atomic.Int64
	polls                atomic.Int64 // newest blocks waited for
}

func (t *readTally) health() (asked, missed, found, waitedMs int64) {
	return t.asked.Load(), t.missed.Load(), t.found.Load(), t.waitedNs.Load() / 1e6
}

// newestPoll bounds the wait for the request's newest block's stamp. In
// gateway mode the reply that minted it was served by another replica a
// moment ago, and the client asks again as soon as it has the reply: its
// stamp is on its way (that replica's accept, then its shipper), not
// missing. Asked again every newestEvery until it is there or this has
// passed; past it the block is stripped like any block without a stamp.
const (
	newestPoll  = 250 * time.Millisecond
	newestEvery = 10 * time.Millisecond
)

// fill adds to rows the stamps of need the shared tier holds; newest is
// the request's last block (see newestPoll).
func (r *readThrough) fill(ctx context.Context, j *Journal, conversation string, need []binding.Digest, newest binding.Digest, rows map[binding.Digest]db.StampRow) error {
	var missing []binding.Digest
	for _, k := range need {
		if _, ok := rows[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > sharedtier.MaxKeys {
		missing = missing[:sharedtier.MaxKeys]
	}
	began := time.Now()
	defer func() { r.tally.waitedNs.Add(int64(time.Since(began))) }()
	r.tally.asked.Add(1)
	rctx, cancel := context.WithTimeout(ctx, r.wait)
	r.store.Ready(rctx) // a failure is the read's to report
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
		r.tally.missed.Add(1)
		if !r.failed.Swap(true) {
			r.log.Warn("shared tier did not answer in time; blocks without a stamp here are stripped", "shared", r.store.Name(), "conversation", conversation, "wait", r.wait, "err", err)
		}
		return nil
	}
	if r.failed.Swap(false) {
		r.log.Info("shared tier answers again", "shared", r.store.Name())
	}
	if _, ok := rows[newest]; !ok && err == nil {
		if _, ok := got[newest]; !ok && slices.Contains(missing, newest) && r.pollOnce(newest) {
			got = r.pollNewest(ctx, newest, got)
		}
	}
	if len(got) == 0 {
		return nil
	}
	r.tally.found.Add(int64(len(got)))
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

// pollNewest asks the shared tier for newest until it has it, newestPoll
// has passed, or ctx ends, and adds it to got.
func (r *readThrough) pollNewest(ctx context.Context, newest binding.Digest, got map[binding.Digest]db.StampRow) map[binding.Digest]db.StampRow {
	r.tally.polls.Add(1)
	ctx, cancel := context.WithTimeout(ctx, min(newestPoll, r.wait))
	defer cancel()
	t := time.NewTicker(newestEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return got
		case <-t.C:
		}
		more, err := r.store.Stamps(ctx, []binding.Digest{newest})
		if err != nil {
			return got
		}
		if st, ok := more[newest]; ok {
			if got == nil {
				got = map[binding.Digest]db.StampRow{}
			}
			got[newest] = st
			return got
		}
	}
}
