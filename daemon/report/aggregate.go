package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/watcher"
)

// AggregateVersion changes whenever what an Aggregate holds or how a walk
// step changes it does: aggregates of another version are rebuilt from
// the entries. It is apart from FormatVersion on purpose: a change of the
// summary's format that leaves the walk alone keeps every aggregate, so
// the first report after it still reads aggregates, not every line.
// Anything that changes walker.step, finish or the types below bumps it.
const AggregateVersion = 1

// Aggregate is a session's report so far, as a walk along its branch left
// it: Analyze's figures without bindery's compiles (which come and go in
// the event log apart from the session file) and the state the next entry
// needs. It is kept current as entries are appended (Extend) inside the
// ingest transaction, so a report reads one aggregate per session instead
// of every entry. Sums is what a report reads; Walk what extending needs.
type Aggregate struct {
	Sums Sums
	Walk Walk
}

// Sums is the report-facing part of an Aggregate.
type Sums struct {
	Version int `json:"version"` // AggregateVersion
	// Prices is the fingerprint of the price table the walk consulted ("":
	// none was, and the figures hold under any table).
	Prices string `json:"prices,omitempty"`
	Model  string `json:"model,omitempty"`
	First  string `json:"first,omitempty"`
	Last   string `json:"last,omitempty"`
	// Figures holds everything that does not depend on compile events;
	// Cycles only the closed cycles (the open one is OpenTurns, Open).
	Figures   Figures `json:"figures"`
	OpenTurns int     `json:"openTurns"`
	Open      Volume  `json:"open"`
	// Breaks are stored apart (Encode).
	Breaks []PendingBreak `json:"-"`
}

// PendingBreak is a break whose Cause is what holds without bindery's
// compiles (compaction, model, idle or unknown): finish lets a compile
// that answered the request turn all but a compaction into strip or host.
type PendingBreak struct {
	Break
	// Parent is the request's parentId when compiles naming it as their
	// branch answer this request (the first reply built on it), else "".
	Parent string `json:"parent,omitempty"`
}

// Walk is the state of the walk along the branch after its last entry.
type Walk struct {
	// Path holds the ids of the branch's entries, root first, each ended
	// by a newline ("" for an entry without one; a backslash or newline in
	// an id escaped): a position is a line number. One string, not a list,
	// so that extending a long session decodes it at a memcpy's cost and
	// splits it only for a compaction or context edit. Len counts its
	// lines, Leaf is the last id.
	Path string `json:"-"`
	Len  int    `json:"len"`
	Leaf string `json:"leaf,omitempty"`
	// Tree: some entry on the branch has a parentId (else, pi v1, the
	// branch is every entry in file order).
	Tree bool `json:"tree,omitempty"`
	// RootParent is the root's parentId (not in the file, or a cycle's
	// entry); RootAssistant says the root is an assistant reply with an id.
	RootParent    string `json:"rootParent,omitempty"`
	RootAssistant bool   `json:"rootAssistant,omitempty"`

	Cycle int `json:"cycle"`
	// Residents: the assistant turns whose thinking is still in the
	// prompts, one "pos cycle tokens id" line each (id escaped as in
	// Path), parsed only when a compaction or context edit changes them.
	Residents string `json:"-"`
	ClosedRes int64  `json:"closedRes,omitempty"`
	OpenRes   int64  `json:"openRes,omitempty"`
	Window    int    `json:"window,omitempty"`
	LastWarm  string `json:"lastWarm,omitempty"`
	// SinceCompaction/SinceModel: such an entry since the last request;
	// BreakCompaction/BreakModel: since the last request the break rule
	// compared (Prev).
	SinceCompaction bool         `json:"sinceCompaction,omitempty"`
	SinceModel      bool         `json:"sinceModel,omitempty"`
	BreakCompaction bool         `json:"breakCompaction,omitempty"`
	BreakModel      bool         `json:"breakModel,omitempty"`
	Prev            *PrevRequest `json:"prev,omitempty"`
}

// Resident is an assistant turn's thinking still in the prompts.
type Resident struct {
	Pos    int    `json:"pos"`
	ID     string `json:"id"`
	Cycle  int    `json:"cycle"`
	Tokens int64  `json:"tokens"`
}

