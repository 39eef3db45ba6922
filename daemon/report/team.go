package report

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/watcher"
)

// The team report's facts (issue 29): one db.TeamFact per request this
// report counts, so the shared tier can sum a team's requests the way this
// machine's report sums its own. A pi session's facts are its branch's
// requests (errored and aborted replies included, as Figures.Total does;
// cache warms and other usage entries are not requests and are left out);
// a host conversation's are its accepted replies. Money is rounded to
// integer micro-USD once per request and per kind, so every sum of facts
// is exact.

// Micro is v USD in integer micro-USD, rounded to the nearest.
func Micro(v float64) int64 { return int64(math.Round(v * 1e6)) }

// TeamKeyPi is the team key of a pi session's request: it means the same
// on every machine that holds the session's file.
func TeamKeyPi(session, entry string) string { return "pi:" + session + "/" + entry }

// SessionTeamFacts is the team facts of an analysed session's requests.
// in is what s was analysed from (its entries price each request by kind);
// a request without a timestamp is dated by its session's last one, else
// by fallbackDay.
func SessionTeamFacts(in SessionInput, s Session, prices *Prices, person, fallbackDay string) []db.TeamFact {
	byID := make(map[string]*watcher.Entry, len(s.Requests))
	for i := range in.Entries {
		byID[in.Entries[i].ID] = &in.Entries[i]
	}
	breaks := make(map[int]Break, len(s.Summary.Breaks))
	for _, b := range s.Summary.Breaks {
		breaks[b.Request] = b
	}
	day := fallbackDay
	if d := dayOf(s.Summary.Last); d != "" {
		day = d
	}
	out := make([]db.TeamFact, 0, len(s.Requests))
	for _, r := range s.Requests {
		f := db.TeamFact{Key: TeamKeyPi(in.Session, r.EntryID), Person: person, Client: "pi", Day: day, Model: cut(r.Model, maxName),
			Requests: 1, Input: r.Input, Output: r.Output, CacheRead: r.CacheRead, CacheWrite: r.CacheWrite, CacheWrite1h: r.CacheWrite1h}
		if d := dayOf(r.Timestamp); d != "" {
			f.Day = d
		}
		if r.Apart {
			f.Errored = 1
		}
		if e := byID[r.EntryID]; e != nil {
			var sp Spend
			addSpend(&sp, e, prices)
			spendFact(&f, sp)
		} else {
			f.Unpriced = 1
		}
		if b, ok := breaks[r.N]; ok {
			f.Breaks, f.Rewritten = 1, b.Rewritten
			if b.Cost != nil {
				f.BreakCost = Micro(*b.Cost)
			}
			if b.Excess != nil {
				f.Excess = Micro(*b.Excess)
				if api.Avoidable(b.Cause) {
					f.Avoidable = f.Excess
				}
			}
		}
		out = append(out, f)
	}
	return out
}

func spendFact(f *db.TeamFact, sp Spend) {
	if sp.Unpriced > 0 {
		f.Unpriced = 1
		return
	}
	f.SpendInput, f.SpendOutput, f.SpendRead, f.SpendWrite = Micro(sp.Input), Micro(sp.Output), Micro(sp.CacheRead), Micro(sp.CacheWrite)
	f.SpendOther = Micro(sp.Unsplit)
}

// HostTeamFact is the team fact of a host conversation's accepted reply,
// priced by the table as HostsReport prices it. machine names the key:
// compile ids are this machine's.
func HostTeamFact(u db.AcceptUsage, prices *Prices, person, machine string) db.TeamFact {
	f := db.TeamFact{Key: db.TeamHostKey(machine, u.Compile), Person: person, Client: "sdk", Model: cut(u.Model, maxName),
		Day: time.UnixMilli(u.AcceptedMs).UTC().Format(time.DateOnly), Requests: 1,
		Input: val(u.Input), Output: val(u.Output), CacheRead: val(u.CacheRead), CacheWrite: val(u.CacheWrite), CacheWrite1h: val(u.CacheWrite1h)}
	if client, _, ok := strings.Cut(u.Conversation, ":"); ok && client != "" {
		f.Client = cut(client, maxName)
	}
	in, out, cr, cw, cw1 := f.Input, f.Output, f.CacheRead, f.CacheWrite, f.CacheWrite1h
	parts, ok := tableParts(&watcher.Usage{Input: &in, Output: &out, CacheRead: &cr, CacheWrite: &cw, CacheWrite1h: &cw1}, u.Model, prices)
	if !ok {
		f.Unpriced = 1
		return f
	}
	f.SpendInput, f.SpendOutput, f.SpendRead, f.SpendWrite = Micro(parts[0]), Micro(parts[1]), Micro(parts[2]), Micro(parts[3])
	return f
}

// maxName is the longest model or client name a fact carries (the shared
// tier refuses longer): a longer one is cut, at a character's boundary.
const maxName = 256

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
