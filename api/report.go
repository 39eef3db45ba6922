package api

import (
	"context"
	"net/http"
	"net/url"
	"sort"
)

// The report's wire types: GET /v1/report answers a Report, GET
// /v1/whatif a WhatIf (whatif.go). They are the whole contract between
// the daemon, which computes them (daemon/report), and its clients, which
// render them (cmd/bindery's report_*.go and whatif_*.go files draw the
// terminal tables and the charts from these types alone, so the CLI needs
// nothing of the daemon's packages; see its TestClientImports). Field
// names are stable; new fields may be added, none renamed or removed
// without bumping ReportFormat.

// ReportFormat is Report.Version: it changes whenever a figure's meaning
// does (the daemon also recomputes its cached summaries then).
const ReportFormat = 4

// MaxArchiveBreaks is how many breaks an archive report lists (the
// costliest); the totals cover all of them.
const MaxArchiveBreaks = 20

// Report is what `bindery report`, GET /v1/report and --json show.
type Report struct {
	Version int    `json:"version"` // ReportFormat
	Scope   string `json:"scope"`   // "archive" or "session"
	// Session, Model, First and Last describe the one session (scope
	// "session").
	Session string `json:"session,omitempty"`
	Model   string `json:"model,omitempty"`
	First   string `json:"first,omitempty"`
	Last    string `json:"last,omitempty"`
	// SameID lists, when more than one file carries the session's id (a
	// copied file), every such file, the one reported first: the live one
	// with the latest last activity, a tie going to the file ingested last.
	SameID []SessionFile `json:"sameId,omitempty"`

	Figures Figures `json:"figures"`
	// Breaks: every break of the session in request order, or the
	// MaxArchiveBreaks costliest of the archive. BreaksOmitted says how
	// many more the totals count.
	Breaks        []Break `json:"breaks"`
	BreaksOmitted int     `json:"breaksOmitted"`
	// Requests: the session's per-request rows (scope "session" only).
	Requests []Request `json:"requests,omitempty"`
	// Marks: what happened between requests that the chart marks
	// (compactions, branch summaries, model and thinking changes), scope
	// "session" only.
	Marks []Mark `json:"marks,omitempty"`
	// Sessions: one line per session (scope "archive" only), by spend.
	// Their Spend adds up to Figures.Total.
	Sessions []SessionLine `json:"sessions,omitempty"`
	// Latest is the session `bindery report --chart` draws when no
	// session is named and the chart is of one session: the live (not
	// removed) session with the latest last activity, a tie going to the
	// file ingested last. "" when no session is live.
	Latest string `json:"latest,omitempty"`
	// Prices is the price table the report used, keyed by model key
	// ("sonnet-4.5").
	Prices map[string]Price `json:"prices"`
	// Hosts is the conversations of bindery proxy and other hosts without
	// a session file (scope "archive" only; nil when there are none).
	Hosts *HostReport `json:"hosts,omitempty"`
	// GrandTotal is Figures.Total (pi's sessions) plus Hosts.Total.
	GrandTotal float64 `json:"grandTotal"`
}

// HostReport is the spend of the conversations no pi session file holds
// (bindery proxy's, a script's own): each accepted reply's usage as its
// accept carried it, priced by the same table as pi's. Kept apart from
// Figures, which are read from pi's files: no cycles, breaks or thinking
// figures, which need the requests themselves.
type HostReport struct {
	// Conversations, by spend; their Total adds up to Total.
	Conversations []HostLine `json:"conversations"`
	Usage         UsageLine  `json:"usage"` // Entries: replies accepted
	// UsageMissing counts replies whose usage lacked input, cache read or
	// cache write: their known counts are in the sums, and their spend
	// is in no total (Unpriced).
	UsageMissing int     `json:"usageMissing"`
	Total        float64 `json:"total"`
	Unpriced     int     `json:"unpriced"` // replies without a price
	// Days is the priced spend by UTC day of the accept, by kind (Input,
	// Output, CacheWrite, CacheRead): what the archive chart stacks as
	// Day.Hosts beside pi's. Its days add up to Total.
	Days map[string]Day `json:"days,omitempty"`
}

