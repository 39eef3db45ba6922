package daemon

import (
	"fmt"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
)

// A release a host made at one leaf of a pi session reaches the leaves
// below that leaf and no other (design/binding.md, "Branches and forks";
// binding.ReleaseReaches decides it from the paths the daemon reads): the
// block a2 minted, released at the fork f1, is stripped at f2 below f1 and
// kept at u4 on the main line, whichever is compiled first, and again on
// a second compile of each (its leaf's path then taken from a kept one).
func TestPiReleaseReachesBelowItsLeaf(t *testing.T) {
	for _, forkFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("forkFirst=", forkFirst), func(t *testing.T) {
			e := newBindingEnv(t, nil)
			const sid = "0193e6c4-cccc-7000-8000-000000000001"
			p := &piIndex{tb: t, e: e, id: sid, path: "/sessions/" + sid + ".jsonl"}
			compile := p.compile
			p.linear(3)
			// The fork after a2 refuses a2's block (messages.3 is a2).
			p.user("f1", "a2")
			fork := compile("f1", []int{1, 2}, "fork")
			if r, err := e.client.Release(t.Context(), &api.ReleaseCall{Conversation: sid, CompileID: fork.CompileID, Path: "messages.3.content.0"}); err != nil || r.Released != 1 {
				t.Fatalf("release at f1: %+v %v", r, err)
			}
			p.user("f2", "f1")
			p.user("u4", "a3")
			below := func() {
				t.Helper()
				if got := compile("f2", []int{1, 2}, "below the fork").ThinkingStripped; got != 1 {
					t.Errorf("at f2, below the release's leaf: %d blocks stripped, want a2's", got)
				}
			}
			aside := func() {
				t.Helper()
				if got := compile("u4", []int{1, 2, 3}, "main line").ThinkingStripped; got != 0 {
					t.Errorf("at u4, off the release's leaf: %d blocks stripped, want none", got)
				}
			}
			if forkFirst {
				below()
				aside()
			} else {
				aside()
				below()
			}
			below()
			aside()
		})
	}
}

// TestPiLeafGoneBeforeItsPathIsRead: a compile at a leaf branchPath found,
// whose session file is removed before releaseTree reads the leaf's path
// (the watcher ingests while the compile gathers), takes the leaf as not
// ingested, as a whole: the release made at the fork's leaf reaches it
// (a2's block is stripped), and every remembered compile counts as on its
// branch, so the cache report measures the strip against the last
// accepted request (u3's, which sent a1's block). A leaf left "found" on
// an empty path is on no compile's branch: its report would say the
// prompt cache was untouched where bindery's strip broke it.
func TestPiLeafGoneBeforeItsPathIsRead(t *testing.T) {
	e := newBindingEnv(t, nil)
	const sid = "0193e6c4-cccc-7000-8000-000000000002"
	p := &piIndex{tb: t, e: e, id: sid, path: "/sessions/" + sid + ".jsonl"}
	p.linear(3)
	p.user("f1", "a2")
	fork := p.compile("f1", []int{1, 2}, "fork")
	if r, err := e.client.Release(t.Context(), &api.ReleaseCall{Conversation: sid, CompileID: fork.CompileID, Path: "messages.3.content.0"}); err != nil || r.Released != 1 {
		t.Fatalf("release at f1: %+v %v", r, err)
	}
	p.user("u4", "a3")
	if got := p.compile("u4", []int{1, 2, 3}, "main line").ThinkingStripped; got != 0 {
		t.Fatalf("at u4 before the file went: %d blocks stripped, want none", got)
	}
	ran := 0
	e.b.beforePathRead = func() {
		ran++
		if _, err := e.db.Ingest(t.Context(), db.Batch{Kind: db.Removed, Path: p.path}); err != nil {
			t.Errorf("remove %s: %v", p.path, err)
		}
	}
	ans := p.compile("u4", []int{1, 2, 3}, "main line, file gone")
	e.b.beforePathRead = nil
	if ran != 1 {
		t.Fatalf("the path was read %d times after branchPath found the leaf, want once (the test no longer reaches the window)", ran)
	}
	released := false
	for _, s := range ans.Strips {
		released = released || (s.Path == "messages.3.content.0" && s.Reason == "released")
	}
	if !released {
		t.Fatalf("at u4, its file removed before its path was read: strips %+v, want a2's block (messages.3.content.0) released: the release at f1 reaches a leaf bindery no longer has", ans.Strips)
	}
	if want := (api.CacheChange{FirstChange: "messages.1.content.0", Cause: "bindery"}); ans.Cache != want {
		t.Fatalf("at u4, its file removed before its path was read: cache %+v, want %+v (against u3's accepted request, which sent a1's block)", ans.Cache, want)
	}
}
