package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// TestStampsAddedSince: every write that records a stamp is logged once
// it ends, committed or not, with exactly the keys it recorded (not the
// ones already stamped); a position answers the keys since it, and one the
// bounded log no longer holds answers not ok.
func TestStampsAddedSince(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	row := func(k string) StampRow {
		return StampRow{Stamp: binding.Stamp{Key: bdigest(k), Seed: bdigest("seed"), Chain: bdigest(k + "chain"), Model: "m"},
			Source: "accept", Conversation: "conv", Branch: "b", CreatedMs: 1}
	}
	write := func(fail bool, keys ...string) {
		t.Helper()
		var rows []StampRow
		for _, k := range keys {
			rows = append(rows, row(k))
		}
		err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.InsertStamps(ctx, rows); err != nil {
				return err
			}
			if fail {
				return errors.New("refused")
			}
			return nil
		})
		if (err != nil) != fail {
			t.Fatal(err)
		}
	}
	since := func(g uint64) ([]binding.Digest, uint64, bool) {
		keys, now, ok := d.StampsAddedSince(g)
		return keys, now, ok
	}
	start := d.StampsLogged()
	write(false, "k1", "k2")
	mid := d.StampsLogged()
	write(false, "k2", "k3") // k2 is stamped already: only k3 is new
	write(true, "k4")        // rolled back, logged all the same
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return nil }); err != nil {
		t.Fatal(err) // a write without stamps is not logged
	}
	keys, now, ok := since(start)
	if want := []binding.Digest{bdigest("k1"), bdigest("k2"), bdigest("k3"), bdigest("k4")}; !ok || !slices.Equal(keys, want) || now != start+3 {
		t.Fatalf("since start: %x %d %v", keys, now, ok)
	}
	if keys, _, ok := since(mid); !ok || len(keys) != 2 || keys[0] != bdigest("k3") {
		t.Fatalf("since mid: %x %v", keys, ok)
	}
	if keys, _, ok := since(now); !ok || len(keys) != 0 {
		t.Fatalf("since now: %x %v", keys, ok)
	}
	if _, _, ok := since(now + 1); ok {
		t.Fatal("a position past the log answered ok")
	}
	// past the commits bound, the oldest position is gone
	for i := range stampsAddedCommits {
		d.added.logged([]binding.Digest{bdigest(fmt.Sprint("many", i))})
	}
	if _, _, ok := since(start); ok {
		t.Fatal("a position older than the log answered ok")
	}
	if keys, _, ok := since(d.StampsLogged() - 1); !ok || len(keys) != 1 {
		t.Fatalf("last commit: %d keys, %v", len(keys), ok)
	}
	// past the keys bound, too
	at := d.StampsLogged()
	d.added.logged(make([]binding.Digest, stampsAddedKeys))
	if _, _, ok := since(at); !ok {
		t.Fatal("the one commit over the keys bound is not kept")
	}
	d.added.logged([]binding.Digest{bdigest("last")})
	if _, _, ok := since(at); ok {
		t.Fatal("the log kept more keys than its bound")
	}
	if d.added.total > stampsAddedKeys+1 || len(d.added.keys) > stampsAddedCommits {
		t.Fatalf("log holds %d keys in %d commits", d.added.total, len(d.added.keys))
	}
}
