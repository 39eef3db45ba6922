package report

import (
	"fmt"
	"math"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/watcher"
)

// What-if replay (README, "bindery whatif"): a session's branch replayed
// under thinking policies.
//
// Each request is rebuilt as pi sent it: its prompt is the one pi's usage
// recorded (input + cacheRead + cacheWrite, real tokens), with pi's cache
// breakpoints (system, last tool, last message: what a request writes
// ends where its last message ends, and the tokens after the last
// breakpoint, usage.input, are the same under every policy). A policy
// changes which thinking blocks each request carries, and the billing
// rules decide which of those the model reads and bills: the prompt is
// the recorded one minus the thinking billed as recorded but not under
// the policy. Each block sits where the message that carried it began:
// the prompt of the request that produced it.
//
// The prompt-cache model: a request reads back the prefix the previous
// request left cached (its read + write) when no more than the cache
// lifetime passed (5 minutes, 1 hour after 1-hour writes, a pi cache warm
// renewing it); more than that and it reads nothing. A policy that
// changes a block inside that prefix cuts the read at the block, and the
// read then finds only an entry an earlier request wrote at or before the
// change, within the provider's 20-position lookback and alive: far back
// in a conversation that is none, so the request rewrites from the
// start, as the seed measured (turn 17 of its A/B rewrote 63,113 tokens
// at 0% reuse). What no policy controls is taken as recorded: a request
// that recorded a cache loss with a cause other than idle (a compaction,
// a model or thinking change, bindery's or the host's change, or no known
// cause) keeps the read it recorded, under every policy. Idle expiry is
// not taken from the recording: the model predicts it, and the
// calibration checks that prediction.
//
// Output tokens are as recorded under every policy (a model that loses
// its reasoning may think more: the seed's caveat; not modelled).

// replayBlock is one thinking block of the branch.
type replayBlock struct {
	tokens int64
	cycle  int   // cycle it was produced in
	turn   int   // completed assistant turn that produced it (1-based)
	pos    int64 // where its message begins in the prompt (tokens)
	// pos, changed and gone are its state at the point of the walk;
	// each request keeps its own copy (held). changed is true once the
	// session file shows the content before it changed (turns kept
	// across a compaction, a context edit before it): a prefix-checking
	// model refuses or drops it from then on.
	changed bool
	gone    bool // compacted away or edited out: no request carries it
}

// held is a block as one request held it: the block's state changes
// along the branch (a compaction moves it and changes its prefix).
type held struct {
	i       int   // index into replaySession.blocks
	pos     int64 // where it sits in this request's prompt
	changed bool  // its prefix changed before this request
}

// replayReq is one request with usage.
type replayReq struct {
	n                         int
	t                         time.Time
	model                     string
	regime                    Regime
	binds                     bool
	in, out, read, write, w1h int64
	cost                      *watcher.Cost
	cycle, turns              int       // its cycle; completed turns before it
	msgs                      int       // messages on the branch before it (lookback positions)
	renewed                   time.Time // last cache warm since the request before, zero when none
	blocks                    []held    // the blocks resident in its prompt, as they stood then
	recordedLoss              bool      // a recorded break with a cause other than idle (by line)
	survive                   int64     // what of the cache survives to it, in recorded positions (survival)
	gapOK                     bool      // both timestamps parse
}

func (q *replayReq) prompt() int64   { return q.in + q.read + q.write }
func (q *replayReq) boundary() int64 { return q.read + q.write }

// replaySession is a session's branch as the replay needs it.
type replaySession struct {
	model  string
	blocks []replayBlock
	reqs   []replayReq
}

// policy says whether a request sends a resident block.
type policy struct {
	name string
	send func(q *replayReq, b *replayBlock) bool
}

func policies(keep int) []policy {
	return []policy{
		{api.PolicyRecorded, func(q *replayReq, b *replayBlock) bool { return true }},
		{api.PolicyBindery, func(q *replayReq, b *replayBlock) bool { return !(b.changed && q.binds) }},
		{api.PolicyStripAll, func(q *replayReq, b *replayBlock) bool { return b.cycle == q.cycle }},
		{fmt.Sprintf("%s-%d", api.PolicyKeepLast, keep), func(q *replayReq, b *replayBlock) bool { return b.turn > q.turns-keep }},
	}
}

