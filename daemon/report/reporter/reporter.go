// Package reporter is the shell around the pure report package: it keeps
// every session's report summary current in memory and in the database,
// recomputing a session only when its stamp (ingest progress, compile
// events, price table, format) changed, and answers GET /v1/report.
package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// CompileSource gives bindery's compile events per pi session (the
// conversation id bindery keeps for a pi session is its session id).
type CompileSource interface {
	// Seqs returns, per session, a number that changes whenever the
	// session's compile events do: it enters the summary's stamp.
	Seqs(ctx context.Context) (map[string]int64, error)
	// Compiles returns the session's compile events.
	Compiles(ctx context.Context, session string) ([]report.CompileEvent, error)
}

// Reporter answers reports over the sessions in the database.
type Reporter struct {
	db       *db.DB
	prices   *report.Prices
	compiles CompileSource
	log      *slog.Logger

	mu     sync.Mutex
	loaded bool
	mem    map[int64]cached // by files.id
}

type cached struct {
	stamp string
	sum   report.Summary
}

// New returns a Reporter. prices is the price table (nil: the built-in
// one); compiles nil reads compile events from the database's event log.
func New(d *db.DB, prices *report.Prices, compiles CompileSource, log *slog.Logger) *Reporter {
	if prices == nil {
		prices = report.DefaultPrices()
	}
	if compiles == nil {
		compiles = EventLog{DB: d}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reporter{db: d, prices: prices, compiles: compiles, log: log, mem: map[int64]cached{}}
}

// Stats says what the last Archive call did.
type Stats struct {
	Sessions int // sessions in the archive
	Analysed int // sessions whose summary was recomputed
	// Scanned is the part of Analysed that read the session's entries
	// (no current aggregate: a session ingested before schema version 7,
	// a moved branch, another price table); the rest came from aggregates.
	Scanned int
}

// Archive reports over every session the database holds (removed files
// included: their rows are kept). A session whose stamp is unchanged
// comes from the summary cache; another from its aggregate (kept current
// at ingest) and its compile events; only a session without a current
// aggregate is read and analysed, and its aggregate stored for the next.
func (r *Reporter) Archive(ctx context.Context) (api.Report, Stats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	if !r.loaded {
		rows, err := r.db.ReportSummaries(ctx)
		if err != nil {
			return api.Report{}, Stats{}, err
		}
		for file, row := range rows {
			var s report.Summary
			if json.Unmarshal(row.Summary, &s) != nil || s.Version != report.FormatVersion {
				continue // recomputed below
			}
			r.mem[file] = cached{stamp: row.Stamp, sum: s}
		}
		r.loaded = true
	}
	sessions, err := r.db.ReportSessions(ctx)
	if err != nil {
		return api.Report{}, Stats{}, err
	}
	seqs, err := r.compiles.Seqs(ctx)
	if err != nil {
		return api.Report{}, Stats{}, fmt.Errorf("compile events: %w", err)
	}
	stamps := make([]string, len(sessions))
	var stale []int64
	for i, s := range sessions {
		stamps[i] = report.Stamp(s.Progress, seqs[s.ID], r.prices)
		if c, ok := r.mem[s.File]; !ok || c.stamp != stamps[i] {
			stale = append(stale, s.File)
		}
	}
	aggs, err := r.db.ReportAggregates(ctx, stale)
	if err != nil {
		return api.Report{}, Stats{}, err
	}
	sums := make([]report.Summary, 0, len(sessions))
	var fresh []db.ReportSummary
	var built []db.AggregateAt
	scanned := 0
	live := make(map[int64]bool, len(sessions))
	for i, s := range sessions {
		live[s.File] = true
		stamp := stamps[i]
		c, ok := r.mem[s.File]
		if !ok || c.stamp != stamp {
			compiles, err := r.sessionCompiles(ctx, s.ID)
			if err != nil {
				return api.Report{}, Stats{}, err
			}
			sum, ok := r.fromAggregate(aggs[s.File], s.ID, compiles)
			if !ok {
				src := source{file: s.File, id: s.ID, path: s.Path, version: s.Version, removed: s.Removed}
				in, readBack, err := r.input(ctx, src, compiles)
				if err != nil {
					return api.Report{}, Stats{}, err
				}
				scanned++
				// The aggregate's summary is Analyze's (report's tests).
				agg := report.BuildAggregate(in.Entries, r.prices)
				sumsJSON, walkJSON, breaksJSON, err := agg.Encode()
				if err != nil {
					return api.Report{}, Stats{}, fmt.Errorf("aggregate of %s: %w", s.ID, err)
				}
				sum = agg.Summary(s.ID, compiles)
				// Rows an older schema kept short were read back from
				// the file: the rows alone would not rebuild it.
				built = append(built, db.AggregateAt{File: s.File, Offset: s.Offset, Lines: s.Lines, MS: s.UpdatedMS,
					Aggregate: db.Aggregate{Sums: sumsJSON, Walk: walkJSON, Breaks: breaksJSON, Fresh: !readBack}})
			}
			c = cached{stamp: stamp, sum: sum}
			r.mem[s.File] = c
			data, err := json.Marshal(c.sum)
			if err != nil {
				return api.Report{}, Stats{}, fmt.Errorf("encode summary of %s: %w", s.ID, err)
			}
			fresh = append(fresh, db.ReportSummary{File: s.File, Stamp: stamp, Summary: data})
		}
		sums = append(sums, c.sum)
	}
	for file := range r.mem {
		if !live[file] {
			delete(r.mem, file)
		}
	}
	if err := r.db.PutReportSummaries(ctx, fresh); err != nil {
		// The report is still right; the next one recomputes these.
		r.log.Warn("report: could not cache summaries", "err", err)
	}
	if err := r.db.PutReportAggregates(ctx, built); err != nil {
		r.log.Warn("report: could not store aggregates", "err", err)
	}
	rep := report.ArchiveReport(sums, r.prices)
	hosts, err := r.db.HostUsages(ctx)
	if err != nil {
		return api.Report{}, Stats{}, err
	}
	rep.Hosts = report.HostsReport(hosts, r.prices)
	rep.GrandTotal = rep.Figures.Total
	if rep.Hosts != nil {
		rep.GrandTotal += rep.Hosts.Total
	}
	// ReportSessions is ordered by last activity, then newest file first.
	for _, s := range sessions {
		if !s.Removed {
			rep.Latest = s.ID
			break
		}
	}
	r.log.Debug("archive report", "sessions", len(sessions), "analysed", len(fresh), "scanned", scanned, "took", time.Since(start))
	return rep, Stats{Sessions: len(sessions), Analysed: len(fresh), Scanned: scanned}, nil
}

// fromAggregate is a session's summary from its stored aggregate, when
// there is one of this version priced like this report.
func (r *Reporter) fromAggregate(row db.Aggregate, session string, compiles []report.CompileEvent) (report.Summary, bool) {
	if row.Sums == nil {
		return report.Summary{}, false
	}
	a, err := report.DecodeAggregate(row.Sums, nil, row.Breaks)
	if err != nil {
		r.log.Debug("report: unreadable aggregate; rebuilding", "session", session, "err", err)
		return report.Summary{}, false
	}
	if a.Sums.Version != report.AggregateVersion || (a.Sums.Prices != "" && a.Sums.Prices != r.prices.Fingerprint()) {
		return report.Summary{}, false
	}
	return a.Summary(session, compiles), true
}

// Session reports one session by pi's id, with its per-request rows.
func (r *Reporter) Session(ctx context.Context, id string) (api.Report, error) {
	s, err := r.db.Session(ctx, id)
	if errors.Is(err, db.ErrNotFound) {
		return api.Report{}, api.Errorf(api.CodeNotFound, "no session %q", id)
	}
	if err != nil {
		return api.Report{}, err
	}
	compiles, err := r.sessionCompiles(ctx, id)
	if err != nil {
		return api.Report{}, err
	}
	sess, err := r.analyse(ctx, source{file: s.File, id: id, path: s.Path, version: s.Version, removed: s.Removed}, compiles)
	if err != nil {
		return api.Report{}, err
	}
	rep := report.SessionReport(sess, r.prices)
	files, err := r.db.SessionFiles(ctx, id)
	if err != nil {
		return api.Report{}, err
	}
	if len(files) > 1 {
		for _, f := range files {
			rep.SameID = append(rep.SameID, api.SessionFile{File: f.Path, Removed: f.Removed, LastActivity: f.LastActivity})
		}
	}
	return rep, nil
}

// Report is what the API serves: the archive's report when session is
// "", else that session's.
func (r *Reporter) Report(ctx context.Context, session string) (api.Report, error) {
	if session == "" {
		rep, _, err := r.Archive(ctx)
		return rep, err
	}
	return r.Session(ctx, session)
}

// WhatIf replays one session (q.Session) or every session under the
// policies (GET /v1/whatif). Each session is read and replayed afresh:
// a replay is asked for now and then, not kept current like the report.
func (r *Reporter) WhatIf(ctx context.Context, q api.WhatIfQuery) (api.WhatIf, error) {
	keep := q.Keep
	if keep <= 0 {
		keep = api.DefaultKeepLast
	}
	out := api.WhatIf{Version: api.ReportFormat, Scope: "archive", Keep: keep}
	var srcs []source
	if q.Session != "" {
		s, err := r.db.Session(ctx, q.Session)
		if errors.Is(err, db.ErrNotFound) {
			return api.WhatIf{}, api.Errorf(api.CodeNotFound, "no session %q", q.Session)
		}
		if err != nil {
			return api.WhatIf{}, err
		}
		out.Scope = "session"
		srcs = append(srcs, source{file: s.File, id: q.Session, path: s.Path, version: s.Version, removed: s.Removed})
	} else {
		sessions, err := r.db.ReportSessions(ctx)
		if err != nil {
			return api.WhatIf{}, err
		}
		for _, s := range sessions {
			srcs = append(srcs, source{file: s.File, id: s.ID, path: s.Path, version: s.Version, removed: s.Removed})
		}
	}
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return api.WhatIf{}, err
		}
		compiles, err := r.sessionCompiles(ctx, src.id)
		if err != nil {
			return api.WhatIf{}, err
		}
		in, _, err := r.input(ctx, src, compiles)
		if err != nil {
			return api.WhatIf{}, fmt.Errorf("whatif: session %s: %w", src.id, err)
		}
		out.Sessions = append(out.Sessions, report.Replay(in, r.prices, keep))
	}
	report.SumWhatIf(&out)
	return out, nil
}

