package report

import (
	"sort"
	"strconv"

	"github.com/my-pi/bindery/api"
)

// FormatVersion changes whenever a Summary's meaning changes: summaries
// cached under another version are recomputed.
const FormatVersion = api.ReportFormat

func addUsage(u *UsageLine, o UsageLine) {
	u.Entries += o.Entries
	u.Input += o.Input
	u.Output += o.Output
	u.Read += o.Read
	u.Write += o.Write
	u.Write1h += o.Write1h
	u.Kinds = mergeNames(u.Kinds, o.Kinds)
	addSpendTotals(&u.Spend, o.Spend)
}

func addVolume(v *Volume, o Volume) {
	v.Blocks += o.Blocks
	v.Tokens += o.Tokens
	v.Redacted += o.Redacted
}

func addSpendTotals(s *Spend, o Spend) {
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
func Merge(f *Figures, o Figures) {
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
	addVolume(&t.Closed, o.Thinking.Closed)
	addVolume(&t.Open, o.Thinking.Open)
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

	addSpendTotals(&f.Spend, o.Spend)

	a := &f.Apart
	a.Requests += o.Apart.Requests
	a.Input += o.Apart.Input
	a.Output += o.Apart.Output
	a.Read += o.Apart.Read
	a.Write += o.Apart.Write
	addSpendTotals(&a.Spend, o.Apart.Spend)
	addUsage(&f.Warm, o.Warm)
	addUsage(&f.OtherUsage, o.OtherUsage)

	b := &f.Breaks
	b.Count += o.Breaks.Count
	b.Rewritten += o.Breaks.Rewritten
	b.Cost += o.Breaks.Cost
	b.Excess += o.Breaks.Excess
	b.Unpriced += o.Breaks.Unpriced
	b.Avoidable += o.Breaks.Avoidable
	for k, v := range o.Days {
		if f.Days == nil {
			f.Days = map[string]Day{}
		}
		d := f.Days[k]
		d.Input += v.Input
		d.Output += v.Output
		d.CacheWrite += v.CacheWrite
		d.CacheRead += v.CacheRead
		d.Errors += v.Errors
		d.Other += v.Other
		d.Unsplit += v.Unsplit
		d.Avoidable += v.Avoidable
		f.Days[k] = d
	}
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
func Finish(f *Figures) {
	f.Total, f.TotalUnpriced = totalSpend(f)
	if f.Days == nil {
		f.Days = map[string]Day{}
	}
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

// totalSpend is everything the figures' requests and usage entries cost, and
// how many of them have no price: completed requests, errored and aborted
// replies, cache warms and other usage. The archive, its session lines
// and a session's own report all show this one figure.
func totalSpend(f *Figures) (float64, int) {
	return f.Spend.Total + f.Apart.Spend.Total + f.Warm.Spend.Total + f.OtherUsage.Spend.Total,
		f.Spend.Unpriced + f.Apart.Spend.Unpriced + f.Warm.Spend.Unpriced + f.OtherUsage.Spend.Unpriced
}
