package report

import "strings"

// SessionReport is the report of one analysed session.
func SessionReport(s Session, prices *Prices) Report {
	sum := s.Summary
	f := sum.Figures
	Finish(&f)
	breaks := append([]Break{}, sum.Breaks...)
	return Report{
		Version: FormatVersion, Scope: "session",
		Session: sum.Session, Model: sum.Model, First: sum.First, Last: sum.Last,
		Figures: f, Breaks: breaks, Requests: s.Requests, Marks: s.Marks, Prices: prices.Rows(), GrandTotal: f.Total,
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
		Merge(&f, s.Figures)
		for _, b := range s.Breaks {
			total++
			breaks = append(breaks, b)
			if len(breaks) == cap(breaks) {
				sortBreaks(breaks)
				breaks = breaks[:MaxArchiveBreaks]
			}
		}
		sf := s.Figures
		spend, unpriced := totalSpend(&sf)
		lines = append(lines, SessionLine{
			Session: s.Session, Model: s.Model, Last: s.Last,
			Requests: sf.Requests.Total, Cycles: sf.Cycles.Count,
			Spend: spend, Unpriced: unpriced, Avoidable: sf.Breaks.Avoidable,
			Breaks: sf.Breaks.Count, HitRatio: sf.Cache.HitRatio,
		})
	}
	Finish(&f)
	sortBreaks(breaks)
	if len(breaks) > MaxArchiveBreaks {
		breaks = breaks[:MaxArchiveBreaks]
	}
	omitted := total - len(breaks)
	sortLines(lines)
	return Report{
		Version: FormatVersion, Scope: "archive",
		Figures: f, Breaks: breaks, BreaksOmitted: omitted, Sessions: lines, Prices: prices.Rows(), GrandTotal: f.Total,
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