// PrevRequest is what the break rule keeps of the last request it compared.
type PrevRequest struct {
	CacheRead    int64  `json:"cacheRead"`
	CacheWrite   int64  `json:"cacheWrite"`
	CacheWrite1h int64  `json:"cacheWrite1h,omitempty"`
	Timestamp    string `json:"timestamp,omitempty"`
	Model        string `json:"model,omitempty"`
}

// Encode is the stored form: the sums a report reads, the walk only
// extending reads (apart, so a report does not load every branch's ids),
// and the breaks in a.Sums.Breaks, one each: stored as rows of their own,
// so extending a session appends its new breaks without decoding or
// rewriting the earlier ones (an aggregate decoded without its breaks
// holds only those it found since).
func (a *Aggregate) Encode() (sums, walk []byte, breaks [][]byte, err error) {
	if sums, err = json.Marshal(a.Sums); err != nil {
		return nil, nil, nil, fmt.Errorf("encode report aggregate: %w", err)
	}
	// The walk: its scalars as JSON (one line: json.Marshal writes no
	// newline), then Path's length, then Path and Residents verbatim, so
	// reading them back is a copy, not a decode of thousands of ids.
	head, err := json.Marshal(a.Walk)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode report aggregate: %w", err)
	}
	walk = make([]byte, 0, len(head)+24+len(a.Walk.Path)+len(a.Walk.Residents))
	walk = append(append(walk, head...), '\n')
	walk = append(strconv.AppendInt(walk, int64(len(a.Walk.Path)), 10), '\n')
	walk = append(append(walk, a.Walk.Path...), a.Walk.Residents...)
	for i := range a.Sums.Breaks {
		b, err := json.Marshal(&a.Sums.Breaks[i])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("encode report aggregate: %w", err)
		}
		breaks = append(breaks, b)
	}
	return sums, walk, breaks, nil
}

// DecodeAggregate reads an Encode'd aggregate with the breaks given (all
// of them, in order, for Summary; none for Extend); walk nil leaves Walk
// empty (enough for Summary, not for Extend).
func DecodeAggregate(sums, walk []byte, breaks [][]byte) (*Aggregate, error) {
	a := &Aggregate{}
	if err := json.Unmarshal(sums, &a.Sums); err != nil {
		return nil, fmt.Errorf("decode report aggregate: %w", err)
	}
	if walk != nil {
		i := bytes.IndexByte(walk, '\n')
		if i < 0 {
			return nil, fmt.Errorf("decode report aggregate: the walk has no head")
		}
		if err := json.Unmarshal(walk[:i], &a.Walk); err != nil {
			return nil, fmt.Errorf("decode report aggregate: %w", err)
		}
		rest := walk[i+1:]
		j := bytes.IndexByte(rest, '\n')
		n, err := strconv.Atoi(string(rest[:max(j, 0)]))
		if j < 0 || err != nil || n < 0 || n > len(rest)-j-1 {
			return nil, fmt.Errorf("decode report aggregate: a damaged walk")
		}
		rest = rest[j+1:]
		a.Walk.Path, a.Walk.Residents = string(rest[:n]), string(rest[n:])
	}
	a.Sums.Breaks = make([]PendingBreak, len(breaks))
	for i, b := range breaks {
		if err := decodeBreak(b, &a.Sums.Breaks[i]); err != nil {
			return nil, fmt.Errorf("decode report aggregate: break %d: %w", i, err)
		}
	}
	return a, nil
}

// BuildAggregate walks a file's entries (all of them, in file order) as
// Analyze does, keeping only what the archive report needs.
func BuildAggregate(entries []watcher.Entry, prices *Prices) *Aggregate {
	w := newWalker(&Aggregate{}, prices, false)
	for i := range entries {
		if entries[i].ParentID != "" {
			w.a.Walk.Tree = true // Branch's rule: one parentId makes the file a tree
			break
		}
	}
	for _, idx := range Branch(entries) {
		w.step(&entries[idx])
	}
	for i := range entries {
		if isAssistant(&entries[i]) {
			w.a.Sums.Figures.Requests.OffBranch++
		}
	}
	w.done()
	return w.a
}