func (r *Reporter) sessionCompiles(ctx context.Context, id string) ([]report.CompileEvent, error) {
	ev, err := r.compiles.Compiles(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("compile events of %s: %w", id, err)
	}
	return ev, nil
}

// EventLog reads compile events from the database's durable event log
// (GET /v1/events' store). The log is bounded (bindery serve
// --events-max, --events-max-age): a summary computed while a compile was
// in the log keeps it until the session changes; one computed later no
// longer sees it.
type EventLog struct{ DB *db.DB }

// Seqs is the latest event seq of every conversation.
func (l EventLog) Seqs(ctx context.Context) (map[string]int64, error) {
	return l.DB.ReportEventSeqs(ctx)
}

// Compiles converts the session's compile events (api.EventCompile
// fields: branch, binds, dryRun, strips, cache). A malformed event is
// skipped.
func (l EventLog) Compiles(ctx context.Context, session string) ([]report.CompileEvent, error) {
	evs, err := l.DB.ReportCompileEvents(ctx, session)
	if err != nil {
		return nil, err
	}
	out := make([]report.CompileEvent, 0, len(evs))
	for _, ev := range evs {
		var f struct {
			Branch string      `json:"branch"`
			Binds  bool        `json:"binds"`
			DryRun bool        `json:"dryRun"`
			Strips []api.Strip `json:"strips"`
			Cache  struct {
				Cause string `json:"cause"`
			} `json:"cache"`
		}
		if json.Unmarshal(ev.Fields, &f) != nil || f.DryRun {
			continue
		}
		c := report.CompileEvent{Seq: ev.Seq, Parent: f.Branch, CacheCause: f.Cache.Cause}
		for _, s := range f.Strips {
			c.Strips = append(c.Strips, report.Strip{Reason: s.Reason, Tokens: int64(s.Tokens),
				WouldRefuse: f.Binds && report.WouldRefuse(s.Reason)})
		}
		out = append(out, c)
	}
	return out, nil
}

