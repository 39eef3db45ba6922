package db

import (
	"context"
	"reflect"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// Compaction records round-trip and are first-wins; an unknown key has none.
func TestCompactionsFirstWins(t *testing.T) {
	d := mustOpen(t)
	first := binding.Compaction{Key: bdigest("c"), Chain: bdigest("chain"), Seed: bdigest("seed"), LastRole: "user", Compile: "c1"}
	other := first
	other.Chain, other.LastRole, other.Compile = bdigest("other"), "assistant", "c2"
	var added []int
	for _, c := range []binding.Compaction{first, other} {
		err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			n, err := tx.InsertCompactions(ctx, "conv", []binding.Compaction{c}, 7)
			added = append(added, n)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if added[0] != 1 || added[1] != 0 {
		t.Fatalf("added %v, want [1 0]", added)
	}
	got, err := d.Compactions(t.Context(), []binding.Digest{first.Key, bdigest("unknown")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[first.Key], first) {
		t.Fatalf("compactions %+v, want only %+v", got, first)
	}
}

// TestCompactionsThrough: a compaction's Through round-trips through the
// store, nearest first; a row without one (every row written before
// migration 012) reads as none.
func TestCompactionsThrough(t *testing.T) {
	d := mustOpen(t)
	with := binding.Compaction{Key: bdigest("c2"), Chain: bdigest("chain2"), Seed: bdigest("seed"), LastRole: "user", Compile: "c2",
		Through: []binding.Digest{bdigest("through1"), bdigest("through0")}}
	without := binding.Compaction{Key: bdigest("c1"), Chain: bdigest("chain1"), Seed: bdigest("seed"), LastRole: "user", Compile: "c1"}
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.InsertCompactions(ctx, "conv", []binding.Compaction{with, without}, 7)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Compactions(t.Context(), []binding.Digest{with.Key, without.Key})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[with.Key], with) || !reflect.DeepEqual(got[without.Key], without) || got[without.Key].Through != nil {
		t.Fatalf("compactions %+v, want %+v and %+v", got, with, without)
	}
}