// readSet applies the billing rules to what a request sends, marking in
// read (indexed by block) each block the request holds
// (research/preserved-thinking.md sections 1.2 and 4, and the seed's
// closed/open-cycle rule): a last-turn-only model reads no closed-cycle
// thinking, and of the open cycle only the unbroken run from the cycle's
// first thinking block (after a gap, none); a prefix-checking model reads
// the first unbroken run of the blocks sent (removing from the start or
// the end is allowed, a gap drops every block after it) and drops blocks
// whose prefix changed; any other model reads what is sent.
func readSet(q *replayReq, blocks []replayBlock, sent func(*replayBlock) bool, read []bool) {
	for _, h := range q.blocks {
		read[h.i] = false
	}
	switch {
	case q.regime == LastTurnOnly:
		run := true
		for _, h := range q.blocks {
			i, b := h.i, &blocks[h.i]
			if b.cycle != q.cycle {
				continue
			}
			if !sent(b) {
				run = false
				continue
			}
			if run {
				read[i] = true
			}
		}
	case q.binds:
		started, broken := false, false
		for _, h := range q.blocks {
			i, b := h.i, &blocks[h.i]
			ok := sent(b) && !h.changed
			switch {
			case ok && !broken:
				read[i], started = true, true
			case !ok && started:
				broken = true
			}
		}
	default:
		for _, h := range q.blocks {
			if sent(&blocks[h.i]) {
				read[h.i] = true
			}
		}
	}
}

// buildReplay walks the branch once.
func buildReplay(in SessionInput, losses map[int]bool) replaySession {
	var s replaySession
	path := Branch(in.Entries)
	models := binding.DefaultModelTable()
	cycle, turns, msgs := 0, 0, 0
	byEntry := map[string][]int{} // entry id -> its blocks
	posOf := map[string]int{}
	var lastPrompt int64
	var warm time.Time
	var compacted bool // a compaction since the last request
	var cur []held     // the blocks the next request holds (shared, see below)
	built := 0         // blocks of s.blocks already in cur
	stale := false     // a compaction or context edit changed blocks in cur
	var prevReq *replayReq
	for pos, idx := range path {
		e := &in.Entries[idx]
		if e.ID != "" {
			posOf[e.ID] = pos
		}
		switch {
		case closesCycle(e):
			cycle++
			msgs++
		case e.Type == "compaction":
			keep, ok := posOf[e.FirstKeptEntryID]
			if !ok {
				keep = pos
			}
			for id, bs := range byEntry {
				p, ok := posOf[id]
				for _, i := range bs {
					if !ok || p < keep {
						s.blocks[i].gone = true
					} else {
						s.blocks[i].changed = true // kept behind a summary: its prefix changed
					}
				}
			}
			compacted, stale = true, true
		case e.Type == "context_edit" && e.TargetID != "":
			tpos, ok := posOf[e.TargetID]
			if !ok {
				break
			}
			stale = true
			for _, i := range byEntry[e.TargetID] {
				s.blocks[i].gone = true
			}
			for id, bs := range byEntry {
				if p, ok := posOf[id]; ok && p > tpos {
					for _, i := range bs {
						s.blocks[i].changed = true
					}
				}
			}
		case e.Type == "usage" && e.UsageKind == "cache_warm":
			if t, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
				warm = t
			}
		case e.Type == "message" && e.Role != "assistant":
			msgs++
		case isAssistant(e):
			msgs++
			u := e.Usage
			apart := e.StopReason == "error" || e.StopReason == "aborted"
			if u != nil && u.Input != nil && u.CacheRead != nil && u.CacheWrite != nil && val(u.Input)+val(u.CacheRead)+val(u.CacheWrite) > 0 {
				q := replayReq{n: len(s.reqs) + 1, model: e.Model, regime: RegimeOf(e.Model), binds: models.Binds(e.Model),
					in: val(u.Input), out: val(u.Output), read: val(u.CacheRead), write: val(u.CacheWrite), w1h: val(u.CacheWrite1h),
					cost: u.Cost, cycle: cycle, turns: turns, msgs: msgs, recordedLoss: losses[e.Line]}
				t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
				q.t, q.gapOK = t, err == nil
				if prevReq != nil && warm.After(prevReq.t) {
					q.renewed = warm
				}
				if compacted {
					// Kept blocks now sit just after the summary: where
					// this request's cache read ended (an approximation).
					for i := range s.blocks {
						if b := &s.blocks[i]; b.changed && !b.gone {
							b.pos = min(b.pos, q.read)
						}
					}
					compacted = false
				}
				// Between compactions and context edits the blocks a
				// request holds only grow: requests share one list,
				// each seeing its own length of it, so memory stays
				// linear in requests and blocks.
				if stale {
					cur, built, stale = nil, 0, false
					for i := range s.blocks {
						if b := &s.blocks[i]; !b.gone {
							cur = append(cur, held{i: i, pos: b.pos, changed: b.changed})
						}
					}
					built = len(s.blocks)
				}
				for ; built < len(s.blocks); built++ {
					if b := &s.blocks[built]; !b.gone {
						cur = append(cur, held{i: built, pos: b.pos, changed: b.changed})
					}
				}
				q.blocks = cur[:len(cur):len(cur)]
				s.reqs = append(s.reqs, q)
				prevReq = &s.reqs[len(s.reqs)-1]
				lastPrompt = q.prompt()
				if e.Model != "" {
					s.model = e.Model
				}
			}
			if apart {
				break
			}
			turns++
			for _, b := range e.Thinking {
				byEntry[e.ID] = append(byEntry[e.ID], len(s.blocks))
				s.blocks = append(s.blocks, replayBlock{tokens: estimateTokens(b.Chars), cycle: cycle, turn: turns, pos: lastPrompt})
			}
		}
	}
	return s
}

