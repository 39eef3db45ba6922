package report

import (
	"sort"
	"strconv"
)

// FormatVersion changes whenever a Summary's meaning changes: summaries
// cached under another version are recomputed.
const FormatVersion = 3

// Figures are the mergeable totals of one session or of many. Every field
// is a sum or an exact histogram, so the figures of an archive are the
// merge of its sessions' figures; derived fields (medians, ratios, means)
// are filled by Finish and never merged.
type Figures struct {
	Sessions int      `json:"sessions"`
	Requests Requests `json:"requests"`
	Cycles   Cycles   `json:"cycles"`
	Thinking Thinking `json:"thinking"`
	Cache    Cache    `json:"cache"`
	Spend    Spend    `json:"spend"`
	// Apart is the usage and spend of errored and aborted replies: billed,
	// but never resent by pi, so kept out of every other figure.
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

func (u *UsageLine) add(o UsageLine) {
	u.Entries += o.Entries
	u.Input += o.Input
	u.Output += o.Output
	u.Read += o.Read
	u.Write += o.Write
	u.Write1h += o.Write1h
	u.Kinds = mergeNames(u.Kinds, o.Kinds)
	u.Spend.add(o.Spend)
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
	// {"3": 41} means 41 cycles of 3 turns. Lengths are small integers, so
	// an exact histogram is both mergeable across sessions and small; the
	// median and p90 computed from it are exact.
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
}

// CauseTotal is one cause's share of the breaks.
type CauseTotal struct {
	Count     int     `json:"count"`
	Rewritten int64   `json:"rewritten"`
	Cost      float64 `json:"cost"`
	Excess    float64 `json:"excess"`
}

// Break causes.
const (
	CauseStrip   = "strip"   // bindery's compile stripped blocks and reported the change as its own
	CauseHost    = "host"    // the compile saw the host change the prompt before bindery's first strip
	CauseIdle    = "idle"    // more than IdleGap since the previous request: the 5-minute cache likely expired
	CauseUnknown = "unknown" // none of the above
)

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

func (v *Volume) add(o Volume) {
	v.Blocks += o.Blocks
	v.Tokens += o.Tokens
	v.Redacted += o.Redacted
}

func (s *Spend) add(o Spend) {
	s.Input += o.Input
	s.Output += o.Output
	s.CacheWrite += o.CacheWrite
	s.CacheRead += o.CacheRead
	s.Unsplit += o.Unsplit
	s.Total += o.Total
	s.FromPi += o.FromPi
	s.FromTable += o.FromTable
	s.Unpriced += o.Unpriced
	s.UnpricedModels = mergeNames(s.UnpricedModels, o.UnpricedModels)
}

func mergeNames(a, b []string) []string {
	for _, n := range b {
		i := sort.SearchStrings(a, n)
		if i < len(a) && a[i] == n {
			continue
		}
		a = append(a, "")
		copy(a[i+1:], a[i:])
		a[i] = n
	}
	return a
}

// Merge adds o's totals to f.
func (f *Figures) Merge(o Figures) {
	f.Sessions += o.Sessions

	r := &f.Requests
	r.Total += o.Requests.Total
	r.Turns += o.Requests.Turns
	r.ToolLoops += o.Requests.ToolLoops
	r.Errored += o.Requests.Errored
	r.Aborted += o.Requests.Aborted
	r.UsageMissing += o.Requests.UsageMissing
	r.OffBranch += o.Requests.OffBranch

	c := &f.Cycles
	c.Count += o.Cycles.Count
	c.Closed += o.Cycles.Closed
	c.Open += o.Cycles.Open
	c.Over16 += o.Cycles.Over16
	c.Over130 += o.Cycles.Over130
	c.MaxThinking = max(c.MaxThinking, o.Cycles.MaxThinking)
	if len(o.Cycles.Lengths) > 0 && c.Lengths == nil {
		c.Lengths = Histogram{}
	}
	for k, n := range o.Cycles.Lengths {
		c.Lengths.Add(k, n)
	}

	t := &f.Thinking
	t.Closed.add(o.Thinking.Closed)
	t.Open.add(o.Thinking.Open)
	t.Billed += o.Thinking.Billed
	t.Free += o.Thinking.Free
	t.PromptTokens += o.Thinking.PromptTokens
	t.LastTurnOnly += o.Thinking.LastTurnOnly
	t.KeepAll += o.Thinking.KeepAll
	t.Unknown += o.Thinking.Unknown

	f.Cache.Read += o.Cache.Read
	f.Cache.Write += o.Cache.Write
	f.Cache.Input += o.Cache.Input
	f.Cache.Output += o.Cache.Output

	f.Spend.add(o.Spend)

	a := &f.Apart
	a.Requests += o.Apart.Requests
	a.Input += o.Apart.Input
	a.Output += o.Apart.Output
	a.Read += o.Apart.Read
	a.Write += o.Apart.Write
	a.Spend.add(o.Apart.Spend)
	f.Warm.add(o.Warm)
	f.OtherUsage.add(o.OtherUsage)

	b := &f.Breaks
	b.Count += o.Breaks.Count
	b.Rewritten += o.Breaks.Rewritten
	b.Cost += o.Breaks.Cost
	b.Excess += o.Breaks.Excess
	b.Unpriced += o.Breaks.Unpriced
	for k, v := range o.Breaks.ByCause {
		if b.ByCause == nil {
			b.ByCause = map[string]CauseTotal{}
		}
		t := b.ByCause[k]
		t.Count += v.Count
		t.Rewritten += v.Rewritten
		t.Cost += v.Cost
		t.Excess += v.Excess
		b.ByCause[k] = t
	}

	d := &f.Bindery
	d.Compiles += o.Bindery.Compiles
	for k, v := range o.Bindery.Strips {
		if d.Strips == nil {
			d.Strips = map[string]int{}
		}
		d.Strips[k] += v
	}
	d.StrippedTokens += o.Bindery.StrippedTokens
	d.CacheCost += o.Bindery.CacheCost
	d.RefusalsAvoided += o.Bindery.RefusalsAvoided
	d.RequestsRescued += o.Bindery.RequestsRescued
}

// Finish fills the derived fields (quantiles, ratios, means) and makes
// empty collections non-nil so the JSON shape is stable.
func (f *Figures) Finish() {
	if f.Cycles.Lengths == nil {
		f.Cycles.Lengths = Histogram{}
	}
	f.Cycles.Median = f.Cycles.Lengths.Quantile(0.5)
	f.Cycles.P90 = f.Cycles.Lengths.Quantile(0.9)
	f.Thinking.Share = ratio(float64(f.Thinking.Billed), float64(f.Thinking.PromptTokens))
	c := &f.Cache
	c.HitRatio = ratio(float64(c.Read), float64(c.Read+c.Write+c.Input))
	n := float64(f.Requests.Turns)
	c.ReadPerReq = ratio(float64(c.Read), n)
	c.WritePerReq = ratio(float64(c.Write), n)
	c.InputPerReq = ratio(float64(c.Input), n)
	if f.Spend.UnpricedModels == nil {
		f.Spend.UnpricedModels = []string{}
	}
	for _, sp := range []*Spend{&f.Apart.Spend, &f.Warm.Spend, &f.OtherUsage.Spend} {
		if sp.UnpricedModels == nil {
			sp.UnpricedModels = []string{}
		}
	}
	if f.Breaks.ByCause == nil {
		f.Breaks.ByCause = map[string]CauseTotal{}
	}
	if f.Bindery.Strips == nil {
		f.Bindery.Strips = map[string]int{}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func itoa(n int) string { return strconv.Itoa(n) }

func sortSlice[T any](s []T, less func(a, b T) bool) {
	sort.SliceStable(s, func(i, j int) bool { return less(s[i], s[j]) })
}
