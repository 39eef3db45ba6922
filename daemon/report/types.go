package report

import "github.com/my-pi/bindery/api"

// The report's types are api's (api/report.go, api/whatif.go): this
// package computes them and the CLI renders them, and the wire is the one
// contract between the two. The aliases keep this package's code in its
// own vocabulary.
type (
	Report        = api.Report
	SessionFile   = api.SessionFile
	SessionLine   = api.SessionLine
	Mark          = api.Mark
	Regime        = api.Regime
	Request       = api.Request
	Break         = api.Break
	Price         = api.Price
	Figures       = api.Figures
	Day           = api.Day
	UsageLine     = api.UsageLine
	Requests      = api.Requests
	Cycles        = api.Cycles
	Volume        = api.Volume
	Thinking      = api.Thinking
	Cache         = api.Cache
	Spend         = api.Spend
	Apart         = api.Apart
	BreakTotals   = api.BreakTotals
	CauseTotal    = api.CauseTotal
	Bindery       = api.Bindery
	Histogram     = api.Histogram
	WhatIf        = api.WhatIf
	WhatIfSession = api.WhatIfSession
	PolicyResult  = api.PolicyResult
)

const (
	LastTurnOnly  = api.LastTurnOnly
	KeepAll       = api.KeepAll
	UnknownRegime = api.UnknownRegime

	CauseCompaction = api.CauseCompaction
	CauseStrip      = api.CauseStrip
	CauseHost       = api.CauseHost
	CauseModel      = api.CauseModel
	CauseIdle       = api.CauseIdle
	CauseUnknown    = api.CauseUnknown

	MaxArchiveBreaks = api.MaxArchiveBreaks
)