// Extend walks entries appended to the file after the ones a holds. It
// returns false when they do not simply extend the current branch (a new
// root, a reply to an older entry, an id the branch already holds, a
// linear v1 file turning into a tree) or a was priced with another table:
// a is then spoilt, and the caller rebuilds it from all the entries.
func (a *Aggregate) Extend(entries []watcher.Entry, prices *Prices) bool {
	if a.Sums.Version != AggregateVersion {
		return false
	}
	if a.Sums.Prices != "" && a.Sums.Prices != prices.Fingerprint() {
		return false
	}
	w := newWalker(a, prices, false)
	k := &a.Walk
	for i := range entries {
		e := &entries[i]
		if n := k.Len; n == 0 {
			k.Tree = e.ParentID != ""
		} else {
			leaf := k.Leaf
			switch {
			case !k.Tree && e.ParentID == "":
				// Still linear: every entry is on the branch.
			case !k.Tree && n == 1 && leaf != "" && e.ParentID == leaf && e.ID != leaf:
				// The first link: the tree's branch is the same two entries.
				k.Tree = true
			case k.Tree && leaf != "" && e.ParentID == leaf && e.ID != "" && e.ID != k.RootParent && !w.onPath(e.ID):
				// A reply to the leaf: the branch grows by it and nothing
				// above it moves (no entry on it, and not the root's
				// missing parent, took its id).
			default:
				return false
			}
		}
		if isAssistant(e) {
			a.Sums.Figures.Requests.OffBranch++
		}
		w.step(e)
	}
	w.done()
	return true
}

// Summary is the session's report summary from its aggregate and
// bindery's compiles for it: the same as Analyze over the entries the
// aggregate was built from. It consumes a.
func (a *Aggregate) Summary(session string, compiles []CompileEvent) Summary {
	return finish(a, session, compiles, nil).Summary
}

// walker is one walk along a branch: Analyze runs it over a whole branch
// keeping every request (full), an Aggregate over what was appended.
type walker struct {
	a      *Aggregate
	prices *Prices // tracked: records a lookup
	used   *bool
	fp     string
	// path is "\n" + Walk.Path + what this walk appended; posOf maps an
	// id to its last position, built from path when first needed.
	path  []byte
	posOf map[string]int
	// res is Walk.Residents parsed (parsed says so), else resBuf is it
	// with the turns this walk appended.
	res    []Resident
	parsed bool
	resBuf []byte
	full   *fullRun
}

// fullRun is what Analyze keeps beyond an aggregate: every request (with
// the parent key its compiles are found by) and the chart's marks.
type fullRun struct {
	reqs    []Request
	parents []string
	marks   []Mark
}

func newWalker(a *Aggregate, prices *Prices, full bool) *walker {
	a.Sums.Version = AggregateVersion
	tp, used := prices.tracked()
	w := &walker{a: a, prices: tp, used: used, fp: prices.Fingerprint()}
	w.path = append(append(make([]byte, 0, len(a.Walk.Path)+1+1024), '\n'), a.Walk.Path...)
	w.resBuf = append(make([]byte, 0, len(a.Walk.Residents)+256), a.Walk.Residents...)
	if full {
		w.full = &fullRun{}
	}
	return w
}

// onPath says whether id names an entry on the branch.
func (w *walker) onPath(id string) bool {
	if w.posOf != nil {
		_, ok := w.posOf[id]
		return ok
	}
	return bytes.Contains(w.path, []byte("\n"+escapeID(id)+"\n"))
}

// lookup is id's last position on the path.
func (w *walker) lookup(id string) (int, bool) {
	if w.posOf == nil {
		w.posOf = make(map[string]int, w.a.Walk.Len)
		lines := bytes.Split(w.path[1:], []byte{'\n'})
		for pos, l := range lines[:len(lines)-1] {
			if len(l) > 0 {
				w.posOf[unescapeID(l)] = pos
			}
		}
	}
	pos, ok := w.posOf[id]
	return pos, ok
}

// escapeID keeps an id on one line of Walk.Path.
func escapeID(id string) string {
	if !strings.ContainsAny(id, "\\\n") {
		return id
	}
	return strings.NewReplacer("\\", "\\\\", "\n", "\\n").Replace(id)
}

