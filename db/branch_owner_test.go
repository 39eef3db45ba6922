package db

import (
	"context"
	"testing"
)

// SetBranchOwner moves the owner of a stored branch and leaves the rest
// of its row alone; a branch without a row gets one, owner set, so an
// accept whose mirror is wrong about the row still records its owner.
func TestSetBranchOwner(t *testing.T) {
	d := mustOpen(t)
	insertCompile(t, d, "c1", "conv", "b")
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		if err := tx.UpsertBranch(ctx, BranchRow{Conversation: "conv", Branch: "fork", ParentConversation: "p", ParentBranch: "pb", ParentRelease: 3, CreatedMs: 1}); err != nil {
			return err
		}
		if err := tx.SetBranchOwner(ctx, "conv", "fork", "c1", 7); err != nil {
			return err
		}
		return tx.SetBranchOwner(ctx, "conv", "new", "c2", 8)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.LoadConversation(t.Context(), "conv")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]BranchRow{}
	for _, b := range st.Branches {
		got[b.Branch] = b
	}
	if b := got["fork"]; b.Owner != "c1" || b.ParentConversation != "p" || b.ParentBranch != "pb" || b.ParentRelease != 3 || b.CreatedMs != 1 {
		t.Fatalf("branch fork after SetBranchOwner: %+v", b)
	}
	if b, ok := got["new"]; !ok || b.Owner != "c2" || b.CreatedMs != 8 {
		t.Fatalf("branch without a row: %+v (found %v)", b, ok)
	}
}