// source is a session file to analyse.
type source struct {
	file    int64
	id      string
	path    string
	version int
	removed bool
}

func (r *Reporter) analyse(ctx context.Context, src source, compiles []report.CompileEvent) (report.Session, error) {
	in, _, err := r.input(ctx, src, compiles)
	if err != nil {
		return report.Session{}, err
	}
	return report.Analyze(in, r.prices), nil
}

// input is a session's entries (with what older schemas kept short read
// back from the file) and compile events; short says some rows were short.
func (r *Reporter) input(ctx context.Context, src source, compiles []report.CompileEvent) (in report.SessionInput, short bool, err error) {
	rows, err := r.db.ReportEntries(ctx, src.file)
	if err != nil {
		return report.SessionInput{}, false, err
	}
	entries := Entries(rows)
	short = slices.ContainsFunc(entries, costSplitMissing) || slices.ContainsFunc(entries, pi16Missing)
	if !src.removed && slices.ContainsFunc(entries, costSplitMissing) {
		// Rows ingested before schema version 4 carry only cost.total.
		if err := CostsFromFile(src.path, src.version, entries); err != nil {
			r.log.Debug("report: pi's cost split unavailable; using cost.total", "session", src.id, "err", err)
		}
	}
	if !src.removed && slices.ContainsFunc(entries, pi16Missing) {
		// pi 1.6 usage and context_edit rows ingested before schema version 6.
		if err := Pi16FromFile(src.path, src.version, entries); err != nil {
			r.log.Debug("report: pi 1.6 entries unreadable; left uncounted", "session", src.id, "err", err)
		}
	}
	return report.SessionInput{Session: src.id, Entries: entries, Compiles: compiles}, short, nil
}