func unescapeID(l []byte) string {
	if bytes.IndexByte(l, '\\') < 0 {
		return string(l)
	}
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		if l[i] == '\\' && i+1 < len(l) {
			i++
			if l[i] == 'n' {
				b.WriteByte('\n')
				continue
			}
		}
		b.WriteByte(l[i])
	}
	return b.String()
}

// residents parses the resident turns (once a walk).
func (w *walker) residents() []Resident {
	if w.parsed {
		return w.res
	}
	w.parsed = true
	for _, l := range bytes.Split(w.resBuf, []byte{'\n'}) {
		if len(l) == 0 {
			continue
		}
		f := bytes.SplitN(l, []byte{' '}, 4)
		if len(f) != 4 {
			continue // not written by appendResident
		}
		pos, _ := strconv.Atoi(string(f[0]))
		cycle, _ := strconv.Atoi(string(f[1]))
		tokens, _ := strconv.ParseInt(string(f[2]), 10, 64)
		w.res = append(w.res, Resident{Pos: pos, Cycle: cycle, Tokens: tokens, ID: unescapeID(f[3])})
	}
	return w.res
}

func (w *walker) addResident(r Resident) {
	if w.parsed {
		w.res = append(w.res, r)
		return
	}
	w.resBuf = appendResident(w.resBuf, r)
}

func appendResident(b []byte, r Resident) []byte {
	b = strconv.AppendInt(b, int64(r.Pos), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.Cycle), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Tokens, 10)
	b = append(b, ' ')
	b = append(b, escapeID(r.ID)...)
	return append(b, '\n')
}

// done records the price table when the walk consulted it.
func (w *walker) done() {
	w.a.Walk.Path = string(w.path[1:])
	if w.parsed {
		w.resBuf = w.resBuf[:0]
		for _, r := range w.res {
			w.resBuf = appendResident(w.resBuf, r)
		}
	}
	w.a.Walk.Residents = string(w.resBuf)
	if *w.used {
		w.a.Sums.Prices = w.fp
	}
}

