package api

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// fakeReports answers with the session it was asked for, so the test sees
// the query reach the source.
type fakeReports struct{}

func (fakeReports) Report(_ context.Context, session string) (json.RawMessage, error) {
	switch session {
	case "":
		return json.RawMessage(`{"scope":"archive"}`), nil
	case "gone":
		return nil, Errorf(CodeNotFound, "no session %q", session)
	}
	b, _ := json.Marshal(map[string]string{"scope": "session", "session": session})
	return b, nil
}

func TestReportEndpoint(t *testing.T) {
	s, _ := testServer()
	// Not registered without a source.
	c0 := NewClient(serveUnix(t, s, selfPeer))
	defer c0.Close()
	if err := c0.Report(t.Context(), "", nil); err == nil {
		t.Fatal("report served without a source")
	} else if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound {
		t.Fatalf("no source: %v", err)
	}

	s2, _ := testServer()
	s2.Reports = fakeReports{}
	c := NewClient(serveUnix(t, s2, selfPeer))
	defer c.Close()
	var got map[string]string
	if err := c.Report(t.Context(), "", &got); err != nil || got["scope"] != "archive" {
		t.Fatalf("archive: %v %v", got, err)
	}
	got = nil
	if err := c.Report(t.Context(), "a b&c", &got); err != nil || got["session"] != "a b&c" {
		t.Fatalf("session: %v %v", got, err)
	}
	err := c.Report(t.Context(), "gone", nil)
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeNotFound || e.Status != 404 {
		t.Fatalf("unknown session: %v", err)
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	err = c.Report(t.Context(), string(long), nil)
	if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeBadRequest {
		t.Fatalf("long id: %v", err)
	}
}
