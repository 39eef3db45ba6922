package report

import "strings"

// MaxArchiveBreaks is how many breaks an archive report lists (the
// costliest); the totals cover all of them.
const MaxArchiveBreaks = 20

// Report is what `bindery report`, GET /v1/report and --json show. Field
// names are stable; new fields may be added, none renamed or removed
// without bumping Version.
type Report struct {
	Version int    `json:"version"` // FormatVersion
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
	// Sessions: one line per session (scope "archive" only), by spend.
	Sessions []SessionLine `json:"sessions,omitempty"`
	// Latest is the session `bindery report --chart` draws when no
	// session is named (scope "archive" only): the live (not removed)
	// session with the latest last activity, a tie going to the file
	// ingested last. "" when no session is live.
	Latest string `json:"latest,omitempty"`
	// Prices is the price table the report used, keyed by ModelKey.
	Prices map[string]Price `json:"prices"`
}

// SessionFile is one of the files carrying a session id.
type SessionFile struct {
	File         string `json:"file"`
	Removed      bool   `json:"removed,omitempty"`
	LastActivity string `json:"lastActivity,omitempty"`
}

// SessionLine is one session in an archive report.
type SessionLine struct {
	Session  string  `json:"session"`
	Model    string  `json:"model,omitempty"`
	Last     string  `json:"last,omitempty"`
	Requests int     `json:"requests"`
	Cycles   int     `json:"cycles"`
	Spend    float64 `json:"spend"`
	Unpriced int     `json:"unpriced"`
	Breaks   int     `json:"breaks"`
	HitRatio float64 `json:"hitRatio"`
}

// SessionReport is the report of one analysed session.
func SessionReport(s Session, prices *Prices) Report {
	sum := s.Summary
	f := sum.Figures
	f.Finish()
	breaks := append([]Break{}, sum.Breaks...)
	return Report{
		Version: FormatVersion, Scope: "session",
		Session: sum.Session, Model: sum.Model, First: sum.First, Last: sum.Last,
		Figures: f, Breaks: breaks, Requests: s.Requests, Prices: prices.Rows(),
	}
}

// ArchiveReport merges session summaries into the archive's report. Its
// cost is linear in the number of summaries and their breaks; it never
// looks at entries.
func ArchiveReport(sums []Summary, prices *Prices) Report {
	var f Figures
	// Keep only the costliest breaks: sort a bounded buffer whenever it
	// fills, so the cost stays linear in the number of breaks.
	breaks := make([]Break, 0, 2*MaxArchiveBreaks)
	total := 0
	lines := make([]SessionLine, 0, len(sums))
	for i := range sums {
		s := &sums[i]
		f.Merge(s.Figures)
		for _, b := range s.Breaks {
			total++
			breaks = append(breaks, b)
			if len(breaks) == cap(breaks) {
				sortBreaks(breaks)
				breaks = breaks[:MaxArchiveBreaks]
			}
		}
		sf := s.Figures
		lines = append(lines, SessionLine{
			Session: s.Session, Model: s.Model, Last: s.Last,
			Requests: sf.Requests.Total, Cycles: sf.Cycles.Count,
			Spend:    sf.Spend.Total + sf.Apart.Spend.Total + sf.Warm.Spend.Total + sf.OtherUsage.Spend.Total,
			Unpriced: sf.Spend.Unpriced + sf.Apart.Spend.Unpriced + sf.Warm.Spend.Unpriced + sf.OtherUsage.Spend.Unpriced,
			Breaks:   sf.Breaks.Count, HitRatio: sf.Cache.HitRatio,
		})
	}
	f.Finish()
	sortBreaks(breaks)
	if len(breaks) > MaxArchiveBreaks {
		breaks = breaks[:MaxArchiveBreaks]
	}
	omitted := total - len(breaks)
	sortLines(lines)
	return Report{
		Version: FormatVersion, Scope: "archive",
		Figures: f, Breaks: breaks, BreaksOmitted: omitted, Sessions: lines, Prices: prices.Rows(),
	}
}

func sortLines(ls []SessionLine) {
	// Insertion into order by spend, then id: sort.Slice with a stable key.
	sortSlice(ls, func(a, b SessionLine) bool {
		if a.Spend != b.Spend {
			return a.Spend > b.Spend
		}
		return a.Session < b.Session
	})
}

// Stamp is the validity token of a cached Summary: a summary is reused
// only while the session's ingest progress (the watcher cursor, e.g.
// "offset:lines" or a file checksum), the last compile event seen for it,
// the price table and the summary format are all unchanged.
func Stamp(progress string, lastCompileSeq int64, prices *Prices) string {
	var b strings.Builder
	b.WriteString("v")
	b.WriteString(itoa(FormatVersion))
	b.WriteString("|")
	b.WriteString(progress)
	b.WriteString("|")
	b.WriteString(itoa(int(lastCompileSeq)))
	b.WriteString("|")
	b.WriteString(prices.Fingerprint())
	return b.String()
}