// step walks one more entry of the branch: Analyze's loop body.
func (w *walker) step(e *watcher.Entry) {
	s := &w.a.Sums
	k := &w.a.Walk
	f := &s.Figures
	prices := w.prices
	if f.Days == nil {
		f.Days = map[string]Day{}
	}
	pos := k.Len
	k.Len++
	k.Leaf = e.ID
	w.path = append(append(w.path, escapeID(e.ID)...), '\n')
	if pos == 0 {
		k.RootParent = e.ParentID
		k.RootAssistant = isAssistant(e) && e.ID != ""
	}
	if e.ID != "" && w.posOf != nil {
		w.posOf[e.ID] = pos
	}
	switch e.Type {
	case "compaction", "branch_summary":
		k.SinceCompaction, k.BreakCompaction = true, true
		w.mark(e, f.Requests.Total+1)
	case "model_change", "thinking_level_change":
		k.SinceModel, k.BreakModel = true, true
		w.mark(e, f.Requests.Total+1)
	}
	switch {
	case closesCycle(e):
		w.closeCycle()
		k.Cycle++
		k.ClosedRes += k.OpenRes
		k.OpenRes = 0
	case e.Type == "compaction":
		// The prompt now holds a summary and the entries from
		// firstKeptEntryId on; thinking before it is gone.
		keep, ok := w.lookup(e.FirstKeptEntryID)
		if !ok {
			keep = pos
		}
		k.Window = keep
		k.ClosedRes, k.OpenRes = 0, 0
		res := w.residents()
		kept := res[:0]
		for _, r := range res {
			if r.Pos < keep {
				continue
			}
			kept = append(kept, r)
			if r.Cycle == k.Cycle {
				k.OpenRes += r.Tokens
			} else {
				k.ClosedRes += r.Tokens
			}
		}
		w.res = kept
	case e.Type == "usage":
		line := &f.OtherUsage
		if e.UsageKind == "cache_warm" {
			line = &f.Warm
		} else if e.UsageKind != "" {
			line.Kinds = mergeNames(line.Kinds, []string{e.UsageKind})
		}
		line.Entries++
		if u := e.Usage; u != nil {
			line.Input += val(u.Input)
			line.Output += val(u.Output)
			line.Read += val(u.CacheRead)
			line.Write += val(u.CacheWrite)
			line.Write1h += val(u.CacheWrite1h)
		}
		addSpend(&line.Spend, e, prices)
		addDay(f.Days, e, prices, dayOther)
		if e.UsageKind == "cache_warm" && e.Timestamp != "" {
			k.LastWarm = e.Timestamp
		}
	case e.Type == "context_edit" && e.TargetID != "":
		// From here on the model sees the target as edited: its
		// thinking leaves the prompts (omitted, or replaced by content
		// holding only the replacement's thinking). Where cycles began
		// does not change: the edit changes what later requests carry.
		tpos, ok := w.lookup(e.TargetID)
		if !ok || tpos < k.Window {
			break // not on the branch, or summarized by a compaction since
		}
		var made int64
		for _, b := range e.Thinking {
			made += estimateTokens(b.Chars)
		}
		found := false
		res := w.residents()
		for i := range res {
			r := &res[i]
			if r.ID != e.TargetID {
				continue
			}
			found = true
			if r.Cycle == k.Cycle {
				k.OpenRes += made - r.Tokens
			} else {
				k.ClosedRes += made - r.Tokens
			}
			r.Tokens = made
		}
		if !found && made > 0 && !e.EditOmit {
			tcycle := k.Cycle
			for _, r := range res {
				if r.Pos <= tpos {
					tcycle = r.Cycle
				}
			}
			w.addResident(Resident{Pos: tpos, ID: e.TargetID, Cycle: tcycle, Tokens: made})
			if tcycle == k.Cycle {
				k.OpenRes += made
			} else {
				k.ClosedRes += made
			}
		}
	case isAssistant(e):
		f.Requests.OffBranch--
		// The first reply built on an entry answers the compiles that
		// named it as their branch. On a branch every parentId is another
		// entry's id, so only a cycle's root shares one.
		parent := ""
		if e.ID != "" && e.ParentID != "" && !(pos > 0 && k.RootAssistant && e.ParentID == k.RootParent) {
			parent = e.ParentID
		}
		r := request(e, prices)
		r.N = f.Requests.Total + 1
		ctx := reqCtx{warmed: k.LastWarm, compaction: k.SinceCompaction, model: k.SinceModel}
		k.SinceCompaction, k.SinceModel = false, false
		r.Cycle = k.Cycle
		r.Regime = RegimeOf(e.Model)
		if e.Model != "" {
			s.Model = e.Model
		}
		f.Requests.Total++
		if !r.UsageKnown {
			f.Requests.UsageMissing++
		}
		if r.Apart {
			if e.StopReason == "error" {
				f.Requests.Errored++
			} else {
				f.Requests.Aborted++
			}
			a := &f.Apart
			a.Requests++
			a.Input += r.Input
			a.Output += r.Output
			a.Read += r.CacheRead
			a.Write += r.CacheWrite
			addSpend(&a.Spend, e, prices)
			addDay(f.Days, e, prices, dayErrors)
			w.request(r, e, ctx, parent)
			return
		}
		s.OpenTurns++
		r.Turn = s.OpenTurns
		f.Requests.Turns++
		if e.StopReason == "toolUse" {
			f.Requests.ToolLoops++
		}
		// What this request's prompt carried of earlier thinking.
		r.ThinkingBilled = k.OpenRes
		if r.Regime == LastTurnOnly {
			r.ThinkingFree = k.ClosedRes
		} else {
			r.ThinkingBilled += k.ClosedRes
		}
		t := &f.Thinking
		t.Billed += r.ThinkingBilled
		t.Free += r.ThinkingFree
		t.PromptTokens += r.Prompt
		switch r.Regime {
		case LastTurnOnly:
			t.LastTurnOnly++
		case KeepAll:
			t.KeepAll++
		default:
			t.Unknown++
		}
		f.Cache.Read += r.CacheRead
		f.Cache.Write += r.CacheWrite
		f.Cache.Input += r.Input
		f.Cache.Output += r.Output
		addSpend(&f.Spend, e, prices)
		addDay(f.Days, e, prices, dayByKind)

		var made int64
		v := &s.Open
		for _, b := range e.Thinking {
			tok := estimateTokens(b.Chars)
			made += tok
			v.Blocks++
			v.Tokens += tok
			if b.Redacted {
				v.Redacted++
			}
		}
		if made > 0 {
			w.addResident(Resident{Pos: pos, ID: e.ID, Cycle: k.Cycle, Tokens: made})
			k.OpenRes += made
		}
		w.request(r, e, ctx, parent)
	}
}

