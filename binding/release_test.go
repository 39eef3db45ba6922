package binding

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, c := range []struct {
		in  string
		ok  bool
		pos Pos
	}{
		{"messages.3.content.0", true, Pos{3, 0}},
		{"messages.12.content.7", true, Pos{12, 7}},
		{"messages.3", false, Pos{}},
		{"messages.-1.content.0", false, Pos{}},
		{"messages.a.content.0", false, Pos{}},
		{"system.0", false, Pos{}},
		{"messages.1.content.0.x", false, Pos{}},
	} {
		p, err := ParsePath(c.in)
		if (err == nil) != c.ok || p != c.pos {
			t.Errorf("%q: %v %v", c.in, p, err)
		}
		if err != nil && !errors.Is(err, ErrBadPath) {
			t.Errorf("%q: %v is not ErrBadPath", c.in, err)
		}
		if err == nil && p.Path() != c.in {
			t.Errorf("round trip %q -> %q", c.in, p.Path())
		}
	}
}

// tree builds root-first paths from "id@seq" names.
func path(names ...string) []PathEntry {
	var out []PathEntry
	for _, n := range names {
		var id string
		var seq int64
		fmt.Sscanf(n, "%1s@%d", &id, &seq)
		out = append(out, PathEntry{ID: id, Seq: seq})
	}
	return out
}

func TestReleaseReachesPiTree(t *testing.T) { // forks inheriting releases
	// Tree: r@1 - a@2 - b@3 - c@4 (leaf L, release made at seq 10 on a@2's block)
	//                      \ x@5 (a branch made before the release)
	//                      \ y@11 (a branch made after the release)
	L := path("r@1", "a@2", "b@3", "c@4")
	for _, c := range []struct {
		name string
		at   []PathEntry
		want bool
	}{
		{"same leaf", L, true},
		{"descendant", append(slices.Clone(L), path("d@12")...), true},
		{"ancestor (leaf not ingested yet, or went back)", path("r@1", "a@2", "b@3"), true},
		{"branch older than the release", path("r@1", "a@2", "x@5"), false},
		{"branch newer than the release", path("r@1", "a@2", "y@11"), true},
		{"branch newer, grown", path("r@1", "a@2", "y@11", "z@12"), true},
		{"fork before the released message", path("r@1", "q@11"), true},
	} {
		if got := ReleaseReaches(L, "a", 10, c.at); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	if ReleaseReaches(L, "x", 10, L) {
		t.Error("a released message not on L's path reaches L")
	}
}

func TestInheritedReleases(t *testing.T) { // non-pi fork named with parent
	parent := []Release{{Key: key("A"), Seq: 3}, {Key: key("B"), Seq: 7}, {Key: key("C"), Seq: 9}}
	got := InheritedReleases(parent, 7)
	if len(got) != 2 || got[0].Key != key("A") || got[1].Key != key("B") {
		t.Fatalf("inherited %+v", got)
	}
}

func TestForkStartsWithParentReleases(t *testing.T) { // 50 + fork
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	c, _ := s.compile(body(opus55, "sys", h))
	rel, _ := ReleaseAtPath(s.recs[c.ID], "messages.3.content.0")
	s.rel["main"] = map[Digest]bool{}
	for _, r := range rel {
		r.Seq = 5
		s.rel["main"][r.Key] = true
	}
	// The fork replays the identical history: it keeps S1 and inherits S2's release.
	s.rel["fork"] = map[Digest]bool{}
	for _, r := range InheritedReleases(rel, 5) {
		s.rel["fork"][r.Key] = true
	}
	c, _ = s.compileOpt(copt{branch: "fork"}, body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 released")
	// A release on main after the fork does not reach it.
	late := Release{Key: key("S1"), Seq: 9}
	if len(InheritedReleases([]Release{late}, 5)) != 0 {
		t.Fatal("late release inherited")
	}
}

func TestRetain(t *testing.T) {
	var cs []RememberedCompile
	for i := 1; i <= 40; i++ {
		cs = append(cs, RememberedCompile{ID: fmt.Sprint("u", i), Seq: int64(i)})
	}
	for i := 41; i <= 80; i++ {
		cs = append(cs, RememberedCompile{ID: fmt.Sprint("a", i), Seq: int64(i), Accepted: true})
	}
	forget := Retain(cs, "a41")
	var wantForget []string
	for i := 8; i >= 1; i-- {
		wantForget = append(wantForget, fmt.Sprint("u", i))
	}
	// accepted 80..49 kept (32), 48..42 forgotten, owner a41 kept
	for i := 48; i >= 42; i-- {
		wantForget = append(wantForget, fmt.Sprint("a", i))
	}
	slices.Sort(forget)
	slices.Sort(wantForget)
	if !slices.Equal(forget, wantForget) {
		t.Fatalf("forget %v\nwant %v", forget, wantForget)
	}
	if len(Retain(cs[:MinRemembered], "")) != 0 {
		t.Fatal("32 unaccepted must all be kept")
	}
	if got := Retain(cs[:MinRemembered+1], ""); !slices.Equal(got, []string{"u1"}) {
		t.Fatalf("33: %v", got)
	}
}

func TestSignatureRelease(t *testing.T) {
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	r := SignatureRelease("S2")
	if r.Key != key("S2") || r.Reason != ReleaseHost {
		t.Fatalf("%+v", r)
	}
	s.rel["main"] = map[Digest]bool{r.Key: true}
	c, _ := s.compile(body(opus55, "sys", h))
	// S2 was the latest assistant message's only block: S1 stays.
	expectStrips(t, c, "messages.3.content.0 released")
}