// Aggregator keeps report aggregates current inside the ingest
// transaction (db.ReportAggregator), priced with the report's table.
type Aggregator struct{ Prices *report.Prices }

// BuildAggregate is the aggregate of a whole file's rows.
func (g Aggregator) BuildAggregate(rows []db.Entry) (db.Aggregate, error) {
	c := conversions.Get().(*entryConversion)
	defer conversions.Put(c)
	sums, walk, breaks, err := report.BuildAggregate(c.convert(rows), g.Prices).Encode()
	if err != nil {
		return db.Aggregate{}, err
	}
	return db.Aggregate{Sums: sums, Walk: walk, Breaks: breaks}, nil
}

// ExtendAggregate extends a stored aggregate by appended rows.
func (g Aggregator) ExtendAggregate(prev db.Aggregate, rows []db.Entry) (db.Aggregate, bool, error) {
	// Without its breaks: Encode then gives only the new ones, which db
	// adds to the stored.
	a, err := report.DecodeAggregate(prev.Sums, prev.Walk, nil)
	if err != nil {
		return db.Aggregate{}, false, err
	}
	c := conversions.Get().(*entryConversion)
	defer conversions.Put(c)
	if !a.Extend(c.convert(rows), g.Prices) {
		return db.Aggregate{}, false, nil
	}
	sums, walk, breaks, err := a.Encode()
	if err != nil {
		return db.Aggregate{}, false, err
	}
	return db.Aggregate{Sums: sums, Walk: walk, Breaks: breaks}, true, nil
}

// maxCostLine bounds the assistant lines read back for their cost.
const maxCostLine = 16 << 20

// costSplitMissing: an assistant entry with pi's cost.total but none of
// its split, which is how the index holds rows ingested before schema
// version 4 (and entries pi wrote without the split: reading those back
// finds nothing more, and costs only that read).
func costSplitMissing(e watcher.Entry) bool {
	if e.Role != "assistant" || e.Usage == nil || e.Usage.Cost == nil {
		return false
	}
	c := e.Usage.Cost
	return c.Total != nil && c.Input == nil && c.Output == nil && c.CacheRead == nil && c.CacheWrite == nil
}

// CostsFromFile is the fallback for rows ingested before schema version 4,
// which the index keeps with cost.total only: it fills in pi's full
// usage.cost (input, output, cacheRead, cacheWrite) of those assistant
// entries by reading each one's line back from the session file at its
// recorded offset. Entries that already have the split (ingested since)
// are not read. The file is only read. A line that no longer parses as the
// same assistant entry (the file was rewritten since it was ingested)
// keeps its total; so does every entry when the file cannot be opened,
// which is then the error returned.
func CostsFromFile(path string, version int, entries []watcher.Entry) error {
	return readBack(path, version, entries, costSplitMissing, func(e *watcher.Entry, got *watcher.Entry) {
		if got.Role != "assistant" || (version >= 2 && got.ID != e.ID) || got.Usage == nil || got.Usage.Cost == nil {
			return
		}
		if c := got.Usage.Cost; c.Total != nil && e.Usage.Cost.Total != nil && *c.Total != *e.Usage.Cost.Total {
			return // not the line that was ingested
		}
		e.Usage.Cost = got.Usage.Cost
	})
}

