package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// journalOn is a Journal on a real database in t.TempDir().
func journalOn(t *testing.T) *Journal {
	t.Helper()
	store, err := db.Open(t.Context(), filepath.Join(t.TempDir(), "j.db"), db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return &Journal{DB: store}
}

// upsert is a journal write of one conversation row.
func upsert(id string) func(ctx context.Context, tx *db.Tx, _ Emit) error {
	return func(ctx context.Context, tx *db.Tx, _ Emit) error {
		return tx.UpsertConversation(ctx, db.ConversationRow{ID: id, CreatedMs: 1})
	}
}

func wantStats(t *testing.T, what string, got, want JournalStats) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: journal stats %+v, want %+v", what, got, want)
	}
}

// A commit about to start waits for the writes announced to it (Expect),
// so they share its fsync; a withdrawn announcement releases it, and
// Gather bounds the wait for one that never comes.
func TestJournalGathersAnnouncedWrites(t *testing.T) {
	j := journalOn(t)
	j.Gather = time.Minute // only the announced write ends the wait

	first, second := j.Expect(), j.Expect()
	done := make(chan error, 1)
	go func() { done <- first.Write(context.Background(), upsert("first")) }()
	select {
	case err := <-done:
		t.Fatalf("the first announced write committed (err %v) while the second was still announced", err)
	case <-time.After(100 * time.Millisecond):
	}
	wantStats(t, "while the second is announced", j.Stats(), JournalStats{})
	if err := second.Write(context.Background(), upsert("second")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStats(t, "two announced writes", j.Stats(), JournalStats{Writes: 2, Commits: 1, Synced: 1})

	// Withdrawn: the waiting commit goes on.
	late := j.Expect()
	go func() { done <- j.Write(context.Background(), upsert("third")) }()
	select {
	case err := <-done:
		t.Fatalf("a write committed (err %v) while another was announced", err)
	case <-time.After(50 * time.Millisecond):
	}
	late.Withdraw()
	late.Withdraw() // a no-op
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStats(t, "after a withdrawal", j.Stats(), JournalStats{Writes: 3, Commits: 2, Synced: 2})

	// Never written: the bound ends the wait.
	j.Gather = 20 * time.Millisecond
	never := j.Expect()
	t0 := time.Now()
	if err := j.Write(context.Background(), upsert("fourth")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < j.Gather {
		t.Fatalf("a write with another announced committed after %v, before the bound %v", took, j.Gather)
	}
	never.Withdraw()
	wantStats(t, "after the bound", j.Stats(), JournalStats{Writes: 4, Commits: 3, Synced: 3})

	// Nothing announced: no wait at all, whatever the bound.
	j.Gather = time.Minute
	if err := j.Write(context.Background(), upsert("fifth")); err != nil {
		t.Fatal(err)
	}
	wantStats(t, "unannounced", j.Stats(), JournalStats{Writes: 5, Commits: 4, Synced: 4})
	st, err := j.DB.LoadConversation(t.Context(), "second")
	if err != nil || !st.Found {
		t.Fatalf("an announced write's row: %+v %v", st, err)
	}
}

// Sixteen accepts on sixteen conversations, queued while the journal
// commits something else, are committed in one transaction (one fsync),
// each answered and recorded.
func TestConcurrentAcceptsShareCommits(t *testing.T) {
	e := newBindingEnv(t, nil)
	const n = 16
	ids := make([]string, n)
	clients := make([]*api.Client, n)
	for i := range n {
		conv := fmt.Sprint("share", i)
		clients[i] = api.NewClient(e.sock)
		t.Cleanup(clients[i].Close)
		ans, err := clients[i].Compile(t.Context(), &api.CompileCall{Conversation: conv, Request: request(conv, 2, 20), Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ans.CompileID
	}

	// Hold the journal inside a commit until all sixteen accepts queue.
	before := e.j.Stats()
	started, hold := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- e.j.Write(context.Background(), func(ctx context.Context, tx *db.Tx, _ Emit) error {
			close(started)
			<-hold
			return nil
		})
	}()
	<-started
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = clients[i].Accept(context.Background(), &api.AcceptCall{CompileID: ids[i], Reply: reply(fmt.Sprint("share-reply-", i))})
		})
	}
	waitFor(t, "the accepts to queue", func() (bool, string) {
		e.j.qmu.Lock()
		q := len(e.j.queue)
		e.j.qmu.Unlock()
		return q == n, fmt.Sprintf("%d queued", q)
	})
	close(hold)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
	}
	// The sixteen accepts joined the held write's open group: one commit.
	wantStats(t, "sixteen queued accepts", e.j.Stats().Sub(before), JournalStats{Writes: 1 + n, Commits: 1, Synced: 1})
	for i, id := range ids {
		row, found, err := e.db.Compile(t.Context(), id)
		if err != nil || !found || row.AcceptedMs == 0 {
			t.Fatalf("compile %d (%s) after its accept: %+v found=%v err=%v", i, id, row, found, err)
		}
	}
}

