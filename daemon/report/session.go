package report

import (
	"sort"
	"time"

	"github.com/my-pi/bindery/watcher"
)

// IdleGap is the default cache lifetime, after which a break with no
// other known cause is put down to the cache expiring: pi writes with the
// default 5-minute TTL, measured from the start of the last request that
// read or wrote the entry (1 hour where the usage shows 1-hour writes:
// CacheLifetime). Entry timestamps are pi's write times, so this is a
// hint, not proof.
const IdleGap = 5 * time.Minute

// CompileEvent is what bindery recorded about one compile of a session's
// request: its strips and what it saw change in the cache prefix. The
// binding pass produces it (issue 4); the report only reads it.
type CompileEvent struct {
	Seq int64 `json:"seq"`
	// EntryID is the id of the assistant entry that answered this compile,
	// when known. Else Parent links it: the entry the request was built on
	// (for pi, the branch leaf the compile named), so the compile answers
	// the first assistant entry on the branch whose parentId is Parent.
	// Compiles linked neither way count in the totals but explain no break.
	EntryID string  `json:"entryId,omitempty"`
	Parent  string  `json:"parent,omitempty"`
	Strips  []Strip `json:"strips,omitempty"`
	// CacheCause is the compile's cache.cause (api.md): "host" when the
	// request first differed from the branch's last accepted one where the
	// host changed it, "bindery" (or "strip") where bindery's strip did,
	// "none" or "".
	CacheCause string `json:"cacheCause,omitempty"`
}

// WouldRefuse says whether a strip reason (design/binding.md) names a
// block a prefix-checking model would refuse if sent: its prefix or seed
// changed since it was minted, the provider already refused it
// (released), or it carries no conversation record for a binding target
// (model-unbound). no-stamp and gap strips may remove blocks the provider
// would have accepted, and model-unreadable blocks are dropped by the
// API's model check rather than refused, so none of those counts as a
// 400 avoided.
func WouldRefuse(reason string) bool {
	switch reason {
	case "prefix-changed", "seed-changed", "released", "model-unbound":
		return true
	}
	return false
}

// Strip is one stripped thinking block.
type Strip struct {
	Reason string `json:"reason"` // binding.md's reason: released, no-stamp, prefix-changed, gap, ...
	Tokens int64  `json:"tokens"` // estimated size of the block
	// WouldRefuse is true when the provider would have refused the request
	// had the block been sent (a 400 avoided).
	WouldRefuse bool `json:"wouldRefuse,omitempty"`
}

// SessionInput is everything the report knows about one session.
type SessionInput struct {
	Session  string          // pi session id
	Entries  []watcher.Entry // every ingested entry, in file order
	Compiles []CompileEvent  // bindery's compiles for the session, any order
}

// Summary is what the report keeps of a session between runs: mergeable
// figures and the session's breaks. It is what the per-session cache
// holds.
type Summary struct {
	Version int     `json:"version"` // FormatVersion
	Session string  `json:"session"`
	Model   string  `json:"model,omitempty"` // model of the last request
	First   string  `json:"first,omitempty"` // timestamp of the first request
	Last    string  `json:"last,omitempty"`  // timestamp of the last request
	Figures Figures `json:"figures"`
	Breaks  []Break `json:"breaks"`
}

// Session is a Summary with the per-request rows behind it (for one
// session's report and its chart).
type Session struct {
	Summary  Summary   `json:"summary"`
	Requests []Request `json:"requests"`
	Marks    []Mark    `json:"marks"`
}

// Branch returns the indices, root first, of the entries on the session's
// current branch: the path from the current leaf (the last entry in file
// order, as pi's loader picks it) up its parentId links to a root (an
// entry whose parent is empty, itself, or not in the file). A file with no
// parentId on any entry (pi v1, before the tree) is one linear branch.
func Branch(entries []watcher.Entry) []int {
	if len(entries) == 0 {
		return nil
	}
	tree := false
	byID := make(map[string]int, len(entries))
	for i, e := range entries {
		if e.ID != "" {
			byID[e.ID] = i
		}
		if e.ParentID != "" {
			tree = true
		}
	}
	if !tree {
		path := make([]int, len(entries))
		for i := range path {
			path[i] = i
		}
		return path
	}
	var path []int
	at := make(map[int]int) // entry -> index in path
	for i := len(entries) - 1; i >= 0; {
		if k, seen := at[i]; seen {
			// A parentId cycle (a damaged file): cut it at its earliest
			// entry, taken as a root, as every walk in db does.
			m := k
			for j := k; j < len(path); j++ {
				if path[j] < path[m] {
					m = j
				}
			}
			path = path[:m+1]
			break
		}
		at[i] = len(path)
		path = append(path, i)
		p, ok := byID[entries[i].ParentID]
		if entries[i].ParentID == "" || !ok || p == i {
			break
		}
		i = p
	}
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	return path
}