func (w *walker) mark(e *watcher.Entry, before int) {
	if w.full != nil {
		w.full.marks = append(w.full.marks, Mark{Kind: e.Type, Before: before, Line: e.Line, Timestamp: e.Timestamp})
	}
}

// closeCycle adds the open cycle to the closed cycles' figures (a cycle
// without a completed turn is not counted) and starts the next.
func (w *walker) closeCycle() {
	s := &w.a.Sums
	addCycle(&s.Figures, s.OpenTurns, s.Open, false)
	s.OpenTurns, s.Open = 0, Volume{}
}

func addCycle(f *Figures, n int, v Volume, open bool) {
	if n == 0 {
		return
	}
	c := &f.Cycles
	if c.Lengths == nil {
		c.Lengths = Histogram{}
	}
	c.Count++
	c.Lengths.Add(n, 1)
	if n > 16 {
		c.Over16++
	}
	if n > 130 {
		c.Over130++
	}
	c.MaxThinking = max(c.MaxThinking, v.Tokens)
	if open {
		c.Open++
		addVolume(&f.Thinking.Open, v)
	} else {
		c.Closed++
		addVolume(&f.Thinking.Closed, v)
	}
}

// request records a request: its first and last timestamps, the break
// rule (README, "Cache breaks") against the last request it compared,
// and, in a full run, the request itself.
func (w *walker) request(r Request, e *watcher.Entry, ctx reqCtx, parent string) {
	s := &w.a.Sums
	k := &w.a.Walk
	if r.N == 1 {
		s.First = r.Timestamp
	}
	s.Last = r.Timestamp
	if w.full != nil {
		w.full.reqs = append(w.full.reqs, r)
		w.full.parents = append(w.full.parents, parent)
	}
	if !r.UsageKnown || r.Prompt == 0 {
		return
	}
	p := k.Prev
	sawCompaction, sawModel := k.BreakCompaction, k.BreakModel
	k.Prev = &PrevRequest{CacheRead: r.CacheRead, CacheWrite: r.CacheWrite, CacheWrite1h: r.CacheWrite1h, Timestamp: r.Timestamp, Model: r.Model}
	k.BreakCompaction, k.BreakModel = false, false
	if p == nil {
		return
	}
	left := p.CacheRead + p.CacheWrite
	reusable := min(left, r.Prompt)
	if r.CacheRead >= reusable {
		return
	}
	rewritten := min(r.CacheWrite, reusable-r.CacheRead)
	since := p.Timestamp
	if wm := ctx.warmed; wm != "" && gap(since, wm) > 0 {
		since = wm // the warm kept the cache alive until then
	}
	idle := gap(since, r.Timestamp)
	b := Break{
		Request: r.N, EntryID: r.EntryID, Line: r.Line, Timestamp: r.Timestamp,
		Cycle: r.Cycle, Turn: r.Turn, Model: r.Model,
		ReadBefore: p.CacheRead, ReadAfter: r.CacheRead, Left: left, Reusable: reusable, Rewritten: rewritten,
		Gap: idle.Seconds(), Cause: CauseUnknown,
	}
	if wp, rd, ok := cachePrices(&r, costOf(e), w.prices); ok {
		b.Cost = usd(wp * float64(rewritten) / 1e6)
		b.Excess = usd((wp - rd) * float64(rewritten) / 1e6)
	}
	switch {
	case sawCompaction:
		b.Cause = CauseCompaction
	case sawModel || (p.Model != "" && r.Model != "" && p.Model != r.Model):
		b.Cause = CauseModel
	case idle > CacheLifetime(&Request{CacheWrite1h: p.CacheWrite1h}):
		b.Cause = CauseIdle
	}
	s.Breaks = append(s.Breaks, PendingBreak{Break: b, Parent: parent})
}

