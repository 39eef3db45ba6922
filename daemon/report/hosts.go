package report

import (
	"slices"
	"strings"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// HostsReport prices the host conversations' usage with the price table,
// one line per conversation, by spend; nil when there is none. A
// conversation's replies with a model the table does not price count as
// unpriced, their tokens still counted; replies whose usage missed a count
// are priced for what they said and counted in UsageMissing.
func HostsReport(rows []db.HostUsage, prices *Prices) *api.HostReport {
	if len(rows) == 0 {
		return nil
	}
	h := &api.HostReport{}
	byConv := map[string]*api.HostLine{}
	var order []string
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	for _, r := range rows {
		l := byConv[r.Conversation]
		if l == nil {
			l = &api.HostLine{Conversation: r.Conversation, First: ts(r.FirstMs), Last: ts(r.LastMs)}
			if client, _, ok := strings.Cut(r.Conversation, ":"); ok {
				l.Client = client
			}
			byConv[r.Conversation] = l
			order = append(order, r.Conversation)
		}
		if f := ts(r.FirstMs); f < l.First {
			l.First = f
		}
		if t := ts(r.LastMs); t > l.Last {
			l.Last = t
		}
		if !slices.Contains(l.Models, r.Model) {
			l.Models = append(l.Models, r.Model)
		}
		u := &l.Usage
		u.Entries += r.Replies
		u.Input += r.Input
		u.Output += r.Output
		u.Read += r.CacheRead
		u.Write += r.CacheWrite
		u.Write1h += r.CacheWrite1h
		l.UsageMissing += r.Missing
		parts, ok := tableParts(&watcher.Usage{Input: &r.Input, Output: &r.Output, CacheRead: &r.CacheRead, CacheWrite: &r.CacheWrite, CacheWrite1h: &r.CacheWrite1h}, r.Model, prices)
		if !ok {
			u.Spend.Unpriced += r.Replies
			l.Unpriced += r.Replies
			u.Spend.UnpricedModels = mergeNames(u.Spend.UnpricedModels, []string{r.Model})
			continue
		}
		if h.Days == nil {
			h.Days = map[string]api.Day{}
		}
		day := h.Days[r.Day]
		day.Input += parts[0]
		day.Output += parts[1]
		day.CacheRead += parts[2]
		day.CacheWrite += parts[3]
		h.Days[r.Day] = day
		u.Spend.Input += parts[0]
		u.Spend.Output += parts[1]
		u.Spend.CacheRead += parts[2]
		u.Spend.CacheWrite += parts[3]
		sum := parts[0] + parts[1] + parts[2] + parts[3]
		u.Spend.Total += sum
		u.Spend.FromTable += r.Replies
		l.Total += sum
	}
	for _, id := range order {
		l := byConv[id]
		slices.Sort(l.Models)
		if in := l.Usage.Input + l.Usage.Read + l.Usage.Write; in > 0 {
			l.HitRatio = float64(l.Usage.Read) / float64(in)
		}
		h.Conversations = append(h.Conversations, *l)
		addUsage(&h.Usage, l.Usage)
		h.UsageMissing += l.UsageMissing
		h.Unpriced += l.Unpriced
	}
	// The total is the sum of the lines as shown, so they add up exactly.
	for _, l := range h.Conversations {
		h.Total += l.Total
	}
	slices.SortStableFunc(h.Conversations, func(a, b api.HostLine) int {
		switch {
		case a.Total != b.Total:
			if a.Total > b.Total {
				return -1
			}
			return 1
		case a.Last != b.Last:
			return strings.Compare(b.Last, a.Last)
		}
		return strings.Compare(a.Conversation, b.Conversation)
	})
	return h
}