// Replay replays a session under the policies (keep is keep-last's N).
func Replay(in SessionInput, prices *Prices, keep int) WhatIfSession {
	if keep <= 0 {
		keep = api.DefaultKeepLast
	}
	// The recorded losses no policy controls: the report's own breaks,
	// every cause but idle (which the replay predicts).
	losses := map[int]bool{}
	for _, b := range Analyze(in, prices).Summary.Breaks {
		if b.Cause != CauseIdle {
			losses[b.Line] = true
		}
	}
	s := buildReplay(in, losses)
	out := WhatIfSession{Session: in.Session, Model: s.model, Requests: len(s.reqs)}
	rates := sessionRates(s.reqs, prices)
	out.Calibration.Expired, out.Calibration.AsRecorded = s.survival()
	for _, p := range policies(keep) {
		out.Policies = append(out.Policies, s.run(p, rates))
	}
	rec := out.Policies[0]
	c := &out.Calibration
	for _, q := range s.reqs {
		c.RecordedRead += q.read
		c.RecordedWrite += q.write
	}
	c.ReplayedRead, c.ReplayedWrite = rec.CacheRead, rec.CacheWrite
	c.ReadError, c.WriteError = relErr(c.ReplayedRead, c.RecordedRead), relErr(c.ReplayedWrite, c.RecordedWrite)
	c.OK = c.ReadError <= api.CalibrationTolerance && c.WriteError <= api.CalibrationTolerance
	if !c.OK {
		c.Reason = fmt.Sprintf("the as-recorded replay is off by %.1f%% in cache read and %.1f%% in cache write (tolerance %.0f%%): not priced",
			100*c.ReadError, 100*c.WriteError, 100*api.CalibrationTolerance)
	}
	for i := range out.Policies {
		p := &out.Policies[i]
		if !c.OK {
			p.Spend = nil
		}
		p.Delta = delta(*p, rec)
	}
	return out
}

