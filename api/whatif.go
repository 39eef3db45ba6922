package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// What-if replay (GET /v1/whatif, `bindery whatif`): the user's own
// sessions replayed under thinking policies, each request rebuilt as pi
// sends it and priced with a prompt-cache model (README, "bindery
// whatif"). The daemon computes it (daemon/report/whatif.go); these are
// the wire types.

// The policies a replay compares, in the order they are reported.
const (
	// PolicyRecorded is what pi sent: the replay's calibration baseline.
	PolicyRecorded = "as-recorded"
	// PolicyBindery strips only what a prefix-checking model would refuse
	// (thinking whose prefix the session file shows changed: turns kept
	// across a compaction, context edits); on other models it is as
	// recorded.
	PolicyBindery = "bindery"
	// PolicyStripAll strips every earlier cycle's thinking: a request
	// carries only the open cycle's (the current tool loop must carry its
	// own).
	PolicyStripAll = "strip-all"
	// PolicyKeepLast keeps the thinking of the last N assistant turns only
	// (pi-condense's old keepLastTurns); its name carries N: "keep-last-16".
	PolicyKeepLast = "keep-last"
)

// DefaultKeepLast is pi-condense's old keepLastTurns default.
const DefaultKeepLast = 16

// MaxKeepLast bounds ?keep=.
const MaxKeepLast = 100000

// CalibrationTolerance is the largest relative error, per session, of the
// as-recorded replay's cache read and cache write tokens against what pi
// recorded for the replay to be trusted: a session beyond it is shown as
// uncalibrated and none of its policies is priced.
const CalibrationTolerance = 0.05

// WhatIfQuery is GET /v1/whatif's query: one session ("" for the
// archive) and the N of keep-last.
type WhatIfQuery struct {
	Session string
	Keep    int
}

// WhatIf is GET /v1/whatif's answer.
type WhatIf struct {
	Version int    `json:"version"` // ReportFormat
	Scope   string `json:"scope"`   // "archive" or "session"
	Keep    int    `json:"keep"`    // N of keep-last
	// Policies names the policies in order; every PolicyResult list
	// follows it.
	Policies []string `json:"policies"`
	// Sessions: one row per replayed session, by recorded spend.
	Sessions []WhatIfSession `json:"sessions"`
	// Archive sums the calibrated sessions per policy; Calibrated and
	// Uncalibrated count the sessions in and out of it.
	Archive      []PolicyResult `json:"archive"`
	Calibrated   int            `json:"calibrated"`
	Uncalibrated int            `json:"uncalibrated"`
}

// WhatIfSession is one session's replay.
type WhatIfSession struct {
	Session  string `json:"session"`
	Model    string `json:"model,omitempty"`
	Requests int    `json:"requests"` // requests replayed (those with usage)
	// Calibration compares the as-recorded replay with pi's usage.
	Calibration Calibration    `json:"calibration"`
	Policies    []PolicyResult `json:"policies"`
}

// Calibration is how closely the as-recorded replay reproduced the cache
// tokens pi recorded for a session.
type Calibration struct {
	RecordedRead  int64   `json:"recordedRead"`
	ReplayedRead  int64   `json:"replayedRead"`
	RecordedWrite int64   `json:"recordedWrite"`
	ReplayedWrite int64   `json:"replayedWrite"`
	ReadError     float64 `json:"readError"`  // |replayed-recorded|/recorded (0 when both are 0)
	WriteError    float64 `json:"writeError"` // same for cache write
	// What the replay took from the recording and what it predicted:
	// AsRecorded counts the requests whose cache loss (a compaction, a
	// model or thinking change, a host change, or no known cause) it took
	// as recorded, under every policy; Expired the idle expiries it
	// predicted from the timestamps and the cache lifetime.
	AsRecorded int `json:"asRecorded"`
	Expired    int `json:"expired"`
	// OK is both errors within CalibrationTolerance; else Reason says
	// what the replay could not reproduce.
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// PolicyResult is one policy's replay of a session (or the archive's sum).
type PolicyResult struct {
	Policy     string `json:"policy"`
	Input      int64  `json:"input"` // uncached input tokens
	Output     int64  `json:"output"`
	CacheRead  int64  `json:"cacheRead"`
	CacheWrite int64  `json:"cacheWrite"`
	// ThinkingRead is the thinking blocks the model reads, summed over
	// requests (a block carried by ten requests counts ten times);
	// ThinkingTokens their estimated tokens, billed as input.
	ThinkingRead   int   `json:"thinkingRead"`
	ThinkingTokens int64 `json:"thinkingTokens"`
	// Breaks counts requests that read less than the previous one left.
	Breaks int `json:"breaks"`
	// Spend is the replay priced (USD); nil when the session is not
	// calibrated or a request has no price.
	Spend *float64 `json:"spend"`
	// Delta is this policy minus as-recorded.
	Delta PolicyDelta `json:"delta"`
}

// PolicyDelta is a policy's difference against as-recorded.
type PolicyDelta struct {
	Spend        *float64 `json:"spend"`
	CacheRead    int64    `json:"cacheRead"`
	CacheWrite   int64    `json:"cacheWrite"`
	ThinkingRead int      `json:"thinkingRead"`
}

// handleWhatIf serves GET /v1/whatif[?session=ID][&keep=N].
func (s *Server) handleWhatIf(w http.ResponseWriter, r *http.Request) {
	q := WhatIfQuery{Session: r.URL.Query().Get("session"), Keep: DefaultKeepLast}
	if len(q.Session) > 256 {
		writeError(w, Errorf(CodeBadRequest, "a session id is at most 256 characters"))
		return
	}
	if k := r.URL.Query().Get("keep"); k != "" {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 || n > MaxKeepLast {
			writeError(w, Errorf(CodeBadRequest, "keep=%q: want a whole number of turns from 1 to %d", k, MaxKeepLast))
			return
		}
		q.Keep = n
	}
	res, err := s.Reports.WhatIf(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// WhatIf is GET /v1/whatif: the archive's replay when q.Session is "",
// else that session's; q.Keep 0 means DefaultKeepLast.
func (c *Client) WhatIf(ctx context.Context, q WhatIfQuery) (WhatIf, error) {
	v := url.Values{}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.Keep != 0 {
		v.Set("keep", strconv.Itoa(q.Keep))
	}
	path := "/v1/whatif"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var res WhatIf
	err := c.Do(ctx, http.MethodGet, path, nil, &res)
	return res, err
}