// HostLine is one conversation of a host (bindery proxy: client:session).
type HostLine struct {
	Conversation string    `json:"conversation"`
	Client       string    `json:"client,omitempty"`
	Models       []string  `json:"models"`
	First        string    `json:"first"`
	Last         string    `json:"last"`
	Usage        UsageLine `json:"usage"`
	UsageMissing int       `json:"usageMissing"`
	// HitRatio is cache read over all input (input, read, write).
	HitRatio float64 `json:"hitRatio"`
	Total    float64 `json:"total"`
	Unpriced int     `json:"unpriced"`
}

// SessionLine is one session in an archive report. Spend is the session's
// Figures.Total, to the cent what its own report shows.
type SessionLine struct {
	Session   string  `json:"session"`
	Model     string  `json:"model,omitempty"`
	Last      string  `json:"last,omitempty"`
	Requests  int     `json:"requests"`
	Cycles    int     `json:"cycles"`
	Spend     float64 `json:"spend"`
	Unpriced  int     `json:"unpriced"`
	Breaks    int     `json:"breaks"`
	Avoidable float64 `json:"avoidable"`
	HitRatio  float64 `json:"hitRatio"`
}

// Mark is an entry between two requests that changes what the cache can
// reuse: a compaction, a branch summary, a model or thinking-level change.
type Mark struct {
	Kind string `json:"kind"` // "compaction", "branch_summary", "model_change", "thinking_level_change"
	// Before is the Request.N of the first request after the entry
	// (len(requests)+1 when none followed).
	Before    int    `json:"before"`
	Line      int    `json:"line"`
	Timestamp string `json:"timestamp,omitempty"`
}

// Regime says what the API does with thinking from closed cycles for a
// model (research/preserved-thinking.md section 4).
type Regime string

const (
	// LastTurnOnly models (Opus 4.1 and earlier, Sonnet 4.5 and earlier,
	// Sonnet 3.7, every Haiku through 4.5) strip closed-cycle thinking
	// server-side: it takes no context and is not billed.
	LastTurnOnly Regime = "last-turn-only"
	// KeepAll models (Opus 4.5+, Sonnet 4.6+, Fable 5/5.1, Mythos 5/5.1,
	// Mythos Preview) keep every thinking block and bill it as input.
	KeepAll Regime = "keep-all"
	// UnknownRegime is a model the research does not place (Haiku 5.5,
	// Fable/Mythos 5.2, anything not Claude). The report counts its
	// closed-cycle thinking as billed, the conservative reading.
	UnknownRegime Regime = "unknown"
)

// Request is one assistant message on the branch: one API request.
type Request struct {
	N          int    `json:"n"` // 1-based position among the branch's requests
	EntryID    string `json:"entryId"`
	Line       int    `json:"line"`
	Timestamp  string `json:"timestamp,omitempty"`
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
	// Apart is true for errored and aborted replies.
	Apart bool `json:"apart,omitempty"`
	// Usage; UsageKnown is false when input, cacheRead or cacheWrite is missing.
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
	// CacheWrite1h is the part of CacheWrite written with the 1-hour TTL
	// and Reasoning the part of Output that was thinking (pi 1.6).
	CacheWrite1h int64 `json:"cacheWrite1h,omitempty"`
	Reasoning    int64 `json:"reasoning,omitempty"`
	UsageKnown   bool  `json:"usageKnown"`
	Prompt       int64 `json:"prompt"` // input + cacheRead + cacheWrite
	// Cycle is the 1-based thinking cycle; Turn the turn within it (0 for
	// errored and aborted replies, which are not turns).
	Cycle int `json:"cycle"`
	Turn  int `json:"turn"`
	// ThinkingBilled estimates the thinking tokens in this prompt that the
	// model's regime bills; ThinkingFree those it drops for free.
	ThinkingBilled int64  `json:"thinkingBilled"`
	ThinkingFree   int64  `json:"thinkingFree"`
	Regime         Regime `json:"regime"`
	// Cost in USD and where it came from ("pi", "table", "pi-total");
	// nil/"" when unknown.
	Cost       *float64 `json:"cost"`
	CostSource string   `json:"costSource,omitempty"`
	// Strips bindery made in this request's compile, and their tokens.
	Strips         int   `json:"strips"`
	StrippedTokens int64 `json:"strippedTokens"`
	Break          bool  `json:"break"`
}

