package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// ReportSource answers GET /v1/report (design/economics.md): the cache and
// thinking economics as JSON (daemon/report's Report), over the whole
// archive when session is "", else for that pi session with its
// per-request rows. An unknown session is an *Error with CodeNotFound.
type ReportSource interface {
	Report(ctx context.Context, session string) (json.RawMessage, error)
}

// handleReport serves GET /v1/report[?session=ID].
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	session := r.URL.Query().Get("session")
	if len(session) > 256 {
		writeError(w, Errorf(CodeBadRequest, "a session id is at most 256 characters"))
		return
	}
	data, err := s.Reports.Report(r.Context(), session)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(data, '\n'))
}

// Report is GET /v1/report: the archive's report when session is "", else
// that session's. out receives the JSON (a daemon/report.Report, or
// json.RawMessage to keep it as is).
func (c *Client) Report(ctx context.Context, session string, out any) error {
	path := "/v1/report"
	if session != "" {
		path += "?session=" + url.QueryEscape(session)
	}
	return c.Do(ctx, http.MethodGet, path, nil, out)
}
