package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// The team's report (issue 29): GET /v1/report/team answers a
// TeamReport, summed by the shared tier's rollups over every machine that
// ships to it. The daemon reads the tier and serves it: the CLI talks to
// its own daemon only, never to PostgreSQL (it holds no DSN, no password,
// no driver).

// TeamReportFormat is TeamReport.Version.
const TeamReportFormat = 1

// TeamReport is what `bindery report --shared` shows. Every money figure
// is an integer number of micro-USD (Unit), summed from each request's
// spend rounded once: the lines of each grouping (Machines, People,
// Clients, Days, Models) add up to Total exactly.
type TeamReport struct {
	Version int    `json:"version"` // TeamReportFormat
	Unit    string `json:"unit"`    // "micro-USD"
	Shared  string `json:"shared"`  // the tier, its DSN redacted
	Since   string `json:"since,omitempty"`
	Until   string `json:"until,omitempty"`

	Total    TeamFigures `json:"total"`
	Machines []TeamLine  `json:"machines"` // by spend, then name
	People   []TeamLine  `json:"people"`
	Clients  []TeamLine  `json:"clients"` // pi, claude-code, opencode, sdk...
	Models   []TeamLine  `json:"models"`
	Days     []TeamLine  `json:"days"` // by day, oldest first
	// DayMachines is each day's spend per machine: what the chart stacks.
	DayMachines []TeamCell `json:"dayMachines"`
}

// TeamLine is one machine's, person's, client's, model's or day's figures.
type TeamLine struct {
	Name string `json:"name"`
	TeamFigures
}

// TeamCell is one machine's figures on one day.
type TeamCell struct {
	Day     string `json:"day"`
	Machine string `json:"machine"`
	TeamFigures
}

// TeamFigures are a set of requests' sums.
type TeamFigures struct {
	Requests int64 `json:"requests"`
	Errored  int64 `json:"errored"` // errored and aborted replies, in Requests
	// Tokens by kind; CacheWrite includes CacheWrite1h.
	Input        int64 `json:"input"`
	Output       int64 `json:"output"`
	CacheRead    int64 `json:"cacheRead"`
	CacheWrite   int64 `json:"cacheWrite"`
	CacheWrite1h int64 `json:"cacheWrite1h"`
	// HitRatio is CacheRead over the prompt (Input + CacheRead +
	// CacheWrite); 0 without a prompt.
	HitRatio float64   `json:"hitRatio"`
	Spend    TeamSpend `json:"spend"`
	// Unpriced counts requests no price was known for (their tokens are
	// counted, their spend is 0).
	Unpriced int64      `json:"unpriced"`
	Breaks   TeamBreaks `json:"breaks"`
}

// TeamSpend is spend in micro-USD by kind; Other is what was priced only
// as a total. Total is the sum of the kinds.
type TeamSpend struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
	Other      int64 `json:"other"`
	Total      int64 `json:"total"`
}

// TeamBreaks sums cache breaks (the local report's rule, Break): count,
// tokens rewritten, what the rewrites cost, their excess over reading the
// same tokens, and the excess of the avoidable ones (strip, host,
// unknown), in micro-USD.
type TeamBreaks struct {
	Count     int64 `json:"count"`
	Rewritten int64 `json:"rewritten"`
	Cost      int64 `json:"cost"`
	Excess    int64 `json:"excess"`
	Avoidable int64 `json:"avoidable"`
}

// TeamQuery narrows a team report to the UTC days from Since to Until
// ("YYYY-MM-DD", inclusive; "" is unbounded).
type TeamQuery struct {
	Since string
	Until string
}

// TeamSource answers GET /v1/report/team.
type TeamSource interface {
	TeamReport(ctx context.Context, q TeamQuery) (TeamReport, error)
}

// handleTeamReport serves GET /v1/report/team[?since=D&until=D].
func (s *Server) handleTeamReport(w http.ResponseWriter, r *http.Request) {
	var q TeamQuery
	for _, p := range []struct {
		name string
		v    *string
	}{{"since", &q.Since}, {"until", &q.Until}} {
		v := r.URL.Query().Get(p.name)
		if v == "" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, v); err != nil || len(v) != len(time.DateOnly) {
			writeError(w, Errorf(CodeBadRequest, "%s %.40q: want a day, YYYY-MM-DD", p.name, v))
			return
		}
		*p.v = v
	}
	if q.Since != "" && q.Until != "" && q.Until < q.Since {
		writeError(w, Errorf(CodeBadRequest, "until %s is before since %s", q.Until, q.Since))
		return
	}
	rep, err := s.Team.TeamReport(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// TeamReport is GET /v1/report/team.
func (c *Client) TeamReport(ctx context.Context, q TeamQuery) (TeamReport, error) {
	v := url.Values{}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Until != "" {
		v.Set("until", q.Until)
	}
	path := "/v1/report/team"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var rep TeamReport
	err := c.Do(ctx, http.MethodGet, path, nil, &rep)
	return rep, err
}