// Break is a request that read less from the cache than the previous
// request left in it (README, "Cache breaks").
type Break struct {
	Session   string `json:"session"`
	Request   int    `json:"request"` // Request.N
	EntryID   string `json:"entryId"`
	Line      int    `json:"line"`
	Timestamp string `json:"timestamp,omitempty"`
	Cycle     int    `json:"cycle"`
	Turn      int    `json:"turn"`
	Model     string `json:"model,omitempty"`
	// ReadBefore/ReadAfter are the cacheRead of the previous request and
	// of this one; Left what the previous request left cached (its
	// cacheRead + cacheWrite) and Reusable the part of it this request's
	// prompt could reuse (Left, or the prompt when that is smaller);
	// Rewritten the tokens written again.
	ReadBefore int64 `json:"readBefore"`
	ReadAfter  int64 `json:"readAfter"`
	Left       int64 `json:"left"`
	Reusable   int64 `json:"reusable"`
	Rewritten  int64 `json:"rewritten"`
	// Gap is the time since the previous request (or the cache warm after
	// it), in seconds; 0 when a timestamp is missing.
	Gap float64 `json:"gap"`
	// Cost is Rewritten at the write price; Excess is Cost minus what
	// reading the same tokens would have cost. nil when unpriced.
	Cost   *float64 `json:"cost"`
	Excess *float64 `json:"excess"`
	Cause  string   `json:"cause"`
}

// Break causes, in the order they are tried (README, "Cache breaks").
const (
	CauseCompaction = "compaction" // a compaction or branch summary entry between the two requests
	CauseStrip      = "strip"      // bindery's compile stripped blocks and reported the change as its own
	CauseHost       = "host"       // bindery's compile saw the host change the prompt
	CauseModel      = "model"      // a model or thinking-level change between the two
	CauseIdle       = "idle"       // more than the cache lifetime since the previous request
	CauseUnknown    = "unknown"    // none of the above
)

// Causes lists the break causes in the order the report shows them.
var Causes = []string{CauseCompaction, CauseStrip, CauseHost, CauseModel, CauseIdle, CauseUnknown}

// Avoidable says whether a break of that cause is counted as avoidable
// spend: bindery's own strips, host changes and unexplained rewrites.
// Compaction, model changes and idle expiry are the user's choices or the
// cache's nature.
func Avoidable(cause string) bool {
	return cause == CauseStrip || cause == CauseHost || cause == CauseUnknown
}

// Price is a model's list price in USD per million tokens. A nil field is
// unknown: the report then counts the tokens and says the price is
// unknown rather than guess.
type Price struct {
	Input      *float64 `json:"input,omitempty"`
	Output     *float64 `json:"output,omitempty"`
	CacheWrite *float64 `json:"cacheWrite,omitempty"` // 5-minute TTL write, pi's default
	// CacheWrite1h is the 1-hour TTL write (pi 1.6 reports the 1h part of
	// cacheWrite as cacheWrite1h). Unset, it is the documented 2x of Input
	// when Input is known (Write1hPrice), else unknown.
	CacheWrite1h *float64 `json:"cacheWrite1h,omitempty"`
	CacheRead    *float64 `json:"cacheRead,omitempty"`
	Source       string   `json:"source"`
}

// Write1hMultiplier is the documented 1-hour cache-write price over base
// input (research/preserved-thinking.md section 5).
const Write1hMultiplier = 2.0

// Write1hPrice is the row's 1-hour cache-write price: its own, else the
// prompt-caching docs' 2x of base input (what pi's own calculateCost
// charges), else unknown.
func (p Price) Write1hPrice() *float64 {
	if p.CacheWrite1h != nil {
		return p.CacheWrite1h
	}
	if p.Input != nil {
		v := *p.Input * Write1hMultiplier
		return &v
	}
	return nil
}

