package binding

import (
	"errors"
	"slices"
	"testing"
)

func TestInputTransformations(t *testing.T) { // provider truth beats inference
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	r3 := a(th("S3"), tx("a3"))
	// The provider dropped S2 as a prefix mismatch bindery could not see
	// (say an image re-encoded in place), and allowed S1 with a warning.
	s.mint(sent, r3, key("S2"))
	out, err := s.accept(c.ID, r3,
		InputTransformation{Type: TransformDropped, Path: "messages.3.content.0", Reason: ReasonPrefixMismatch},
		InputTransformation{Type: TransformAllowed, Path: "messages.1.content.0", Reason: ReasonPrefixMismatch},
		InputTransformation{Type: "thinking_rewritten_someday", Path: "messages.1.content.0", Reason: "x"},
		InputTransformation{Type: TransformDropped, Path: "messages.9.content.0", Reason: ReasonPrefixMismatch},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Releases) != 1 || out.Releases[0].Key != key("S2") || out.Releases[0].Reason != ReleaseProvider || out.Releases[0].Path != "messages.3.content.0" {
		t.Fatalf("releases %+v", out.Releases)
	}
	var types []string
	for _, e := range out.Events {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, []string{TransformAllowed, "unmapped"}) {
		t.Fatalf("events %+v", out.Events)
	}
	// [INF] pinned: the dropped S2 was not read, so S3's predecessor is S1.
	if out.Record.LastRead != key("S1") || len(out.Stamps) != 1 || out.Stamps[0].Pred != key("S1") {
		t.Fatalf("pred: lastRead %x stamps %+v", out.Record.LastRead[:4], out.Stamps)
	}
	h = append(h, r3, u("u4"))
	c, _ = s.compile(body(opus55, "sys", h))
	expectStrips(t, c, "messages.3.content.0 released")
	if !slices.Equal(c.Kept, []Digest{key("S1"), key("S3")}) {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestModelBindingMismatchLoggedNotReleased(t *testing.T) {
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	r3 := a(th("S3"), tx("a3"))
	s.mint(sent, r3)
	out, err := s.accept(c.ID, r3, InputTransformation{Type: TransformDropped, Path: "messages.1.content.0", Reason: ReasonModelMismatch})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Releases) != 0 || len(out.Events) != 1 || out.Events[0].Reason != ReasonModelMismatch || out.Events[0].Orig != "messages.1.content.0" {
		t.Fatalf("outcome %+v", out)
	}
}

func TestInputTransformationsMapThroughDroppedMessage(t *testing.T) {
	// Sent paths shift when bindery drops an emptied message; they map back.
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(th("E1"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	h[0] = u("edited")
	r2 := a(th("E2"), tx("a2"))
	s.round(opus55, "sys", h, r2)
	h = append(h, r2, u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	if !slices.Equal(c.Dropped, []int{1}) {
		t.Fatalf("dropped %v", c.Dropped)
	}
	// E2 is at messages.3 in the host's request, messages.2 as sent.
	kb, ok := c.Record.ThinkingAt(Pos{2, 0})
	if !ok || kb.Key != key("E2") || kb.Orig != (Pos{3, 0}) {
		t.Fatalf("ThinkingAt %+v %v", kb, ok)
	}
	r3 := a(th("E3"), tx("a3"))
	s.mint(sent, r3)
	out, err := s.accept(c.ID, r3, InputTransformation{Type: TransformDropped, Path: "messages.2.content.0", Reason: ReasonPrefixMismatch})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Releases) != 1 || out.Releases[0].Key != key("E2") || out.Releases[0].Path != "messages.3.content.0" {
		t.Fatalf("releases %+v", out.Releases)
	}
}

func TestAcceptErrors(t *testing.T) {
	if _, err := Accept(AcceptInput{}); !errors.Is(err, ErrUnknownCompile) {
		t.Fatalf("nil record: %v", err)
	}
	rec := &CompileRecord{ID: "c", Seq: 1}
	for _, bad := range []string{`{"role":"user","content":[]}`, `[1]`, `{"role":"assistant","content":[{"type":"text","text":"a"},]}`, `{"role":"assistant"}`} {
		if _, err := Accept(AcceptInput{Record: rec, Reply: []byte(bad)}); !errors.Is(err, ErrBadReply) || Code(err) != "bad-reply" {
			t.Fatalf("reply %s: %v", bad, err)
		}
	}
	out, err := Accept(AcceptInput{Record: rec, Reply: []byte("null")})
	if err != nil || !out.Owner || !out.Engage || out.Noop {
		t.Fatalf("no reply: %+v %v", out, err)
	}
	if rec.Accepted {
		t.Fatal("Accept modified its input record")
	}
	// An older compile accepted after a newer one does not take the owner.
	out, _ = Accept(AcceptInput{Record: rec, Owner: &CompileRecord{ID: "d", Seq: 2}, Engaged: true})
	if out.Owner || out.Engage {
		t.Fatalf("late accept %+v", out)
	}
}

func TestStampReplyChainAndPred(t *testing.T) {
	// A reply with text before a second thinking block: the second block's
	// chain includes the reply's frame and the text; its predecessor is the
	// first. A redacted block is stamped by its data.
	reply := a(th("R1"), tx("between"), rth("RD"), tx("end"))
	rec := &CompileRecord{ID: "c", Seed: Digest{1}, End: ChainStart(), LastRead: key("P"), Model: opus55}
	m, err := ParseReply([]byte(reply))
	if err != nil {
		t.Fatal(err)
	}
	st := StampReply(rec, m)
	if len(st) != 2 || st[0].Pred != key("P") || st[1].Pred != key("R1") || st[1].Key != key("RD") {
		t.Fatalf("stamps %+v", st)
	}
	// The same reply replayed in a request after exactly rec's messages
	// (none) has those chains.
	req, _ := ParseRequest(body(opus55, "sys", []string{reply}))
	if st[0].Chain != req.Messages[0].Blocks[0].Chain || st[1].Chain != req.Messages[0].Blocks[2].Chain {
		t.Fatal("stamp chains differ from the replayed request's")
	}
	// Fields of a provider response other than role and content do not count.
	full := `{"id":"msg_1","type":"message","model":"x","stop_reason":"end_turn","role":"assistant","content":[` +
		th("R1") + `,` + tx("between") + `,` + rth("RD") + `,` + tx("end") + `],"usage":{"input_tokens":1}}`
	m2, err := ParseReply([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if st2 := StampReply(rec, m2); !slices.Equal(st, st2) {
		t.Fatalf("full response stamps differ")
	}
}

func TestAttributeReplyFromSession(t *testing.T) {
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	r := a(th("S3"), tx("a3"))
	s.mint(sent, r)
	m, _ := ParseReply([]byte(r))
	st, skip := AttributeReply([]*CompileRecord{s.recs[c.ID]}, m)
	if skip != nil || len(st) != 1 || st[0] != *s.truth[key("S3")] {
		t.Fatalf("attribute %+v %+v", st, skip)
	}
	hb, _ := s.compile(body(opus55, "sys + heartbeat", h))
	st, skip = AttributeReply([]*CompileRecord{s.recs[c.ID], s.recs[hb.ID]}, m)
	if st != nil || skip == nil || len(skip.Compiles) != 2 {
		t.Fatalf("ambiguous %+v %+v", st, skip)
	}
	// Two compiles that sent the same thing agree.
	again, _ := s.compile(body(opus55, "sys", h))
	st, skip = AttributeReply([]*CompileRecord{s.recs[c.ID], s.recs[again.ID], nil}, m)
	if skip != nil || len(st) != 1 {
		t.Fatalf("agreeing %+v %+v", st, skip)
	}
	if st, skip = AttributeReply(nil, m); st != nil || skip != nil {
		t.Fatal("no candidates")
	}
}

func TestUnsignedAndRedacted(t *testing.T) { // 24
	s := newSim(t)
	h := []string{u("u1")}
	r1 := a(rth("D1"), tx("a1"))
	s.round(opus55, "sys", h, r1)
	h = append(h, r1, u("u2"))
	c, _ := s.compile(body(opus55, "sys", h))
	expectStrips(t, c)
	// An unsigned block is refused on every model: stripped, never released.
	h2 := append(slices.Clone(h[:2]), u("u2"), a(`{"type":"thinking","thinking":"x","signature":""}`, tx("a2")), u("u3"))
	no := false
	c, _ = s.compileOpt(copt{binds: &no}, body(opus55, "sys", h2))
	expectStrips(t, c, "messages.3.content.0 unsigned")
	if len(c.Record.Strips) != 0 {
		t.Fatalf("unsigned released %+v", c.Record.Strips)
	}
}

func TestOrganizationMismatchLoggedAndNotRead(t *testing.T) { // 32, 33
	s := newSim(t)
	h := append(threeTurns(s), u("u3"))
	c, sent := s.compile(body(opus55, "sys", h))
	r3 := a(th("S3"), tx("a3"))
	s.mint(sent, r3, key("S2"))
	out, err := s.accept(c.ID, r3, InputTransformation{Type: TransformDropped, Path: "messages.3.content.0", Reason: ReasonOrgMismatch})
	if err != nil {
		t.Fatal(err)
	}
	// Not a prefix mismatch: logged, not released; but it was not read.
	if len(out.Releases) != 0 || len(out.Events) != 1 || out.Events[0].Reason != ReasonOrgMismatch || out.Stamps[0].Pred != key("S1") {
		t.Fatalf("%+v", out)
	}
}