func relErr(got, want int64) float64 {
	if want == 0 {
		if got == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(float64(got-want)) / float64(want)
}

func delta(p, rec PolicyResult) api.PolicyDelta {
	d := api.PolicyDelta{CacheRead: p.CacheRead - rec.CacheRead, CacheWrite: p.CacheWrite - rec.CacheWrite, ThinkingRead: p.ThinkingRead - rec.ThinkingRead}
	if p.Spend != nil && rec.Spend != nil {
		d.Spend = usd(*p.Spend - *rec.Spend)
	}
	return d
}

// entry is a cache entry a replayed request wrote: its end and when it was
// last read or written.
type entry struct {
	end  int64
	msgs int
	at   time.Time
}

// lookback is how many positions a cache read walks back from a
// breakpoint for an entry a prior request wrote (prompt-caching docs).
const lookback = 20

func (s *replaySession) run(p policy, rates map[string]rate) PolicyResult {
	res := PolicyResult{Policy: p.name}
	// read, prevRead and recRead are indexed by block: what this request's
	// model reads under the policy, what the previous request's did, and
	// what this one's read as recorded. A request sets them for every
	// block it holds, and a block once gone is never held again.
	read, prevRead, recRead := make([]bool, len(s.blocks)), make([]bool, len(s.blocks)), make([]bool, len(s.blocks))
	all := func(*replayBlock) bool { return true }
	type delta1 struct{ pos, tokens int64 }
	var deltas []delta1 // the blocks whose tokens differ from the recording
	var prev *replayReq
	var prevReadTok, prevWrite int64
	var entries []entry
	priced := true
	var spend float64
	for k := range s.reqs {
		q := &s.reqs[k]
		readSet(q, s.blocks, func(b *replayBlock) bool { return p.send(q, b) }, read)
		readSet(q, s.blocks, all, recRead)
		// The prompt: recorded, minus what the recording billed and this
		// policy does not, plus the converse.
		deltas = deltas[:0]
		for _, h := range q.blocks {
			if recRead[h.i] && !read[h.i] {
				deltas = append(deltas, delta1{h.pos, s.blocks[h.i].tokens})
			} else if read[h.i] && !recRead[h.i] {
				deltas = append(deltas, delta1{h.pos, -s.blocks[h.i].tokens})
			}
		}
		shift := func(x int64) int64 { // tokens this policy removes before position x
			var d int64
			for _, dl := range deltas {
				if dl.pos < x {
					d += dl.tokens
				}
			}
			return d
		}
		boundary := max(0, q.boundary()-shift(math.MaxInt64))
		for _, h := range q.blocks {
			if read[h.i] {
				res.ThinkingRead++
				res.ThinkingTokens += s.blocks[h.i].tokens
			}
		}
		// What survives of the cache, in recorded positions (the same
		// under every policy: survival), then in this policy's.
		survive := q.survive
		readTok := max(0, survive-shift(survive))
		if prev != nil {
			// The first block whose place in the cached prefix changed.
			cut := int64(math.MaxInt64)
			for _, h := range q.blocks {
				i, b := h.i, &s.blocks[h.i]
				if prevRead[i] == read[i] || h.pos >= survive {
					continue
				}
				if q.regime == LastTurnOnly && prevRead[i] && b.cycle != q.cycle && b.cycle == prev.cycle {
					continue // the model drops a just-closed cycle's thinking itself, under every policy
				}
				cut = min(cut, h.pos)
			}
			if cut < survive {
				// Entries that end past the change no longer match any
				// later prompt either: a policy never puts back what it
				// removed.
				cutP := cut - shift(cut)
				kept := entries[:0]
				for _, en := range entries {
					if en.end <= cutP {
						kept = append(kept, en)
					}
				}
				entries = kept
				readTok = 0
				for _, en := range entries {
					if q.msgs-en.msgs <= lookback && (!q.gapOK || q.t.Sub(en.at) <= lifetime(prev)) {
						readTok = max(readTok, en.end)
					}
				}
			}
		}
		readTok = min(readTok, boundary)
		write := boundary - readTok
		if prev != nil && readTok < min(prevReadTok+prevWrite, boundary+q.in) {
			res.Breaks++
		}
		res.Input += q.in
		res.Output += q.out
		res.CacheRead += readTok
		res.CacheWrite += write
		if r, ok := rates[q.model]; ok && r.ok {
			spend += r.in*float64(q.in) + r.out*float64(q.out) + r.write*float64(write) + r.read*float64(readTok)
		} else {
			priced = false
		}
		entries = append(entries, entry{end: boundary, msgs: q.msgs, at: q.t})
		if len(entries) > 4*lookback {
			entries = entries[len(entries)-2*lookback:]
		}
		prev, prevReadTok, prevWrite = q, readTok, write
		read, prevRead = prevRead, read
	}
	if priced {
		res.Spend = usd(spend)
	}
	return res
}

// survival decides, for every request, what of the cache survives to it
// in recorded positions, the same under every policy: the first request
// reads what it recorded (a prefix another session cached); after more
// than the cache lifetime nothing survives (predicted: expired counts
// them); a recorded loss with a cause no policy controls is taken as
// recorded (asRecorded counts them); else what the request before left,
// as far as this request's own prompt reaches.
func (s *replaySession) survival() (expired, asRecorded int) {
	for k := range s.reqs {
		q := &s.reqs[k]
		if k == 0 {
			q.survive = q.read
			continue
		}
		prev := &s.reqs[k-1]
		switch {
		case q.gapOK && prev.gapOK && q.t.Sub(lastUse(prev, q)) > lifetime(prev):
			q.survive = 0
			expired++
		case q.recordedLoss:
			q.survive = q.read
			asRecorded++
		default:
			q.survive = min(prev.boundary(), q.boundary())
		}
	}
	return expired, asRecorded
}

// lastUse is when the cache the request before q left was last used: that
// request's start, or a pi cache warm after it.
func lastUse(prev, q *replayReq) time.Time {
	if q.renewed.After(prev.t) {
		return q.renewed
	}
	return prev.t
}

// lifetime is the cache lifetime of what a request wrote.
func lifetime(q *replayReq) time.Duration {
	if q.w1h > 0 {
		return time.Hour
	}
	return IdleGap
}

// rate is a model's price per token in USD.
type rate struct {
	in, out, write, read float64
	ok                   bool
}

// sessionRates prices each model of the session: from the price table
// when it has the model, else from what pi's usage.cost charged per token
// across the session's requests (a kind the session never used gets the
// documented multiple of the input price).
func sessionRates(reqs []replayReq, prices *Prices) map[string]rate {
	type sums struct{ cin, cout, cw, cr, tin, tout, tw, tr float64 }
	by := map[string]*sums{}
	for i := range reqs {
		q := &reqs[i]
		c := q.cost
		if c == nil || c.Input == nil || c.Output == nil || c.CacheRead == nil || c.CacheWrite == nil {
			continue
		}
		s := by[q.model]
		if s == nil {
			s = &sums{}
			by[q.model] = s
		}
		s.cin += *c.Input
		s.cout += *c.Output
		s.cw += *c.CacheWrite
		s.cr += *c.CacheRead
		s.tin += float64(q.in)
		s.tout += float64(q.out)
		s.tw += float64(q.write)
		s.tr += float64(q.read)
	}
	out := map[string]rate{}
	for i := range reqs {
		m := reqs[i].model
		if _, done := out[m]; done {
			continue
		}
		if p, ok := prices.Lookup(m); ok && p.Input != nil && p.Output != nil && p.CacheWrite != nil && p.CacheRead != nil {
			out[m] = rate{in: *p.Input / 1e6, out: *p.Output / 1e6, write: *p.CacheWrite / 1e6, read: *p.CacheRead / 1e6, ok: true}
			continue
		}
		s := by[m]
		if s == nil || s.tin == 0 || s.tout == 0 {
			out[m] = rate{}
			continue
		}
		r := rate{in: s.cin / s.tin, out: s.cout / s.tout, ok: true}
		mult, hasMult := readMultiplier(ModelKey(m))
		switch {
		case s.tw > 0:
			r.write = s.cw / s.tw
		default:
			r.write = r.in * writeMultiplier5m
		}
		switch {
		case s.tr > 0:
			r.read = s.cr / s.tr
		case hasMult:
			r.read = r.in * mult
		default:
			r.ok = false
		}
		out[m] = r
	}
	return out
}

// SumWhatIf orders a replay's sessions by their as-recorded spend
// (unpriced last) and sums the calibrated ones per policy into Archive.
func SumWhatIf(w *WhatIf) {
	if len(w.Sessions) > 0 {
		for _, p := range w.Sessions[0].Policies {
			w.Policies = append(w.Policies, p.Policy)
		}
	}
	spendOf := func(s WhatIfSession) float64 {
		if len(s.Policies) == 0 || s.Policies[0].Spend == nil {
			return -1
		}
		return *s.Policies[0].Spend
	}
	sortSlice(w.Sessions, func(a, b WhatIfSession) bool {
		if x, y := spendOf(a), spendOf(b); x != y {
			return x > y
		}
		return a.Session < b.Session
	})
	w.Archive = make([]PolicyResult, len(w.Policies))
	for i, name := range w.Policies {
		w.Archive[i] = PolicyResult{Policy: name, Spend: usd(0)}
	}
	w.Calibrated, w.Uncalibrated = 0, 0
	for _, s := range w.Sessions {
		if !s.Calibration.OK || len(s.Policies) != len(w.Policies) {
			w.Uncalibrated++
			continue
		}
		w.Calibrated++
		for i, p := range s.Policies {
			a := &w.Archive[i]
			a.Input += p.Input
			a.Output += p.Output
			a.CacheRead += p.CacheRead
			a.CacheWrite += p.CacheWrite
			a.ThinkingRead += p.ThinkingRead
			a.ThinkingTokens += p.ThinkingTokens
			a.Breaks += p.Breaks
			if a.Spend != nil && p.Spend != nil {
				*a.Spend += *p.Spend
			} else {
				a.Spend = nil
			}
		}
	}
	for i := range w.Archive {
		if w.Calibrated == 0 {
			w.Archive[i].Spend = nil // nothing calibrated: nothing priced
		}
		w.Archive[i].Delta = delta(w.Archive[i], w.Archive[0])
	}
	if w.Sessions == nil {
		w.Sessions = []WhatIfSession{}
	}
}