// Figures are the mergeable totals of one session or of many. Every field
// is a sum or an exact histogram, so the figures of an archive are the
// merge of its sessions' figures; derived fields (Total, medians, ratios,
// means) are filled when the report is made and never merged.
type Figures struct {
	Sessions int      `json:"sessions"`
	Requests Requests `json:"requests"`
	Cycles   Cycles   `json:"cycles"`
	Thinking Thinking `json:"thinking"`
	Cache    Cache    `json:"cache"`
	// Spend is what the completed requests (turns) cost.
	Spend Spend `json:"spend"`
	// Apart is the usage and spend of errored and aborted replies: billed,
	// but never resent by pi, so kept out of every other figure but Total.
	Apart Apart `json:"apart"`
	// Warm is the spend pi 1.6 records in usage entries of kind
	// "cache_warm": requests re-sent (max_tokens 1) only to keep the prompt
	// cache warm. They are not requests of the branch: no turn, no part in
	// cycles, thinking or cache breaks, and not in Spend. OtherUsage is
	// usage entries of any other kind, named in its Kinds.
	Warm       UsageLine   `json:"warm"`
	OtherUsage UsageLine   `json:"otherUsage"`
	Breaks     BreakTotals `json:"breaks"`
	Bindery    Bindery     `json:"bindery"`
	// Days is spend by UTC day of the request (or usage entry), by kind:
	// what the archive chart draws. Keyed "2026-12-01".
	Days map[string]Day `json:"days"`

	// Total is everything the session(s) cost: Spend + Apart + Warm +
	// OtherUsage (derived). It is the one spend figure: the archive's, the
	// sum of its session lines', and each session's own.
	Total float64 `json:"total"`
	// TotalUnpriced counts the requests and usage entries without a price
	// (derived): their tokens are counted, their money is in no total.
	TotalUnpriced int `json:"totalUnpriced"`
}

// Day is one UTC day's spend by kind, in USD. Errors is errored and
// aborted replies, Other cache warms and other usage entries, Unsplit what
// pi priced only as a total. Avoidable is the excess of that day's
// avoidable breaks (already inside CacheWrite).
type Day struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cacheWrite"`
	CacheRead  float64 `json:"cacheRead"`
	Errors     float64 `json:"errors"`
	Other      float64 `json:"other"`
	Unsplit    float64 `json:"unsplit"`
	Avoidable  float64 `json:"avoidable"`
	// Hosts is the day's spend of bindery proxy's and other hosts'
	// conversations (HostReport.Days): set only where the archive chart
	// puts both together; Figures.Days never carry it.
	Hosts float64 `json:"hosts,omitempty"`
}

// Sum is the day's spend (Avoidable is inside it).
func (d Day) Sum() float64 {
	return d.Input + d.Output + d.CacheWrite + d.CacheRead + d.Errors + d.Other + d.Unsplit + d.Hosts
}

// UsageLine is what a kind of usage entry used and cost.
type UsageLine struct {
	Entries int   `json:"entries"`
	Input   int64 `json:"input"`
	Output  int64 `json:"output"`
	Read    int64 `json:"cacheRead"`
	Write   int64 `json:"cacheWrite"`
	// Write1h is the part of Write written with the 1-hour TTL.
	Write1h int64    `json:"cacheWrite1h"`
	Kinds   []string `json:"kinds,omitempty"`
	Spend   Spend    `json:"spend"`
}

// Requests counts the assistant messages on a session's current branch.
type Requests struct {
	Total     int `json:"total"`     // every assistant message: one API request each
	Turns     int `json:"turns"`     // completed replies (stopReason stop, length, toolUse or unset)
	ToolLoops int `json:"toolLoops"` // completed replies ending in toolUse: one tool round trip each
	Errored   int `json:"errored"`   // stopReason error
	Aborted   int `json:"aborted"`   // stopReason aborted
	// UsageMissing counts replies whose usage lacks input, cacheRead or
	// cacheWrite: their tokens count where known, they take no part in
	// break detection.
	UsageMissing int `json:"usageMissing"`
	// OffBranch counts assistant messages in the file but not on the
	// current branch (abandoned by /tree): not analysed.
	OffBranch int `json:"offBranch"`
}

