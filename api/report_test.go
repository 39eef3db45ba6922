package api

import (
	"context"
	"errors"
	"testing"
)

// fakeReports answers with the session it was asked for, so the test sees
// the query reach the source.
type fakeReports struct{}

func (fakeReports) Report(_ context.Context, session string) (Report, error) {
	switch session {
	case "":
		return Report{Scope: "archive"}, nil
	case "gone":
		return Report{}, Errorf(CodeNotFound, "no session %q", session)
	}
	return Report{Scope: "session", Session: session}, nil
}

func (fakeReports) WhatIf(_ context.Context, q WhatIfQuery) (WhatIf, error) {
	if q.Session == "gone" {
		return WhatIf{}, Errorf(CodeNotFound, "no session %q", q.Session)
	}
	scope := "archive"
	if q.Session != "" {
		scope = "session"
	}
	return WhatIf{Scope: scope, Keep: q.Keep, Sessions: []WhatIfSession{{Session: q.Session}}}, nil
}

func TestReportEndpoint(t *testing.T) {
	s, _ := testServer()
	// Not registered without a source.
	c0 := NewClient(serveUnix(t, s, selfPeer))
	defer c0.Close()
	if _, err := c0.Report(t.Context(), ""); err == nil {
		t.Fatal("report served without a source")
	} else if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound {
		t.Fatalf("no source: %v", err)
	}

	s2, _ := testServer()
	s2.Reports = fakeReports{}
	c := NewClient(serveUnix(t, s2, selfPeer))
	defer c.Close()
	if got, err := c.Report(t.Context(), ""); err != nil || got.Scope != "archive" {
		t.Fatalf("archive: %v %v", got, err)
	}
	if got, err := c.Report(t.Context(), "a b&c"); err != nil || got.Session != "a b&c" {
		t.Fatalf("session: %v %v", got, err)
	}
	_, err := c.Report(t.Context(), "gone")
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound || e.Status != 404 {
		t.Fatalf("unknown session: %v", err)
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	_, err = c.Report(t.Context(), string(long))
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeBadRequest {
		t.Fatalf("long id: %v", err)
	}
}

// TestWhatIfEndpoint: GET /v1/whatif reaches the source with the session
// and keep=N, keep defaults to 16, and a bad keep is refused before the
// source is asked.
func TestWhatIfEndpoint(t *testing.T) {
	s, _ := testServer()
	s.Reports = fakeReports{}
	c := NewClient(serveUnix(t, s, selfPeer))
	defer c.Close()
	got, err := c.WhatIf(t.Context(), WhatIfQuery{})
	if err != nil || got.Scope != "archive" || got.Keep != DefaultKeepLast {
		t.Fatalf("archive: %+v %v", got, err)
	}
	got, err = c.WhatIf(t.Context(), WhatIfQuery{Session: "a b&c", Keep: 3})
	if err != nil || got.Scope != "session" || got.Keep != 3 || got.Sessions[0].Session != "a b&c" {
		t.Fatalf("session: %+v %v", got, err)
	}
	if _, err := c.WhatIf(t.Context(), WhatIfQuery{Session: "gone"}); !IsCode(err, CodeNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	for _, keep := range []int{-1, MaxKeepLast + 1} {
		if _, err := c.WhatIf(t.Context(), WhatIfQuery{Keep: keep}); !IsCode(err, CodeBadRequest) {
			t.Errorf("keep=%d: %v", keep, err)
		}
	}
	var raw map[string]any
	if err := c.Do(t.Context(), "GET", "/v1/whatif?keep=x", nil, &raw); !IsCode(err, CodeBadRequest) {
		t.Errorf("keep=x: %v", err)
	}
}
