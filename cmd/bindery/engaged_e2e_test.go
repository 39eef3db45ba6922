package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// `bindery sessions` and `bindery show` print a session's engagement,
// stamps and releases from the same state GET /v1/conversations/{id}
// (show's "binding state" section) reports: before the first compile the
// session is not engaged; after a compile and its accept both views say
// engaged, and show's session block counts the stamp and the release.
func TestEngagedDisplay(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	sid := "0193e6c4-eeee-7000-8000-000000000010"
	ps := newPiSession(t, d.agent, sid)
	ps.user("u1", "", "hello")
	waitFor(t, "the session to be ingested", func() (bool, string) {
		s, err := d.client.Session(ctxT(t), sid)
		return err == nil && s.Entries == 1, sessionState(s, err)
	})
	engagedRow := regexp.MustCompile(`(?m)^engaged\s+(\S+)$`)
	sessionsRow := func() string {
		out, errOut, code := d.runCLI(ctxT(t), "sessions")
		if code != 0 {
			t.Fatalf("sessions: %d %s", code, errOut)
		}
		for _, line := range strings.Split(out, "\n") {
			// the table prints the id's shortest unique prefix
			if f := strings.Fields(line); len(f) > 0 && len(f[0]) >= api.MinShortID && strings.HasPrefix(sid, f[0]) {
				return line
			}
		}
		t.Fatalf("sessions lists no %s:\n%s", sid, out)
		return ""
	}
	if row := sessionsRow(); !strings.Contains(row, " no ") {
		t.Fatalf("a session never compiled shows engaged: %q", row)
	}

	h.messages = []any{map[string]any{"role": "user", "content": "hello"}}
	h.roundTrip(d, api.CompileCall{Conversation: sid, Branch: "u1", SessionFile: ps.path}, nil)
	msg := h.messages[len(h.messages)-1].(map[string]any)
	sig := msg["content"].([]any)[0].(map[string]any)["signature"].(string)
	if _, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: sid, Signature: sig}); err != nil {
		t.Fatal(err)
	}
	st, err := d.client.Conversation(ctxT(t), sid)
	if err != nil || !st.Engaged {
		t.Fatalf("binding state: %+v %v", st, err)
	}

	list, err := d.client.Sessions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		if s.ID == sid {
			found = true
			if !s.Engaged {
				t.Fatalf("GET /v1/sessions: engaged false while the binding state says engaged: %+v", s)
			}
		}
	}
	if !found {
		t.Fatalf("GET /v1/sessions lists no %s", sid)
	}
	det, err := d.client.Session(ctxT(t), sid)
	if err != nil || !det.Engaged || det.Stamps != st.Stamps || det.Releases != len(st.Releases) || det.Stamps != 1 || det.Releases != 1 {
		t.Fatalf("GET /v1/sessions/%s: engaged %v stamps %d releases %d; binding state: stamps %d releases %d (%v)",
			sid, det.Engaged, det.Stamps, det.Releases, st.Stamps, len(st.Releases), err)
	}
	if row := sessionsRow(); !strings.Contains(row, " yes ") {
		t.Fatalf("bindery sessions: %q, want engaged yes", row)
	}
	out, errOut, code := d.runCLI(ctxT(t), "show", sid)
	if code != 0 {
		t.Fatalf("show: %d %s", code, errOut)
	}
	rows := engagedRow.FindAllStringSubmatch(out, -1)
	if len(rows) != 1 || rows[0][1] != "yes" || !regexp.MustCompile(`(?m)^\s+engaged\s+yes$`).MatchString(out) {
		t.Fatalf("show prints the session's and the binding state's engagement differently:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^stamps\s+1$`).MatchString(out) || !regexp.MustCompile(`(?m)^releases\s+1$`).MatchString(out) {
		t.Fatalf("show's session block does not count the stamp and the release:\n%s", out)
	}
}
