package binding

import (
	"errors"
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
	var recorded []BranchRelease
	for i, r := range rel {
		recorded = append(recorded, BranchRelease{Release: r, Branch: "main", Order: int64(i + 1)})
	}
	fork := &Fork{Branch: "main", UpTo: int64(len(rel)), Releases: recorded}
	s.rel["fork"] = ReleasedOn(ReachInput{Branch: "fork", Forks: []*Fork{fork}}, nil)
	c, _ = s.compileOpt(copt{branch: "fork"}, body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 released")
	// A release on main after the fork does not reach it.
	late := BranchRelease{Release: Release{Key: key("S1")}, Branch: "main", Order: int64(len(rel) + 1)}
	fork.Releases = append(fork.Releases, late)
	if ReleasedOn(ReachInput{Branch: "fork", Forks: []*Fork{fork}}, []Digest{key("S1")})[key("S1")] {
		t.Fatal("late release inherited")
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
