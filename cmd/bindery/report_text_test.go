package main

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
)

// TestTextFits80Columns renders an archive and a session with every
// optional row present and figures in the billions and trillions: no line
// runs past 80 columns, token counts carry their unit through T, and the
// session ids print as unique prefixes (bindery show and report --session
// take them back).
func TestTextFits80Columns(t *testing.T) {
	cost := 1234.5678
	var sessions []api.SessionLine
	var breaks []api.Break
	for i := range 12 {
		// uuidv7-shaped ids of sessions started a few seconds apart share
		// their first 8 to 11 characters.
		id := fmt.Sprintf("0193e6c4-%04x-7000-8000-%012x", 0xaa00+i*7, i)
		sessions = append(sessions, api.SessionLine{Session: id, Model: "claude-sonnet-4-5-20250929", Requests: 123456, Cycles: 98765,
			Breaks: 4321, HitRatio: 0.987, Spend: 98765.43, Unpriced: i % 2})
		breaks = append(breaks, api.Break{Session: id, Request: 123456, Line: 987654, Cycle: 4321, Turn: 130, ReadBefore: 987_654_321_000,
			ReadAfter: 12_345_678_901, Rewritten: 1_234_567_890_123, Cost: &cost, Cause: api.CauseUnknown})
	}
	big := int64(14_525_150_000)
	f := api.Figures{Sessions: 12,
		Requests: api.Requests{Total: 1234567, Turns: 1234000, ToolLoops: 987654, Errored: 4567, Aborted: 890, UsageMissing: 12345, OffBranch: 678},
		Cycles:   api.Cycles{Count: 98765, Closed: 98000, Open: 765, Median: 4, P90: 17, Over16: 9876, Over130: 123, MaxThinking: big},
		Thinking: api.Thinking{Closed: api.Volume{Blocks: 1234567, Tokens: big}, Open: api.Volume{Blocks: 98765, Tokens: big}, Billed: big, Free: big, Share: 0.123,
			KeepAll: 123456, LastTurnOnly: 98765, Unknown: 4321},
		Cache: api.Cache{Read: 2_000_000_000_000, Write: big, Input: big, Output: big, HitRatio: 0.987, ReadPerReq: 1e9, WritePerReq: 1e8, InputPerReq: 1e7},
		Spend: api.Spend{Input: 12345.67, Output: 123456.78, CacheWrite: 23456.78, CacheRead: 34567.89, Unsplit: 4567.89, Total: 198765.43,
			FromPi: 1234567, FromTable: 98765, Unpriced: 4321, UnpricedModels: []string{"claude-opus-5-5", "claude-mythos-5-1"}},
		Apart:  api.Apart{Requests: 5457, Input: big, Output: big, Read: big, Write: big, Spend: api.Spend{Total: 4567.89, UnpricedModels: []string{"claude-opus-5-5"}}},
		Breaks: api.BreakTotals{Count: 4321, Rewritten: big, Cost: 12345.67, Excess: 11111.11, Unpriced: 12, ByCause: map[string]api.CauseTotal{}},
		Bindery: api.Bindery{Compiles: 1234567, Strips: map[string]int{"prefix-changed": 12345, "no-stamp": 678, "released": 90, "seed-changed": 1234, "model-unbound": 5},
			StrippedTokens: big, CacheCost: 1234.56, RequestsRescued: 1234, RefusalsAvoided: 5678},
	}
	for _, c := range []string{api.CauseStrip, api.CauseHost, api.CauseIdle, api.CauseUnknown} {
		f.Breaks.ByCause[c] = api.CauseTotal{Count: 1234, Rewritten: big, Cost: 4567.89}
	}
	archive := api.Report{Scope: "archive", Figures: f, Sessions: sessions, Breaks: breaks[:10], BreaksOmitted: 2}
	session := api.Report{Scope: "session", Session: sessions[0].Session, Model: "claude-sonnet-4-5-20250929",
		First: "2026-11-29T10:00:00.000Z", Last: "2026-12-01T21:00:00.000Z", Figures: f, Breaks: breaks[:3]}
	for name, r := range map[string]api.Report{"archive": archive, "session": session} {
		txt := reportText(r)
		for _, l := range strings.Split(txt, "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("%s: a line of %d columns:\n%s", name, n, l)
			}
		}
		if !strings.Contains(txt, "14.53G") || !strings.Contains(txt, "2.00T") {
			t.Errorf("%s: units through T missing:\n%s", name, txt)
		}
		if strings.Contains(txt, "14525.15M") {
			t.Errorf("%s: a count past M printed in M:\n%s", name, txt)
		}
	}
	txt := reportText(archive)
	for _, s := range sessions[:10] {
		// These ids share their first 12 characters: 13 tell them apart.
		if !strings.Contains(txt, s.Session[:13]+" ") {
			t.Errorf("archive lacks a unique prefix of %s:\n%s", s.Session, txt)
		}
	}
}