// readBack is how the report fills in, for rows an older schema kept short,
// what the watcher parses from their lines now: for each entry missing
// says lacks something, it reads the entry's line back from the session
// file at its recorded offset (read only) and hands the parse to fill,
// which checks it is the same entry before taking from it. A file shorter
// than a recorded line was rewritten: the rest is left as it is. A file
// that cannot be opened leaves every entry as it was and is the error.
func readBack(path string, version int, entries []watcher.Entry, missing func(watcher.Entry) bool, fill func(e, got *watcher.Entry)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var buf []byte
	for i := range entries {
		e := &entries[i]
		if !missing(*e) || e.Length <= 0 || e.Length > maxCostLine {
			continue
		}
		if cap(buf) < e.Length {
			buf = make([]byte, e.Length)
		}
		n, err := f.ReadAt(buf[:e.Length], e.Offset)
		if n != e.Length {
			if err == nil || errors.Is(err, io.EOF) {
				return nil // the file is shorter now: rewritten
			}
			return fmt.Errorf("read %s at %d: %w", path, e.Offset, err)
		}
		p := watcher.Parser{Path: path, State: watcher.ParseState{Version: version, Values: 1}}
		if got := p.Line(buf[:n], e.Offset).Entry; got != nil {
			fill(e, got)
		}
	}
	return nil
}

// Entries converts the index's rows to the watcher's entry shape the
// report reads, with pi's cost split as the index holds it (rows ingested
// before schema version 4 have Total alone, until CostsFromFile fills in
// the split).
func Entries(rows []db.Entry) []watcher.Entry { return new(entryConversion).convert(rows) }

// entryConversion holds one conversion's entries and what they point to,
// in a few slices rather than an allocation per entry. An aggregate's
// build reuses one (conversions, a sync.Pool): the aggregate is encoded
// before the build returns and keeps none of them.
type entryConversion struct {
	entries  []watcher.Entry
	usage    []watcher.Usage
	cost     []watcher.Cost
	thinking []watcher.ThinkingBlock
}

var conversions = sync.Pool{New: func() any { return new(entryConversion) }}

// convert converts rows into c's slices, overwriting what they held.
func (c *entryConversion) convert(rows []db.Entry) []watcher.Entry {
	blocks := 0
	for i := range rows {
		blocks += len(rows[i].Thinking)
	}
	// Sized once: the entries point into usage, cost and thinking.
	c.entries = resized(c.entries, len(rows))
	c.usage = resized(c.usage, len(rows))[:0]
	c.cost = resized(c.cost, len(rows))[:0]
	c.thinking = resized(c.thinking, blocks)[:0]
	for i := range rows {
		e := &rows[i]
		w := &c.entries[i]
		*w = watcher.Entry{
			Line: e.Line, Offset: e.Offset, Length: e.Length, Type: e.Type, ID: e.ID, ParentID: e.ParentID,
			Timestamp: e.Timestamp, Role: e.Role, Model: e.Model, Provider: e.Provider, StopReason: e.StopReason,
			ToolCalls: e.ToolCalls, UserText: e.UserText, FirstKeptEntryID: e.FirstKeptEntryID, CustomType: e.CustomType,
			UsageKind: e.UsageKind, TargetID: e.TargetID, EditOmit: e.EditOmit,
		}
		u := e.Usage
		if u.Input != nil || u.Output != nil || u.CacheRead != nil || u.CacheWrite != nil || u.TotalTokens != nil || u.CostTotal != nil ||
			u.CostInput != nil || u.CostOutput != nil || u.CostCacheRead != nil || u.CostCacheWrite != nil {
			c.usage = append(c.usage, watcher.Usage{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, TotalTokens: u.TotalTokens,
				CacheWrite1h: u.CacheWrite1h, Reasoning: u.Reasoning})
			w.Usage = &c.usage[len(c.usage)-1]
			if u.CostTotal != nil || u.CostInput != nil || u.CostOutput != nil || u.CostCacheRead != nil || u.CostCacheWrite != nil {
				c.cost = append(c.cost, watcher.Cost{Total: u.CostTotal, Input: u.CostInput, Output: u.CostOutput,
					CacheRead: u.CostCacheRead, CacheWrite: u.CostCacheWrite})
				w.Usage.Cost = &c.cost[len(c.cost)-1]
			}
		}
		if len(e.Thinking) > 0 {
			n := len(c.thinking)
			for _, t := range e.Thinking {
				c.thinking = append(c.thinking, watcher.ThinkingBlock{Index: t.Index, Redacted: t.Redacted, Signed: t.Signed, SigDigest: t.SigDigest, Chars: t.Chars})
			}
			w.Thinking = c.thinking[n:len(c.thinking):len(c.thinking)]
		}
	}
	return c.entries
}

// resized is s with length n, reallocated only when too short.
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
