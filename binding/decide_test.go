package binding

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Scenario numbers refer to research/preserved-thinking.md section 8.

// threeTurns runs u1 -> R1, u2 -> R2 on opus 5.5 and returns the history
// ending with R2 (engaged from the first accept).
func threeTurns(s *sim) []string {
	h := []string{u("u1")}
	r1 := a(th("S1"), tx("a1"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	r2 := a(th("S2"), tx("a2"))
	c := s.round(opus55, "sys", h, r2)
	if len(c.Strips) != 0 {
		s.t.Fatalf("turn 2 strips %v", reasons(c))
	}
	return append(h, r2)
}

func TestPureAppend(t *testing.T) { // 1
	s := newSim(t)
	h := threeTurns(s)
	h = append(h, u("u3"))
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	if c.Cache.Cause != CauseNone || c.Cache.Path != "" {
		t.Fatalf("cache %+v", c.Cache)
	}
	if len(c.Kept) != 2 || c.Kept[0] != key("S1") || c.Kept[1] != key("S2") {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestSystemChangedForOneTurnComesBack(t *testing.T) { // 2, heartbeat
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	hb := a(tx("quiet"))
	c := s.round(opus55, "sys + heartbeat", h, hb)
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
	if c.Cache.Path != "system" || c.Cache.Cause != CauseHost {
		t.Fatalf("cache %+v", c.Cache)
	}
	// The next ordinary round keeps everything again: seed-changed is not a release.
	h = append(h, hb, u("u4"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
}

func TestSystemChangedForGood(t *testing.T) { // 2, 3, 42
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	r3 := a(th("S3"), tx("a3"))
	c := s.round(opus55, "sys v2", h, r3)
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
	h = append(h, r3, u("u4"))
	c, _ = s.compile(body(opus55, "sys v2", h))
	// S3 was minted with nothing read before it: the first kept block may
	// have any predecessor.
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
	if !slices.Equal(c.Kept, []Digest{key("S3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
	if len(c.Record.Strips) != 0 {
		t.Fatalf("seed-changed became releases: %v", c.Record.Strips)
	}
}

func TestEarlierUserTextEdited(t *testing.T) { // 7, fold
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	h[0] = u("u1 Be brief.")
	r3 := a(th("S3"), tx("a3"))
	c := s.round(opus55, "sys", h, r3)
	expectStrips(t, c, "messages.1.content.0 prefix-changed", "messages.3.content.0 prefix-changed")
	if c.Cache.Path != "messages.0.content.0" || c.Cache.Cause != CauseHost {
		t.Fatalf("cache %+v", c.Cache)
	}
	// Accepted: both released; S3 minted after the edit stays valid.
	h = append(h, r3, u("u4"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 released", "messages.3.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestEditBetweenBlocks(t *testing.T) { // 8
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	h[2] = u("u2 edited") // between S1 (msg 1) and S2 (msg 3)
	r3 := a(th("S3"), tx("a3"))
	c := s.round(opus55, "sys", h, r3)
	expectStrips(t, c, "messages.3.content.0 prefix-changed")
	h = append(h, r3, u("u4"))
	c, _ = s.compile(body(opus55, "sys", h))
	// S3 was minted reading S1 (S2 stripped): S1, S3 is a run.
	expectStrips(t, c, "messages.3.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S1"), key("S3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestFold(t *testing.T) { // seed: a fold replaces old turns with a summary
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	r3 := a(th("S3"), tx("a3"))
	s.round(opus55, "sys", h, r3)
	h = append(h, r3, u("u4"))
	folded := append([]string{u("summary of u1..a2")}, h[4:]...) // u3, R3, u4
	r4 := a(th("S4"), tx("a4"))
	c := s.round(opus55, "sys", folded, r4)
	expectStrips(t, c, "messages.2.content.0 prefix-changed")
	folded = append(folded, r4, u("u5"))
	c, _ = s.compile(body(opus55, "sys", folded))
	expectStrips(t, c, "messages.2.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S4")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestEditInsideAMessage(t *testing.T) { // seed: an edit within a message
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(tx("preamble"), th("S1"), tx("a1"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	// After the block: no effect. Before it, in the same message: prefix changed.
	h[1] = a(tx("preamble"), th("S1"), tx("a1 edited"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	h[1] = a(tx("preamble edited"), th("S1"), tx("a1"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.1 prefix-changed")
}

func TestToolLoop(t *testing.T) { // seed: tool loop; 18: latest message all-or-nothing
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(th("T1"), tu("t1"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, tr("t1", "file"))
	r2 := a(th("T2"), th("T3"), tu("t2"))
	c := s.round(opus55, "sys", h, r2)
	expectStrips(t, c)
	h = append(h, r2, tr("t2", "file2"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	// The host rewrites the first tool result: T2, T3 (latest message) go together.
	h[2] = tr("t1", "[stubbed]")
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 prefix-changed", "messages.3.content.1 prefix-changed")
}

func TestLatestMessageAllOrNothing(t *testing.T) { // 18
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(th("A1"), tx("x"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	r2 := a(th("B1"), th("B2"), tu("t"))
	s.round(opus55, "sys", h, r2)
	h = append(h, r2, tr("t", "r"))
	c0, _ := s.compile(body(opus55, "sys", h))
	// A 400 named B2: it and every later block the compile sent go.
	rel, err := ReleaseAtPath(s.recs[c0.ID], "messages.3.content.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rel) != 1 || rel[0].Key != key("B2") || rel[0].Reason != ReleaseHost || rel[0].Path != "messages.3.content.1" {
		t.Fatalf("release %+v", rel)
	}
	rel, _ = ReleaseAtPath(s.recs[c0.ID], "messages.1.content.0")
	if len(rel) != 3 {
		t.Fatalf("release from A1: %+v", rel)
	}
	if _, err := ReleaseAtPath(s.recs[c0.ID], "messages.2.content.0"); !errors.Is(err, ErrBadPath) {
		t.Fatalf("non-thinking path: %v", err)
	}
	s.rel["main"] = map[Digest]bool{key("B2"): true}
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 gap", "messages.3.content.1 released")
	if !slices.Equal(c.Kept, []Digest{key("A1")}) {
		t.Fatalf("kept %v", c.Kept)
	}
	// The rule holds on every thinking model, binding or not.
	no := false
	c, _ = s.compileOpt(copt{binds: &no}, body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 gap", "messages.3.content.1 released")
	c, _ = s.compile(body("claude-sonnet-5", "sys", h))
	expectStrips(t, c, "messages.3.content.0 gap", "messages.3.content.1 released")
}

func TestBeforeAndAtFirstAcceptance(t *testing.T) { // seed: engagement
	s := newSim(t)
	// History minted before bindery knew the conversation.
	h := []string{u("u1"), a(th("H1"), tx("a1")), u("u2"), a(th("H2"), tx("a2")), u("u3")}
	s.mint(body(opus55, "sys", h[:1]), h[1])
	s.mint(body(opus55, "sys", h[:3]), h[3])
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c) // not engaged: valid unless released
	if c.Engaged || c.FirstAfterEngagement {
		t.Fatalf("engaged %+v", c)
	}
	// A dry run decides the same and records nothing.
	d, _ := s.compileOpt(copt{dry: true}, body(opus55, "sys", h))
	expectStrips(t, d)
	if _, err := s.accept(d.ID, ""); !errors.Is(err, ErrDryRun) || Code(err) != "dry-run" {
		t.Fatalf("accept dry: %v", err)
	}
	r3 := a(th("S3"), tx("a3"))
	s.mint(s.lastSent[c.ID], r3)
	out, err := s.accept(c.ID, r3)
	if err != nil || !out.Engage || len(out.Stamps) != 1 || len(out.Releases) != 0 {
		t.Fatalf("first accept %+v %v", out, err)
	}
	// The first compile after engagement strips unstamped history once.
	h = append(h, r3, u("u4"))
	c, sent := s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 no-stamp", "messages.3.content.0 no-stamp")
	if !c.FirstAfterEngagement || c.Cache.Cause != CauseBindery || c.Cache.Path != "messages.1.content.0" {
		t.Fatalf("first after engagement %v cache %+v", c.FirstAfterEngagement, c.Cache)
	}
	r4 := a(th("S4"), tx("a4"))
	s.mint(sent, r4)
	if _, err := s.accept(c.ID, r4); err != nil {
		t.Fatal(err)
	}
	h = append(h, r4, u("u5"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 released", "messages.3.content.0 released")
	if c.FirstAfterEngagement || c.Cache.Cause != CauseNone {
		t.Fatalf("second compile %+v", c.Cache)
	}
	// A repeated accept is a no-op.
	out, err = s.accept(s.owner["main"].ID, r4)
	if err != nil || !out.Noop {
		t.Fatalf("repeat accept %+v %v", out, err)
	}
}

func TestMissingAcceptAttributedByPrefix(t *testing.T) { // seed: late/lost/missing accepts
	s := newSim(t)
	h := threeTurns(s)
	h = append(h, u("u3"))
	c3, sent := s.compile(body(opus55, "sys", h))
	r3 := a(th("S3"), tx("a3"))
	s.mint(sent, r3) // the accept never arrives
	h = append(h, r3, u("u4"))
	c4, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c4)
	if c4.Stamped != 1 || len(c4.Persist.Stamps) != 1 || c4.Persist.Stamps[0] != *s.truth[key("S3")] {
		t.Fatalf("attributed %+v want %+v", c4.Persist.Stamps, s.truth[key("S3")])
	}
	// The late accept stamps nothing twice and does not take the owner back.
	s.accept(c4.ID, "")
	out, err := s.accept(c3.ID, r3)
	if err != nil || len(out.Stamps) != 0 || out.Owner {
		t.Fatalf("late accept %+v %v", out, err)
	}
}

func TestRaceNextCompileBeforeAccept(t *testing.T) { // pi race, tool loop
	s := newSim(t)
	h := threeTurns(s)
	h = append(h, u("u3"))
	c3, sent := s.compile(body(opus55, "sys", h))
	r3 := a(th("S3"), tu("t"))
	s.mint(sent, r3)
	h = append(h, r3, tr("t", "x"))
	c4, _ := s.compile(body(opus55, "sys", h)) // before c3's accept
	expectStrips(t, c4)
	if _, err := s.accept(c3.ID, r3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.accept(c4.ID, ""); err != nil {
		t.Fatal(err)
	}
}

func TestTwoCompilesAtOneHead(t *testing.T) { // seed: heartbeat + ordinary round
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	hb, hbSent := s.compile(body(opus55, "sys + heartbeat", h))
	ord, _ := s.compile(body(opus55, "sys", h))
	r := a(th("H"), tx("quiet"))
	s.mint(hbSent, r) // the heartbeat's reply; neither accept says so
	h2 := append(slices.Clone(h), r, u("u4"))
	c, _ := s.compile(body(opus55, "sys", h2))
	expectStrips(t, c, "messages.5.content.0 no-stamp")
	if len(c.Skipped) != 1 || c.Skipped[0].Message != 5 || len(c.Skipped[0].Compiles) != 2 {
		t.Fatalf("skipped %+v", c.Skipped)
	}
	_ = ord
	// An accept with the reply says which: H is stamped with the heartbeat's
	// seed, so an ordinary compile strips it as seed-changed (not released).
	if _, err := s.accept(hb.ID, r); err != nil {
		t.Fatal(err)
	}
	c, _ = s.compile(body(opus55, "sys", h2))
	expectStrips(t, c, "messages.5.content.0 seed-changed")
	c, _ = s.compile(body(opus55, "sys + heartbeat", h2))
	expectStrips(t, c, "messages.1.content.0 seed-changed", "messages.3.content.0 seed-changed")
}

func TestOverlappingRoundsReplyPassed(t *testing.T) { // seed: overlap on one branch
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	hb, hbSent := s.compile(body(opus55, "sys + heartbeat", h))
	ord, ordSent := s.compile(body(opus55, "sys", h))
	rh := a(th("H1"), tx("quiet"))
	ro := a(th("O1"), tx("answer"))
	s.mint(hbSent, rh)
	s.mint(ordSent, ro)
	if _, err := s.accept(hb.ID, rh); err != nil {
		t.Fatal(err)
	}
	if _, err := s.accept(ord.ID, ro); err != nil {
		t.Fatal(err)
	}
	// The host stored the heartbeat's reply: an ordinary compile must not send H1.
	c, _ := s.compile(body(opus55, "sys", append(slices.Clone(h), rh, u("u4"))))
	expectStrips(t, c, "messages.5.content.0 seed-changed")
	c, _ = s.compile(body(opus55, "sys", append(slices.Clone(h), ro, u("u4"))))
	expectStrips(t, c)
}

func TestCompilesRemembered(t *testing.T) { // seed: the 32 compiles remembered
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	first, sent := s.compile(body(opus55, "sys", h))
	r := a(th("S3"), tx("a3"))
	s.mint(sent, r)
	for i := 0; i < MinRemembered-1; i++ {
		s.compile(body(opus55, "sys", append(slices.Clone(h), u("other"))))
	}
	// 32 unaccepted remembered: the first still attributes the reply.
	c, _ := s.compileOpt(copt{dry: true}, body(opus55, "sys", append(slices.Clone(h), r, u("u4"))))
	expectStrips(t, c)
	s.compile(body(opus55, "sys", append(slices.Clone(h), u("other"))))
	// The 33rd pushes it out: accept is unknown, attribution gone.
	if _, err := s.accept(first.ID, r); !errors.Is(err, ErrUnknownCompile) || Code(err) != "unknown-compile" {
		t.Fatalf("accept forgotten: %v", err)
	}
	c, _ = s.compile(body(opus55, "sys", append(slices.Clone(h), r, u("u4"))))
	expectStrips(t, c, "messages.5.content.0 no-stamp")
}

func TestReplyOnAnotherBranch(t *testing.T) { // seed; 50: splice
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	_, sent := s.compileOpt(copt{branch: "B"}, body(opus55, "sys", append(slices.Clone(h), u("b only"))))
	r := a(th("X"), tx("x"))
	s.mint(sent, r)
	// The reply shows up on main after u3: nothing on main sent that prefix.
	c, _ := s.compile(body(opus55, "sys", append(slices.Clone(h), r, u("u4"))))
	expectStrips(t, c, "messages.5.content.0 no-stamp")
}

func TestModelSwitchDownAndBack(t *testing.T) { // 29, 31
	s := newSim(t)
	const fable = "claude-fable-5-1"
	h := []string{u("u1")}
	r1 := a(th("F1"), tx("a1"))
	s.round(fable, "sys", h, r1)
	h = append(h, r1, u("u2"))
	r2 := a(th("F2"), tx("a2"))
	s.round(fable, "sys", h, r2)
	h = append(h, r2, u("u3"))
	// Down to Opus 5.5: Fable blocks are unreadable, not released.
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 model-unreadable", "messages.3.content.0 model-unreadable")
	if len(c.Record.Strips) != 0 {
		t.Fatalf("unreadable released %+v", c.Record.Strips)
	}
	s.accept(c.ID, "")
	// Back up: readable again.
	c, _ = s.compile(body(fable, "sys", h))
	expectStrips(t, c)
	// Fable 5.2 blocks are unreadable by Fable 5.1 too.
	if s.models.Reads(fable, "claude-fable-5-2") || !s.models.Reads("claude-fable-5-2", "claude-mythos-5-2") {
		t.Fatal("5.2 read rule")
	}
}

func TestModelUnbound(t *testing.T) { // a non-binding model's blocks under a binding target
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(th("N1"), tx("a1"))
	s.round("claude-sonnet-5", "sys", h, r1)
	h = append(h, r1, u("u2"))
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 model-unbound")
	if len(c.Record.Strips) != 1 {
		t.Fatalf("model-unbound must release: %+v", c.Record.Strips)
	}
}

func TestBindsThinkingFalse(t *testing.T) { // seed: a target that does not bind
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	h[0] = u("edited")
	no := false
	c, _ := s.compileOpt(copt{binds: &no}, body(opus55, "sys", h))
	expectStrips(t, c)
	// Stamping goes on under it.
	r3 := a(th("S3"), tx("a3"))
	s.mint(s.lastSent[c.ID], r3)
	out, _ := s.accept(c.ID, r3)
	if len(out.Stamps) != 1 {
		t.Fatalf("stamps %+v", out.Stamps)
	}
	// Released stays released.
	s.rel["main"] = map[Digest]bool{key("S2"): true}
	c, _ = s.compileOpt(copt{binds: &no}, body(opus55, "sys", append(h, r3, u("u4"))))
	// S3 read S2: with S2 out, S1 and S3 are no run, but a target that
	// does not bind has no run rule (choose.go): both stay.
	expectStrips(t, c, "messages.3.content.0 released")
	// The table's default for a non-binding model.
	c, _ = s.compile(body("claude-sonnet-5-20260601", "sys", append(h, r3, u("u4"))))
	if c.Binds {
		t.Fatal("sonnet 5 binds")
	}
}

func TestEmptiedMessageDropped(t *testing.T) { // seed: an emptied message
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(th("E1")) // a reply with only thinking
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	h[0] = u("u1 edited")
	r2 := a(th("E2"), tx("a2"))
	c := s.round(opus55, "sys", h, r2)
	expectStrips(t, c, "messages.1.content.0 prefix-changed")
	if !slices.Equal(c.Dropped, []int{1}) {
		t.Fatalf("dropped %v", c.Dropped)
	}
	// The host still sends the emptied message; it is dropped again, and E2
	// (minted without it) is valid against the chain as sent.
	h = append(h, r2, u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 released")
	if !slices.Equal(c.Dropped, []int{1}) || !slices.Equal(c.Kept, []Digest{key("E2")}) {
		t.Fatalf("dropped %v kept %v", c.Dropped, c.Kept)
	}
	r3 := a(th("E3"), tx("a3"))
	s.mint(sent, r3)
	if _, err := s.accept(c.ID, r3); err != nil {
		t.Fatal(err)
	}
	h = append(h, r3, u("u4"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.1.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("E2"), key("E3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestCompactionRestartsThePrefix(t *testing.T) { // 36, 37
	s := newSim(t)
	h := []string{u("old 1"), a(tx("old 2")), u("u1"), a(compaction("summary"), tx("ok")), u("u2")}
	r := a(th("C1"), tx("a"))
	s.round(opus55, "sys", h, r)
	h = append(h, r, u("u3"))
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	// History before the compaction block pruned: still valid.
	pruned := h[3:]
	c, _ = s.compile(body(opus55, "sys", pruned))
	expectStrips(t, c)
}

func TestGapAndReinsert(t *testing.T) { // 19, 20, 16, 21
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	r3 := a(th("S3"), tx("a3"))
	s.round(opus55, "sys", h, r3)
	h = append(h, r3, u("u4"))
	// Oldest removed by the host: the rest is a run.
	noS1 := slices.Clone(h)
	noS1[1] = a(tx("a1"))
	c, _ := s.compile(body(opus55, "sys", noS1))
	expectStrips(t, c)
	// Middle removed by the host: S3 named S2 as its predecessor.
	noS2 := slices.Clone(h)
	noS2[3] = a(tx("a2"))
	c, _ = s.compile(body(opus55, "sys", noS2))
	expectStrips(t, c, "messages.1.content.0 gap")
	// Reordered: S2 moved before S1's message... keeps the longest run ending latest.
	swapped := slices.Clone(h)
	swapped[1], swapped[3] = a(th("S2"), tx("a1")), a(th("S1"), tx("a2"))
	c, _ = s.compile(body(opus55, "sys", swapped))
	for _, st := range c.Strips {
		if st.Key == key("S3") {
			t.Fatalf("latest message stripped: %v", reasons(c))
		}
	}
}

func TestNotGreedyLongestChain(t *testing.T) {
	// Verdicts and preds built by hand: A<-B, C (pred none), D<-C ... the
	// choice takes the latest message's run if any chain keeps it, else the
	// longest, then the one ending latest.
	s := newSim(t)
	s.engaged = true
	h := []string{u("1"), a(th("A"), tx("x")), u("2"), a(th("B"), tx("x")), u("3"), a(th("C"), tx("x")), u("4"), a(th("D"), tx("x")), u("5"), a(th("E"), tx("x")), u("6")}
	req, _ := ParseRequest(body(opus55, "sys", h))
	st := map[Digest]*Stamp{}
	pred := map[string]string{"A": "", "B": "A", "C": "", "D": "C", "E": "D"}
	for i := 1; i < len(h); i += 2 {
		b := req.Messages[i].Blocks[0]
		sig := string("ABCDE"[i/2])
		var p Digest
		if pred[sig] != "" {
			p = key(pred[sig])
		}
		st[b.Key] = &Stamp{Key: b.Key, Seed: req.Seed, Chain: b.Chain, Pred: p, Model: opus55}
	}
	c, err := Compile(CompileInput{ID: "x", Request: req, Engaged: true, Stamps: StampsFor(req, st)})
	if err != nil {
		t.Fatal(err)
	}
	expectStrips(t, c, "messages.1.content.0 gap", "messages.3.content.0 gap")
	// Without a latest-message chain: longest wins over latest.
	h2 := append(slices.Clone(h[:9]), u("5"), a(tx("no thinking")), u("6"))
	req2, _ := ParseRequest(body(opus55, "sys", h2))
	c, _ = Compile(CompileInput{ID: "y", Request: req2, Engaged: true, Stamps: StampsFor(req2, st)})
	// A-B (len 2) vs C-D (len 2): tie, ending latest (D).
	expectStrips(t, c, "messages.1.content.0 gap", "messages.3.content.0 gap")
	// Make B invalid: C-D (2) beats A (1).
	st2 := maps(st)
	delete(st2, key("B"))
	c, _ = Compile(CompileInput{ID: "z", Request: req2, Engaged: true, Stamps: StampsFor(req2, st2)})
	expectStrips(t, c, "messages.1.content.0 gap", "messages.3.content.0 no-stamp")
}

// TestStampsByPosition: CompileInput.Stamps is read by position, one per
// key StampKeys lists (a key the request repeats has one each time); a
// list of another length is a clear error, not a decision on someone
// else's stamps.
func TestStampsByPosition(t *testing.T) {
	h := []string{u("q"), a(th("A")), u("q2"), a(th("B")), u("q3")}
	req, _ := ParseRequest(body(opus55, "sys", h))
	keys := StampKeys(req)
	st := make([]*Stamp, len(keys))
	for i, k := range keys {
		b := req.Messages[2*i+1].Blocks[0]
		st[i] = &Stamp{Key: k, Seed: req.Seed, Chain: b.Chain, Model: opus55}
	}
	st[1].Pred = keys[0]
	c, err := Compile(CompileInput{ID: "x", Request: req, Engaged: true, Stamps: st})
	if err != nil {
		t.Fatal(err)
	}
	expectStrips(t, c)
	// The same stamps, named at the wrong positions: B's stamp for A.
	c, err = Compile(CompileInput{ID: "y", Request: req, Engaged: true, Stamps: []*Stamp{st[1], nil}})
	if err != nil {
		t.Fatal(err)
	}
	expectStrips(t, c, "messages.1.content.0 prefix-changed", "messages.3.content.0 no-stamp")
	for _, n := range []int{1, 3} {
		if _, err := Compile(CompileInput{ID: "z", Request: req, Engaged: true, Stamps: make([]*Stamp, n)}); err == nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d stamps given for the request's 2 signed thinking blocks", n)) {
			t.Fatalf("%d stamps for 2 blocks: %v", n, err)
		}
	}
	if got := AppendStampKeys([]Digest{{9}}, req); !slices.Equal(got, append([]Digest{{9}}, keys...)) {
		t.Fatalf("AppendStampKeys: %v", got)
	}
	if got := StampsFor(req, map[Digest]*Stamp{keys[1]: st[1]}); len(got) != 2 || got[0] != nil || got[1] != st[1] {
		t.Fatalf("StampsFor: %v", got)
	}
}

func maps(m map[Digest]*Stamp) map[Digest]*Stamp {
	o := map[Digest]*Stamp{}
	for k, v := range m {
		o[k] = v
	}
	return o
}

func TestUnstampedPredecessorAssumption(t *testing.T) {
	// Before engagement nothing is stamped: a block is assumed to have read
	// the previous block of the request, released or not (decision: C may
	// have been minted while B was still sent; keeping A next to C would
	// then be refused, stripping A only costs retention).
	h := []string{u("1"), a(th("A"), tx("x")), u("2"), a(th("B"), tx("x")), u("3"), a(th("C"), tx("x")), u("4")}
	req, _ := ParseRequest(body(opus55, "sys", h))
	c, _ := Compile(CompileInput{ID: "x", Request: req, Released: map[Digest]bool{key("B"): true}})
	expectStrips(t, c, "messages.1.content.0 gap", "messages.3.content.0 released")
	// A block the target cannot read is skipped: the model never read it.
	// Opus 5.5 blocks on Sonnet 5 (no binding): B unreadable, C read A.
	st := map[Digest]*Stamp{key("B"): {Key: key("B"), Model: opus55}}
	req, _ = ParseRequest(body("claude-sonnet-5", "sys", h))
	c, _ = Compile(CompileInput{ID: "y", Request: req, Engaged: true, Stamps: StampsFor(req, st)})
	expectStrips(t, c)
	if !slices.Equal(c.Kept, []Digest{key("A"), key("B"), key("C")}) || c.Record.LastRead != key("C") || !c.Record.Kept[1].Unreadable {
		t.Fatalf("kept %v %+v", c.Kept, c.Record.Kept)
	}
}

func TestRefusedCompileIgnoredByAttribution(t *testing.T) {
	// A compile the provider refused (bad signature) and its retry at the
	// same head differ in what they kept; the refused one minted nothing.
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	bad, _ := s.compile(body(opus55, "sys", h))
	s.rel["main"] = map[Digest]bool{key("S2"): true} // released by signature
	retry, sent := s.compile(body(opus55, "sys", h))
	r := a(th("S3"), tx("a3"))
	s.mint(sent, r)
	next := append(slices.Clone(h), r, u("u4"))
	c, _ := s.compileOpt(copt{dry: true}, body(opus55, "sys", next))
	expectStrips(t, c, "messages.3.content.0 released", "messages.5.content.0 no-stamp")
	s.recs[bad.ID] = MarkRefused(s.recs[bad.ID])
	if s.recs[bad.ID].Refused != true || s.recs[retry.ID].Refused {
		t.Fatal("MarkRefused")
	}
	c, _ = s.compile(body(opus55, "sys", next))
	expectStrips(t, c, "messages.3.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S1"), key("S3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

// TestRotatingImageURLStrips: the provider judges a URL image by the bytes
// it fetches, which bindery cannot see; a URL whose signed query rotates is
// a changed prefix to bindery, so the thinking after it is stripped (the
// README says what a host can send instead: a Files API file_id or a
// base64 source, which keep it).
func TestRotatingImageURLStrips(t *testing.T) {
	img := func(src string) string {
		return `{"role":"user","content":[{"type":"image","source":` + src + `},{"type":"text","text":"look"}]}`
	}
	for _, tc := range []struct {
		name      string
		was, is   string
		wantStrip bool
	}{
		{"rotated signed URL", `{"type":"url","url":"https://cdn.example/a.png?X-Sig=aaa"}`, `{"type":"url","url":"https://cdn.example/a.png?X-Sig=bbb"}`, true},
		{"same URL", `{"type":"url","url":"https://cdn.example/a.png?X-Sig=aaa"}`, `{"type":"url","url":"https://cdn.example/a.png?X-Sig=aaa"}`, false},
		{"Files API file_id", `{"type":"file","file_id":"file_011"}`, `{"type":"file","file_id":"file_011"}`, false},
		{"base64, sent the same", `{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`, `{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			h := []string{img(tc.was)}
			r1 := a(th("I1"), tx("a picture"))
			s.round(opus55, "sys", h, r1)
			h = []string{img(tc.is), r1, u("and?")}
			c, _ := s.compile(body(opus55, "sys", h))
			if tc.wantStrip {
				expectStrips(t, c, "messages.1.content.0 prefix-changed")
			} else {
				expectStrips(t, c)
			}
		})
	}
}