// TestWhatIfTextFits80Columns: the replay's tables fit 80 columns with
// large figures, an uncalibrated session says so and shows no price, and
// the keep-last column is named for its N.
func TestWhatIfTextFits80Columns(t *testing.T) {
	spend := func(v float64) *float64 { return &v }
	pol := func(name string, sp *float64) api.PolicyResult {
		return api.PolicyResult{Policy: name, CacheWrite: 12_345_678_901, CacheRead: 987_654_321_000, ThinkingRead: 1234567, Breaks: 98765, Spend: sp,
			Delta: api.PolicyDelta{Spend: spend(12345.67)}}
	}
	names := []string{"as-recorded", "bindery", "strip-all", "keep-last-16"}
	var rows []api.PolicyResult
	for _, n := range names {
		rows = append(rows, pol(n, spend(98765.43)))
	}
	var sessions []api.WhatIfSession
	for i := range 3 {
		s := api.WhatIfSession{Session: fmt.Sprintf("0193e6c4-%04x-7000-8000-%012x", 0xaa00+i*7, i), Requests: 123456, Policies: rows,
			Calibration: api.Calibration{OK: true, ReadError: 0.0123, WriteError: 0.0456}}
		if i == 2 {
			s.Calibration = api.Calibration{ReadError: 0.5, WriteError: 99, Reason: "off"}
			s.Policies = []api.PolicyResult{pol(names[0], nil), pol(names[1], nil), pol(names[2], nil), pol(names[3], nil)}
		}
		sessions = append(sessions, s)
	}
	w := api.WhatIf{Scope: "archive", Keep: 16, Policies: names, Sessions: sessions, Archive: rows, Calibrated: 2, Uncalibrated: 1}
	txt := whatifText(w)
	for _, l := range strings.Split(txt, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a line of %d columns:\n%s", n, l)
		}
	}
	for _, want := range []string{"keep-16", "not calibrated", "1 not calibrated", ">1000%", "+$12345.67 (+12.5%)", "+12.5%", "unpriced"} {
		if !strings.Contains(txt, want) {
			t.Errorf("lacks %q:\n%s", want, txt)
		}
	}
	one := api.WhatIf{Scope: "session", Keep: 16, Policies: names, Sessions: sessions[2:]}
	if txt := whatifText(one); !strings.Contains(txt, "NOT CALIBRATED: off") || !strings.Contains(txt, "unknown") {
		t.Errorf("one uncalibrated session:\n%s", txt)
	}
}

// A session that made no request and cost nothing (pi started and quit, a
// file deleted before its first reply) is counted, not listed as a $0.00
// row, in report's and whatif's per-session tables (issue 32).
func TestSessionsWithoutRequestsNotListed(t *testing.T) {
	live, empty := "0193e6c4-aaaa-7000-8000-000000000001", "0193e6c4-bbbb-7000-8000-000000000002"
	r := api.Report{Scope: "archive", Figures: api.Figures{Sessions: 2}, Sessions: []api.SessionLine{
		{Session: live, Model: "claude-sonnet-4-5", Requests: 3, Spend: 1.25},
		{Session: empty},
	}}
	txt := reportText(r)
	if !strings.Contains(txt, "top 1 of 1 session by spend") || strings.Contains(txt, "0193e6c4-b") ||
		!strings.Contains(txt, "(and 1 session without a request, not listed)") {
		t.Errorf("report:\n%s", txt)
	}
	spend := 1.25
	pol := []api.PolicyResult{{Policy: "as-recorded", Spend: &spend}}
	w := api.WhatIf{Scope: "archive", Keep: 16, Policies: []string{"as-recorded"}, Archive: pol, Calibrated: 1, Sessions: []api.WhatIfSession{
		{Session: live, Requests: 3, Calibration: api.Calibration{OK: true}, Policies: pol},
		{Session: empty, Calibration: api.Calibration{OK: true}, Policies: pol},
	}}
	txt = whatifText(w)
	if strings.Contains(txt, empty) || !strings.Contains(txt, "(and 1 session without a request to replay, not listed)") {
		t.Errorf("whatif:\n%s", txt)
	}
}
