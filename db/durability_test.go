package db

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// writerSynchronous reads the writer connection's PRAGMA synchronous
// (2 FULL, 1 NORMAL) inside a write, where it is the writer's own.
func writerSynchronous(t *testing.T, d *DB, dur Durability) int {
	t.Helper()
	var v int
	err := d.writeAs(t.Context(), dur, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&v)
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDurability: a Synced write commits with synchronous=FULL (fsynced
// before it returns), a Deferred one with NORMAL, in any order; NoSync
// never syncs. What a Deferred write committed is read back by the next
// open, as after a crash of the process.
func TestDurability(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bindery.db")
	d, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dur  Durability
		want int
	}{{Synced, 2}, {Deferred, 1}, {Deferred, 1}, {Synced, 2}, {Deferred, 1}} {
		if got := writerSynchronous(t, d, c.dur); got != c.want {
			t.Fatalf("durability %d: synchronous = %d, want %d", c.dur, got, c.want)
		}
	}
	err = d.WriteAs(t.Context(), Deferred, func(ctx context.Context, tx *Tx) error {
		return tx.UpsertConversation(ctx, ConversationRow{ID: "deferred", CreatedMs: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := d.LoadConversation(t.Context(), "deferred")
	if err != nil || !st.Found {
		t.Fatalf("the deferred write after reopening: %+v %v", st, err)
	}

	ns, err := Open(t.Context(), filepath.Join(t.TempDir(), "nosync.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if got := writerSynchronous(t, ns, Synced); got != 1 {
		t.Fatalf("NoSync: synchronous = %d, want 1", got)
	}
}
