package db

import (
	"context"
	"testing"
	"time"
)

// A write whose fn panics rolls back and lets the panic go on: the open
// transaction must not keep the only writer connection (conn.Close waits
// for it forever), or every later write hangs.
func TestWritePanicRollsBack(t *testing.T) {
	d := mustOpen(t)
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			if _, err := tx.AppendEvent(ctx, "test", "pan", nil); err != nil {
				return err
			}
			panic("fn broke")
		})
	}()
	select {
	case p := <-done:
		if p != "fn broke" {
			t.Fatalf("recovered %v, want the fn's panic", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a panicking write never unwound")
	}
	later := make(chan error, 1)
	go func() {
		later <- d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			_, err := tx.AppendEvent(ctx, "test", "after", nil)
			return err
		})
	}()
	select {
	case err := <-later:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer stayed wedged after a panicking write")
	}
	evs, _, err := d.EventsSince(t.Context(), 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Conversation != "after" {
		t.Fatalf("events %+v: want only the later write's", evs)
	}
}
