package db

import (
	"context"
	"errors"
	"testing"

	"github.com/my-pi/bindery/binding"
)

func TestOutbox(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	put := func(sig, source string, fail bool) error {
		return d.Write(ctx, func(ctx context.Context, tx *Tx) error {
			_, err := tx.InsertStamps(ctx, []StampRow{{Stamp: binding.Stamp{Key: bdigest(sig), Seed: bdigest("s"), Chain: bdigest(sig), Model: "m"}, Source: source, Conversation: "c", Branch: "b", CreatedMs: 1}})
			if err == nil && fail {
				err = errors.New("rolled back")
			}
			return err
		})
	}
	keys := func() (out []string) {
		items, err := d.Outbox(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			out = append(out, string(it.Stamp.Key[:2]))
		}
		return out
	}
	if err := put("before", "accept", false); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.OutboxLen(ctx); n != 0 {
		t.Fatalf("a machine alone queued %d", n)
	}
	if err := d.EnableOutbox(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.OutboxLen(ctx); n != 1 {
		t.Fatalf("joining queued %d of the 1 stamp held", n)
	}
	put("after", "accept", false)
	put("from-team", SourceShared, false)
	put("rolled", "accept", true)
	items, err := d.Outbox(ctx, 100)
	if err != nil || len(items) != 2 || items[0].Stamp.Key != bdigest("before") || items[1].Stamp.Key != bdigest("after") || items[1].Stamp.Model != "m" {
		t.Fatalf("queued %+v %v", items, err)
	}
	if err := d.OutboxShipped(ctx, items[0].ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.OutboxLen(ctx); n != 1 {
		t.Fatalf("after shipping one: %d", n)
	}
	// Joining again (a restart) queues nothing twice.
	if err := d.EnableOutbox(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.OutboxLen(ctx); n != 1 {
		t.Fatalf("after a second join: %d (%v)", n, keys())
	}
}