// An open synced group runs each call as it queues, while other calls are
// still announced (the group's database work overlaps theirs), and
// commits them all once: the first call has run before the second is
// even written.
func TestJournalRunsCallsAsTheyQueue(t *testing.T) {
	j := journalOn(t)
	j.Gather = time.Minute // only the announced write ends the wait

	first, second := j.Expect(), j.Expect()
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- first.Write(context.Background(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
			close(ran)
			return upsert("first")(ctx, tx, emit)
		})
	}()
	select {
	case <-ran:
	case err := <-done:
		t.Fatalf("the first announced write committed (err %v) while the second was still announced", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first call did not run while the second was announced")
	}
	wantStats(t, "while the second is announced", j.Stats(), JournalStats{})
	if err := second.Write(context.Background(), upsert("second")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStats(t, "a call run before the next queued", j.Stats(), JournalStats{Writes: 2, Commits: 1, Synced: 1})
	for _, id := range []string{"first", "second"} {
		if st, err := j.DB.LoadConversation(t.Context(), id); err != nil || !st.Found {
			t.Fatalf("conversation %s after the shared commit: %+v %v", id, st, err)
		}
	}
}

// A call that joins an open group and fails undoes only its own work: the
// call before it and the one after it commit, in one transaction.
func TestJournalJoinedCallFailsAlone(t *testing.T) {
	j := journalOn(t)
	j.Gather = time.Minute

	second, third := j.Expect(), j.Expect()
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- j.Write(context.Background(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
			defer close(ran)
			return upsert("first")(ctx, tx, emit)
		})
	}()
	<-ran // the first call opened the group: the others join it
	failed := fmt.Errorf("the second call fails")
	secondDone := make(chan error, 1)
	go func() {
		secondDone <- second.Write(context.Background(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
			if err := upsert("second")(ctx, tx, emit); err != nil {
				return err
			}
			return failed
		})
	}()
	if err := third.Write(context.Background(), upsert("third")); err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != failed {
		t.Fatalf("the failing call's error: %v, want %v", err, failed)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantStats(t, "three calls, one failing", j.Stats(), JournalStats{Writes: 3, Commits: 1, Synced: 1})
	for id, want := range map[string]bool{"first": true, "second": false, "third": true} {
		st, err := j.DB.LoadConversation(t.Context(), id)
		if err != nil || st.Found != want {
			t.Fatalf("conversation %s stored %v (err %v), want %v", id, st.Found, err, want)
		}
	}
}

// A deferred group is not synced, so a synced write queued while it is
// open waits for a synced group of its own rather than joining it.
func TestJournalDeferredGroupLeavesSyncedWrite(t *testing.T) {
	j := journalOn(t)
	started, hold := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- j.WriteDeferred(context.Background(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
			close(started)
			<-hold
			return upsert("deferred")(ctx, tx, emit)
		})
	}()
	<-started
	synced := make(chan error, 1)
	go func() { synced <- j.Write(context.Background(), upsert("synced")) }()
	waitFor(t, "the synced write to queue", func() (bool, string) {
		j.qmu.Lock()
		q := len(j.queue)
		j.qmu.Unlock()
		return q == 1, fmt.Sprintf("%d queued", q)
	})
	close(hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	wantStats(t, "a synced write behind a deferred group", j.Stats(), JournalStats{Writes: 2, Commits: 2, Synced: 1})
}