// Cycles are thinking cycles (economics.md): a cycle runs from a user
// message holding any non-tool-result content to the next. Only cycles with
// at least one completed assistant turn are counted. The last such cycle
// of a session is open when no user message followed it; every other is
// closed.
type Cycles struct {
	Count  int `json:"count"`
	Closed int `json:"closed"`
	Open   int `json:"open"`
	// Lengths is the exact histogram of cycle lengths in assistant turns:
	// {"3": 41} means 41 cycles of 3 turns. It is mergeable across
	// sessions and small; the median and p90 computed from it are exact.
	Lengths Histogram `json:"lengths"`
	Over16  int       `json:"over16"`  // cycles longer than 16 turns (pi-condense's old strip window)
	Over130 int       `json:"over130"` // cycles longer than 130 turns (the seed's strip break-even)
	// MaxThinking is the most thinking (estimated tokens) any one cycle
	// produced: what a cycle that is never closed keeps resident.
	MaxThinking int64 `json:"maxThinking"`

	Median int `json:"median"` // nearest-rank median length (derived)
	P90    int `json:"p90"`    // nearest-rank 90th percentile length (derived)
}

// Volume is an amount of thinking.
type Volume struct {
	Blocks int `json:"blocks"`
	// Tokens is estimated as ceil(chars/4) per block, pi's own estimate.
	// Blocks with empty text (display "omitted") estimate as 0.
	Tokens   int64 `json:"tokens"`
	Redacted int   `json:"redacted"` // redacted_thinking blocks among Blocks
}

// Thinking is the thinking produced on the branch, by where it sits at the
// end of the session, and what the requests carried of it.
type Thinking struct {
	Closed Volume `json:"closed"` // produced in cycles since closed
	Open   Volume `json:"open"`   // produced in the open cycle
	// Billed sums, over requests, the estimated thinking tokens in the
	// prompt that the model's regime bills: the open cycle's always,
	// closed cycles' on keep-all and unknown-regime models.
	Billed int64 `json:"billed"`
	// Free sums, over requests, the closed-cycle thinking tokens a
	// last-turn-only model dropped without billing.
	Free int64 `json:"free"`
	// PromptTokens sums the requests' prompts (input+cacheRead+cacheWrite),
	// the denominator of Share.
	PromptTokens int64 `json:"promptTokens"`
	// Requests by the regime of the model that answered them.
	LastTurnOnly int `json:"lastTurnOnly"`
	KeepAll      int `json:"keepAll"`
	Unknown      int `json:"unknownRegime"`

	Share float64 `json:"share"` // Billed / PromptTokens (derived)
}

// Cache is the token split of completed requests' prompts.
type Cache struct {
	Read   int64 `json:"read"`
	Write  int64 `json:"write"`
	Input  int64 `json:"input"` // uncached input
	Output int64 `json:"output"`

	HitRatio    float64 `json:"hitRatio"`       // Read / (Read+Write+Input) (derived)
	ReadPerReq  float64 `json:"readPerRequest"` // means over completed requests (derived)
	WritePerReq float64 `json:"writePerRequest"`
	InputPerReq float64 `json:"inputPerRequest"`
}

// Spend is money in USD. A request is priced from pi's usage.cost when it
// carries the four parts, else from the price table, else not at all:
// Unpriced counts those and UnpricedModels names them; their tokens are in
// Cache but their money is in no total here.
type Spend struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cacheWrite"`
	CacheRead  float64 `json:"cacheRead"`
	// Unsplit is cost.total of requests pi priced only as a total.
	Unsplit float64 `json:"unsplit"`
	Total   float64 `json:"total"`

	FromPi         int      `json:"fromPi"`    // requests priced by pi's usage.cost
	FromTable      int      `json:"fromTable"` // requests priced by the price table
	Unpriced       int      `json:"unpriced"`
	UnpricedModels []string `json:"unpricedModels"`
}