// closesCycle reports whether an entry is a user turn that closes a
// thinking cycle: a message or custom_message with non-tool-result content
// (the watcher's UserText), or a branch summary (sent as user text).
//
// A role "system" message (pi 1.6 persists them) does not: the provider's
// documents define the cycle by user content alone (a non-tool_result user
// block starts a new assistant loop) and leave a system message's effect
// undocumented; they place system messages after a tool_result, inside a
// tool loop, where closing the cycle would drop the thinking the loop must
// carry. So a system message is in the branch and in the prefix, and a
// cycle runs across it.
func closesCycle(e *watcher.Entry) bool {
	return e.UserText || e.Type == "branch_summary"
}

func isAssistant(e *watcher.Entry) bool {
	return e.Type == "message" && e.Role == "assistant"
}

// estimateTokens is pi's estimate: a token per four characters.
func estimateTokens(chars int) int64 { return int64((chars + 3) / 4) }

// Analyze computes one session's report from its entries and compile
// events. It reads only its input. It is the walk an Aggregate keeps
// (aggregate.go) over the whole branch, keeping every request.
func Analyze(in SessionInput, prices *Prices) Session {
	w := newWalker(&Aggregate{}, prices, true)
	for _, idx := range Branch(in.Entries) {
		w.step(&in.Entries[idx])
	}
	for i := range in.Entries {
		if isAssistant(&in.Entries[i]) {
			w.a.Sums.Figures.Requests.OffBranch++
		}
	}
	return finish(w.a, in.Session, in.Compiles, w.full)
}

// reqCtx is what the break rule needs to know of a request beyond its row:
// what happened on the branch since the request before it.
type reqCtx struct {
	warmed     string // time of the last cache warm before it, "" when none
	compaction bool   // a compaction or branch summary since the request before
	model      bool   // a model or thinking-level change since the request before
}

