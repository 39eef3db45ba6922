package binding

import (
	"slices"
	"testing"
)

// pi 1.6's per-turn {role: "system", output_config: {effort}} messages
// (research 1.1, 1.3): a mid-conversation system message is part of every
// later block's prefix, its output_config included (the message is hashed
// whole as a frame; only the top-level output_config is outside the
// prefix); it is no assistant message, so the latest assistant message and
// the run rule look past it. The judge package models the same rule
// (judge/system_test.go); the e2e test pi16_e2e_test.go runs both together.

func eff(e string) string {
	return `{"role":"system","content":[],"output_config":{"effort":` + q(e) + `}}`
}

func TestPi16SystemMessages(t *testing.T) {
	replyA := a(th("sA"), tx("1"))
	replyB := a(th("sB"), tx("2"))
	// history as pi 1.6 builds it after two replies
	hist := []string{u("q1"), eff("high"), replyA, u("q2"), eff("low"), replyB, u("q3"), eff("max")}
	cases := []struct {
		name   string
		msgs   func() []string
		strips []string
	}{
		{"appended each turn", func() []string { return hist }, nil},
		{"the trailing effort message changed or dropped", func() []string { return hist[:7] }, nil},
		{"an earlier effort message reworded", func() []string {
			m := slices.Clone(hist)
			m[1] = eff("medium")
			return m
		}, []string{"messages.2.content.0 prefix-changed", "messages.5.content.0 prefix-changed"}},
		{"the effort message before the second reply deleted", func() []string {
			return slices.Concat(hist[:4], hist[5:])
		}, []string{"messages.4.content.0 prefix-changed"}},
		{"an effort message's content gains a text block", func() []string {
			m := slices.Clone(hist)
			m[4] = `{"role":"system","content":[{"type":"text","text":"be brief"}],"output_config":{"effort":"low"}}`
			return m
		}, []string{"messages.5.content.0 prefix-changed"}},
		{"a cache_control marker on a system message's block moved", func() []string {
			m := slices.Clone(hist)
			m[7] = `{"role":"system","content":[{"type":"text","text":"now","cache_control":{"type":"ephemeral"}}],"output_config":{"effort":"max"}}`
			return m
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			s.round(opus55, "sys", hist[:2], replyA)
			s.round(opus55, "sys", hist[:5], replyB)
			c, _ := s.compile(body(opus55, "sys", tc.msgs()))
			expectStrips(t, c, tc.strips...)
		})
	}
}

// The latest assistant message is the last role "assistant" one, wherever
// system messages follow it: an open tool round's run is kept whole, and a
// block of it that must go takes the whole run with it.
func TestPi16LatestAssistantPastSystem(t *testing.T) {
	s := newSim(t)
	reply := a(th("s1"), th("s2"), tu("t1"))
	s.round(opus55, "sys", []string{u("q1"), eff("high")}, reply)
	msgs := []string{u("q1"), eff("high"), reply, tr("t1", "ok"), eff("high")}
	c, _ := s.compile(body(opus55, "sys", msgs))
	expectStrips(t, c)
	req, err := ParseRequest(body(opus55, "sys", msgs))
	if err != nil || !req.Bound || req.Messages[4].Role != "system" {
		t.Fatalf("parse: %v %+v", err, req)
	}
	// s2 released (the provider refused it): the whole latest run goes,
	// never s1 alone (a partial latest run is a 400 on every model).
	s.rel["main"] = map[Digest]bool{key("s2"): true}
	c, _ = s.compile(body(opus55, "sys", msgs))
	expectStrips(t, c, "messages.2.content.0 gap", "messages.2.content.1 released")
}