// finish turns an aggregate and the session's compile events into the
// session's report (full, when given, adds its requests and marks). It
// consumes a.
func finish(a *Aggregate, session string, compiles []CompileEvent, full *fullRun) Session {
	s := &a.Sums
	f := s.Figures
	f.Sessions = 1
	byEntry := make(map[string][]*CompileEvent)
	byParent := make(map[string][]*CompileEvent)
	for i := range compiles {
		c := &compiles[i]
		f.Bindery.Compiles++
		rescued := false
		for _, st := range c.Strips {
			if f.Bindery.Strips == nil {
				f.Bindery.Strips = map[string]int{}
			}
			f.Bindery.Strips[st.Reason]++
			f.Bindery.StrippedTokens += st.Tokens
			if st.WouldRefuse {
				f.Bindery.RefusalsAvoided++
				rescued = true
			}
		}
		if rescued {
			f.Bindery.RequestsRescued++
		}
		switch {
		case c.EntryID != "":
			byEntry[c.EntryID] = append(byEntry[c.EntryID], c)
		case c.Parent != "":
			byParent[c.Parent] = append(byParent[c.Parent], c)
		}
	}
	answered := func(entry, parent string) []*CompileEvent {
		var cs []*CompileEvent
		if entry != "" {
			cs = append(cs, byEntry[entry]...)
		}
		if parent != "" {
			cs = append(cs, byParent[parent]...)
		}
		return cs
	}
	addCycle(&f, s.OpenTurns, s.Open, true)
	if f.Cycles.Lengths == nil {
		f.Cycles.Lengths = Histogram{}
	}
	if f.Days == nil {
		f.Days = map[string]Day{}
	}

	var reqs []Request
	if full != nil {
		reqs = full.reqs
		for i := range reqs {
			r := &reqs[i]
			for _, c := range answered(r.EntryID, full.parents[i]) {
				r.Strips += len(c.Strips)
				for _, st := range c.Strips {
					r.StrippedTokens += st.Tokens
				}
			}
		}
	}
	breaks := make([]Break, 0, len(s.Breaks))
	for _, pb := range s.Breaks {
		b := pb.Break
		b.Session = session
		if b.Cause != CauseCompaction {
			strip, host := false, false
			for _, c := range answered(b.EntryID, pb.Parent) {
				switch c.CacheCause {
				case CauseStrip, "bindery":
					strip = true
				case CauseHost:
					host = true
				}
			}
			switch {
			case strip:
				b.Cause = CauseStrip
			case host:
				b.Cause = CauseHost
			}
		}
		breaks = append(breaks, b)
	}
	for _, b := range breaks {
		if full != nil {
			reqs[b.Request-1].Break = true
		}
		bt := &f.Breaks
		if api.Avoidable(b.Cause) && b.Excess != nil {
			bt.Avoidable += *b.Excess
			if k := dayOf(b.Timestamp); k != "" {
				d := f.Days[k]
				d.Avoidable += *b.Excess
				f.Days[k] = d
			}
		}
		bt.Count++
		bt.Rewritten += b.Rewritten
		if b.Cost != nil {
			bt.Cost += *b.Cost
			bt.Excess += *b.Excess
		} else {
			bt.Unpriced++
		}
		if bt.ByCause == nil {
			bt.ByCause = map[string]CauseTotal{}
		}
		ct := bt.ByCause[b.Cause]
		ct.Count++
		ct.Rewritten += b.Rewritten
		if b.Cost != nil {
			ct.Cost += *b.Cost
			ct.Excess += *b.Excess
		}
		bt.ByCause[b.Cause] = ct
	}
	f.Bindery.CacheCost = f.Breaks.ByCause[CauseStrip].Excess
	Finish(&f)

	sum := Summary{Version: FormatVersion, Session: session, Model: s.Model, First: s.First, Last: s.Last, Figures: f, Breaks: breaks}
	if reqs == nil {
		reqs = []Request{}
	}
	out := Session{Summary: sum, Requests: reqs}
	if full != nil {
		out.Marks = full.marks
	}
	return out
}