func costOf(e *watcher.Entry) *watcher.Cost {
	if e.Usage == nil {
		return nil
	}
	return e.Usage.Cost
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func request(e *watcher.Entry, prices *Prices) Request {
	r := Request{
		EntryID: e.ID, Line: e.Line, Timestamp: e.Timestamp, Model: e.Model, StopReason: e.StopReason,
		Apart: e.StopReason == "error" || e.StopReason == "aborted",
	}
	if u := e.Usage; u != nil {
		r.Input, r.Output, r.CacheRead, r.CacheWrite = val(u.Input), val(u.Output), val(u.CacheRead), val(u.CacheWrite)
		r.CacheWrite1h, r.Reasoning = val(u.CacheWrite1h), val(u.Reasoning)
		r.UsageKnown = u.Input != nil && u.CacheRead != nil && u.CacheWrite != nil
	}
	r.Prompt = r.Input + r.CacheRead + r.CacheWrite
	var s Spend
	addSpend(&s, e, prices)
	switch {
	case s.FromPi == 1:
		r.Cost, r.CostSource = usd(s.Total), "pi"
		if s.Unsplit != 0 {
			r.CostSource = "pi-total"
		}
	case s.FromTable == 1:
		r.Cost, r.CostSource = usd(s.Total), "table"
	}
	return r
}

// addSpend prices one reply, preferring what pi wrote:
//  1. usage.cost with its input, output, cacheRead and cacheWrite parts;
//  2. usage.cost.total alone (older files, or an index that kept only the
//     total): the total is pi's; it is split in proportion to the price
//     table's prices when the table has the model, else kept as Unsplit;
//  3. the price table, when the usage has all four token counts;
//  4. else the reply is unpriced and its model named.
func addSpend(s *Spend, e *watcher.Entry, prices *Prices) {
	u := e.Usage
	if u == nil {
		unpriced(s, e.Model)
		return
	}
	if c := u.Cost; c != nil && c.Input != nil && c.Output != nil && c.CacheRead != nil && c.CacheWrite != nil {
		s.Input += *c.Input
		s.Output += *c.Output
		s.CacheRead += *c.CacheRead
		s.CacheWrite += *c.CacheWrite
		s.Total += *c.Input + *c.Output + *c.CacheRead + *c.CacheWrite
		s.FromPi++
		return
	}
	parts, priced := tableParts(u, e.Model, prices)
	if c := u.Cost; c != nil && c.Total != nil {
		s.Total += *c.Total
		s.FromPi++
		if sum := parts[0] + parts[1] + parts[2] + parts[3]; priced && sum > 0 {
			k := *c.Total / sum
			s.Input += parts[0] * k
			s.Output += parts[1] * k
			s.CacheRead += parts[2] * k
			s.CacheWrite += parts[3] * k
		} else {
			s.Unsplit += *c.Total
		}
		return
	}
	if priced {
		s.Input += parts[0]
		s.Output += parts[1]
		s.CacheRead += parts[2]
		s.CacheWrite += parts[3]
		s.Total += parts[0] + parts[1] + parts[2] + parts[3]
		s.FromTable++
		return
	}
	unpriced(s, e.Model)
}

// tableParts prices a usage from the table: input, output, cache read,
// cache write in USD. ok is false unless all four counts are present and
// the table prices every kind the usage used.
func tableParts(u *watcher.Usage, model string, prices *Prices) (parts [4]float64, ok bool) {
	if u.Input == nil || u.Output == nil || u.CacheRead == nil || u.CacheWrite == nil {
		return parts, false
	}
	p, found := prices.Lookup(model)
	if !found {
		return parts, false
	}
	var oks [4]bool
	parts[0], oks[0] = perToken(p.Input, *u.Input)
	parts[1], oks[1] = perToken(p.Output, *u.Output)
	parts[2], oks[2] = perToken(p.CacheRead, *u.CacheRead)
	long := min(val(u.CacheWrite1h), *u.CacheWrite)
	w5, ok5 := perToken(p.CacheWrite, *u.CacheWrite-long)
	w1, ok1 := perToken(p.Write1hPrice(), long)
	parts[3], oks[3] = w5+w1, ok5 && ok1
	return parts, oks[0] && oks[1] && oks[2] && oks[3]
}

func unpriced(s *Spend, model string) {
	s.Unpriced++
	if model == "" {
		model = "(no model)"
	}
	s.UnpricedModels = mergeNames(s.UnpricedModels, []string{model})
}

// perToken prices n tokens at perMillion; zero tokens need no price.
func perToken(perMillion *float64, n int64) (float64, bool) {
	if n == 0 {
		return 0, true
	}
	if perMillion == nil {
		return 0, false
	}
	return *perMillion * float64(n) / 1e6, true
}

// CacheLifetime is how long what a request wrote stays in the cache
// unread: 5 minutes, or 1 hour when its usage shows 1-hour writes
// (research/preserved-thinking.md section 5, "TTL").
func CacheLifetime(r *Request) time.Duration {
	if r.CacheWrite1h > 0 {
		return time.Hour
	}
	return IdleGap
}

// cachePrices returns the write and read price per million tokens for a
// request: from its own usage.cost where pi wrote it (write = cost /
// tokens; a read price not derivable that way follows from the write
// price and the model's documented multipliers), else from the table.
func cachePrices(r *Request, cost *watcher.Cost, prices *Prices) (write, read float64, ok bool) {
	key := ModelKey(r.Model)
	mult, hasMult := readMultiplier(key)
	if cost != nil && cost.CacheWrite != nil && r.CacheWrite > 0 {
		write = *cost.CacheWrite / float64(r.CacheWrite) * 1e6
		switch {
		case cost.CacheRead != nil && r.CacheRead > 0:
			read = *cost.CacheRead / float64(r.CacheRead) * 1e6
		case hasMult:
			read = write / writeMultiplier5m * mult
		default:
			return 0, 0, false
		}
		return write, read, true
	}
	if p, found := prices.Lookup(r.Model); found && p.CacheWrite != nil && p.CacheRead != nil {
		w := *p.CacheWrite
		if long := min(r.CacheWrite1h, r.CacheWrite); long > 0 {
			// The request's own mix of 5-minute and 1-hour writes.
			w1 := p.Write1hPrice()
			if w1 == nil {
				return 0, 0, false
			}
			w = (w*float64(r.CacheWrite-long) + *w1*float64(long)) / float64(r.CacheWrite)
		}
		return w, *p.CacheRead, true
	}
	return 0, 0, false
}

func gap(a, b string) time.Duration {
	ta, err1 := time.Parse(time.RFC3339Nano, a)
	tb, err2 := time.Parse(time.RFC3339Nano, b)
	if err1 != nil || err2 != nil {
		return 0
	}
	return tb.Sub(ta)
}

// sortBreaks orders breaks costliest first (unpriced by tokens after the
// priced), then by session and request for stability.
func sortBreaks(bs []Break) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		if (a.Cost != nil) != (b.Cost != nil) {
			return a.Cost != nil
		}
		if a.Cost != nil && *a.Cost != *b.Cost {
			return *a.Cost > *b.Cost
		}
		if a.Rewritten != b.Rewritten {
			return a.Rewritten > b.Rewritten
		}
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		return a.Request < b.Request
	})
}

// Kinds of spend for a day's column.
type dayKind int

const (
	dayByKind dayKind = iota // a completed request: input, output, cache write and read
	dayErrors                // an errored or aborted reply
	dayOther                 // a cache warm or other usage entry
)

// dayOf is the UTC day of a timestamp, "" when it does not parse.
func dayOf(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ""
	}
	return t.UTC().Format("2006-01-02")
}

// addDay adds an entry's spend (as addSpend prices it) to its day.
func addDay(days map[string]Day, e *watcher.Entry, prices *Prices, kind dayKind) {
	k := dayOf(e.Timestamp)
	if k == "" {
		k = "unknown"
	}
	var s Spend
	addSpend(&s, e, prices)
	if s.Total == 0 {
		return
	}
	d := days[k]
	switch kind {
	case dayErrors:
		d.Errors += s.Total
	case dayOther:
		d.Other += s.Total
	default:
		d.Input += s.Input
		d.Output += s.Output
		d.CacheWrite += s.CacheWrite
		d.CacheRead += s.CacheRead
		d.Unsplit += s.Unsplit
	}
	days[k] = d
}
