package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// A write transaction finds every hot statement prepared on the writer;
// other SQL, and a context that is not a write's, fall back to preparing
// per call; both paths write the same rows.
func TestHotStatements(t *testing.T) {
	d := mustOpen(t)
	if len(d.hot) != len(hotWriteSQL) {
		t.Fatalf("%d hot statements prepared, want %d", len(d.hot), len(hotWriteSQL))
	}
	var seqs []int64
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		for _, q := range hotWriteSQL {
			if txStmt(ctx, tx.tx, q) == nil {
				t.Errorf("not reused in a write: %s", q)
			}
		}
		if txStmt(ctx, tx.tx, `SELECT 1`) != nil {
			t.Error("a statement that is not hot was found")
		}
		if txStmt(context.Background(), tx.tx, sqlAppendEvent) != nil {
			t.Error("a context without the writer's statements found one")
		}
		// the hot path and the fallback, alternately
		for i, c := range []context.Context{ctx, context.Background(), ctx, context.Background()} {
			ev, err := tx.AppendEvent(c, "test", "conv", map[string]any{"i": i})
			if err != nil {
				return err
			}
			seqs = append(seqs, ev.Seq)
			if err := tx.UpsertConversation(c, ConversationRow{ID: "conv", CreatedMs: int64(i + 1)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("event seqs %v: not consecutive", seqs)
		}
	}
	if n := count(t, d, `SELECT max(seq) FROM events`); int64(n) != seqs[len(seqs)-1] {
		t.Errorf("last event seq %d, table max %d", seqs[len(seqs)-1], n)
	}
	if n := count(t, d, `SELECT count(*) FROM events WHERE type = 'test'`); n != 4 {
		t.Errorf("%d events written, want 4", n)
	}
	if n := count(t, d, `SELECT count(*) FROM conversations`); n != 1 {
		t.Errorf("%d conversations, want 1", n)
	}
	// the statements stay usable across transactions and after a rollback
	for range 3 {
		err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			if _, err := tx.AppendEvent(ctx, "test", "conv", nil); err != nil {
				return err
			}
			return sql.ErrNoRows // roll back
		})
		if err != sql.ErrNoRows {
			t.Fatal(err)
		}
	}
	if err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		ev, err := tx.AppendEvent(ctx, "test", "conv", nil)
		if err == nil && ev.Seq <= seqs[len(seqs)-1] {
			t.Errorf("seq %d after %d", ev.Seq, seqs[len(seqs)-1])
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A savepoint (the journal wraps each call of a shared commit in one, on
// the prepared statements) undoes only its own fn's writes when fn fails,
// and the transaction goes on: over several savepoints in one transaction,
// in transaction after transaction, and through the per-call fallback.
func TestSavepointUndoesOnlyItsOwn(t *testing.T) {
	d := mustOpen(t)
	errFn := errors.New("this call fails")
	for round := range 3 {
		err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			for i, c := range []context.Context{ctx, ctx, context.Background(), ctx} {
				fail := i%2 == 1
				fnErr, err := tx.Savepoint(c, func() error {
					if _, err := tx.AppendEvent(ctx, "sp", fmt.Sprint(round, "-", i), nil); err != nil {
						return err
					}
					if fail {
						return errFn
					}
					return nil
				})
				if err != nil {
					return err
				}
				if fail != (fnErr == errFn) {
					t.Errorf("round %d call %d: fn error %v", round, i, fnErr)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := d.readers.QueryContext(t.Context(), `SELECT conversation FROM events WHERE type = 'sp' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	want := []string{"0-0", "0-2", "1-0", "1-2", "2-0", "2-2"}
	if !slices.Equal(got, want) {
		t.Fatalf("events kept %v, want %v (the failed calls' undone, the others' kept)", got, want)
	}
}