// Apart is what errored and aborted replies used and cost.
type Apart struct {
	Requests int   `json:"requests"`
	Input    int64 `json:"input"`
	Output   int64 `json:"output"`
	Read     int64 `json:"cacheRead"`
	Write    int64 `json:"cacheWrite"`
	Spend    Spend `json:"spend"`
}

// BreakTotals sums the cache breaks by cause.
type BreakTotals struct {
	Count     int                   `json:"count"`
	Rewritten int64                 `json:"rewritten"` // tokens
	Cost      float64               `json:"cost"`      // USD paid for the rewrites, where priced
	Excess    float64               `json:"excess"`    // USD above reading the same tokens
	Unpriced  int                   `json:"unpriced"`  // breaks with no price
	ByCause   map[string]CauseTotal `json:"byCause"`
	// Avoidable is the excess of the strip, host and unknown breaks
	// (Avoidable(cause)): the spend a stable prompt would have saved.
	Avoidable float64 `json:"avoidable"`
}

// CauseTotal is one cause's share of the breaks.
type CauseTotal struct {
	Count     int     `json:"count"`
	Rewritten int64   `json:"rewritten"`
	Cost      float64 `json:"cost"`
	Excess    float64 `json:"excess"`
}

// Bindery is what bindery did, from its compile events.
type Bindery struct {
	Compiles int            `json:"compiles"`
	Strips   map[string]int `json:"strips"` // by reason (binding.md's names)
	// StrippedTokens is the estimated size of the stripped blocks.
	StrippedTokens int64 `json:"strippedTokens"`
	// CacheCost is the excess cost of the cache breaks caused by strips
	// (BreakTotals.ByCause["strip"].Excess): what stripping cost over
	// keeping the cache.
	CacheCost float64 `json:"cacheCost"`
	// RefusalsAvoided counts stripped blocks the provider would have
	// refused; RequestsRescued the compiles that held at least one, each a
	// 400 avoided.
	RefusalsAvoided int `json:"refusalsAvoided"`
	RequestsRescued int `json:"requestsRescued"`
}

// Histogram is an exact, mergeable count of small integer values.
type Histogram map[int]int

// Add records n occurrences of v.
func (h Histogram) Add(v, n int) { h[v] += n }

// Quantile is the nearest-rank q-quantile (0<q<=1): the smallest value v
// such that at least ceil(q*N) recorded values are <= v. 0 when empty.
func (h Histogram) Quantile(q float64) int {
	n := 0
	keys := make([]int, 0, len(h))
	for k, c := range h {
		keys = append(keys, k)
		n += c
	}
	if n == 0 {
		return 0
	}
	sort.Ints(keys)
	rank := int(q*float64(n) + 0.999999999)
	if rank < 1 {
		rank = 1
	}
	seen := 0
	for _, k := range keys {
		seen += h[k]
		if seen >= rank {
			return k
		}
	}
	return keys[len(keys)-1]
}

// ReportSource answers GET /v1/report (design/economics.md) over the
// whole archive when session is "", else for that pi session with its
// per-request rows, and GET /v1/whatif (whatif.go). An unknown session is
// an *Error with CodeNotFound.
type ReportSource interface {
	Report(ctx context.Context, session string) (Report, error)
	WhatIf(ctx context.Context, q WhatIfQuery) (WhatIf, error)
}

// handleReport serves GET /v1/report[?session=ID].
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	session := r.URL.Query().Get("session")
	if len(session) > 256 {
		writeError(w, Errorf(CodeBadRequest, "a session id is at most 256 characters"))
		return
	}
	rep, err := s.Reports.Report(r.Context(), session)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Report is GET /v1/report: the archive's report when session is "", else
// that session's.
func (c *Client) Report(ctx context.Context, session string) (Report, error) {
	path := "/v1/report"
	if session != "" {
		path += "?session=" + url.QueryEscape(session)
	}
	var rep Report
	err := c.Do(ctx, http.MethodGet, path, nil, &rep)
	return rep, err
}
