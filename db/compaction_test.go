package db

import (
	"context"
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
	if len(got) != 1 || got[first.Key] != first {
		t.Fatalf("compactions %+v, want only %+v", got, first)
	}
}
