package daemon

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"time"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/daemon/report/reporter"
	"github.com/my-pi/bindery/db"
	"github.com/my-pi/bindery/db/sharedtier"
)

// The team's report (issue 29). With --shared, the shipper also ships
// the report's facts: every --team-scan (30 s) it recomputes the team facts of
// the pi sessions whose report stamp changed and of the host accepts not
// yet queued (reporter.TeamScopes, HostTeamFacts), queues those that
// changed (db.QueueTeamFacts: same transaction as their record), and ships
// the queue in batches of teamBatch (sharedtier.PutTeamFacts: a batch sent
// twice changes nothing). GET /v1/report/team reads the tier's rollups.
const (
	teamBatch = 2000
	// teamScanFacts bounds one scan's facts: a large archive joining a
	// team is queued over several scans, none holding the writer long.
	teamScanFacts = 20000
	teamHostFacts = 5000
)

// osUser is the OS user running the daemon: the default --person.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// teamFacts keeps this machine's team facts queued.
type teamFacts struct {
	rep     *reporter.Reporter
	store   *db.DB
	person  string
	machine string
	log     *slog.Logger
	every   time.Duration
	next    time.Time // the next scan
}

// scan queues the facts that changed since the last scan; more says an
// archive too large for one scan has more to queue (the next scan comes
// at once).
func (t *teamFacts) scan(ctx context.Context) (queued int, more bool, err error) {
	known, err := t.store.TeamScans(ctx)
	if err != nil {
		return 0, false, err
	}
	scopes, more, err := t.rep.TeamScopes(ctx, known, t.person, teamScanFacts)
	if err != nil {
		return 0, false, err
	}
	host, err := t.rep.HostTeamFacts(ctx, t.person, t.machine, teamHostFacts)
	if err != nil {
		return 0, false, err
	}
	if len(host) == teamHostFacts {
		more = true
	}
	if len(host) > 0 {
		scopes = append(scopes, db.TeamScope{Scope: db.TeamHostScope, Facts: host})
	}
	// one transaction per bounded group of whole scopes
	for len(scopes) > 0 {
		n, i := 0, 0
		for i < len(scopes) && (i == 0 || n+len(scopes[i].Facts) <= teamScanFacts) {
			n += len(scopes[i].Facts)
			i++
		}
		q, err := t.store.QueueTeamFacts(ctx, scopes[:i])
		if err != nil {
			return queued, false, err
		}
		queued += q
		scopes = scopes[i:]
	}
	return queued, more, nil
}

// shipTeam scans when a scan is due, then ships the queued team facts.
// A scan's failure is this machine's, not the tier's: it is logged and
// shipping goes on.
func (s *shipper) shipTeam(ctx context.Context) error {
	t := s.team
	if t == nil {
		return nil
	}
	if now := time.Now(); !now.Before(t.next) {
		t.next = now.Add(t.every)
		n, more, err := t.scan(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			t.log.Warn("team report: facts not queued; the next scan retries", "err", err)
		case more:
			t.next = now // an archive catching up: the next tick goes on
		}
		if n > 0 {
			t.log.Debug("team report: facts queued", "facts", n)
		}
	}
	for {
		items, upto, err := s.store.TeamOutbox(ctx, teamBatch)
		if err != nil || upto == 0 {
			return err
		}
		// A fact the tier would refuse would hold the whole queue (and
		// the stamps after it) forever: it is dropped, and said.
		ok := items[:0]
		for _, it := range items {
			if err := sharedtier.CheckTeamFact(it.Fact); err != nil {
				s.log.Warn("team report: a fact not shipped", "err", err)
				continue
			}
			ok = append(ok, it)
		}
		if _, err := s.shared.PutTeamFacts(ctx, ok); err != nil {
			return err
		}
		if err := s.store.TeamShipped(ctx, upto); err != nil {
			return err
		}
	}
}

// wireTeam adds GET /v1/report/team and, with --shared, the team facts to
// the shipper. Without --shared the endpoint says how to join a tier.
func (d *daemon) wireTeam(s *api.Server, rep *reporter.Reporter) {
	s.Team = teamSource{shared: d.shared}
	if d.ship != nil {
		d.ship.team = &teamFacts{rep: rep, store: d.store, person: d.cfg.Person, machine: d.cfg.Machine, every: d.cfg.TeamScan, log: d.log.With("component", "team")}
	}
}

type teamSource struct{ shared *sharedtier.Store }

// teamReadTimeout bounds a report's read of the tier: a server that is
// away answers an error, not a hung CLI.
const teamReadTimeout = 20 * time.Second

func (t teamSource) TeamReport(ctx context.Context, q api.TeamQuery) (api.TeamReport, error) {
	if t.shared == nil {
		return api.TeamReport{}, api.Errorf(api.CodeUnavailable, "this daemon has joined no shared tier: the team's report needs bindery serve --shared DSN (README, \"Sharing across machines\")")
	}
	ctx, cancel := context.WithTimeout(ctx, teamReadTimeout)
	defer cancel()
	if err := t.shared.Ready(ctx); err != nil {
		return api.TeamReport{}, api.Errorf(api.CodeUnavailable, "the shared tier: %v", err)
	}
	lines, err := t.shared.TeamReport(ctx, q.Since, q.Until)
	if err != nil {
		return api.TeamReport{}, api.Errorf(api.CodeUnavailable, "the shared tier: %v", err)
	}
	rep := teamReport(lines)
	rep.Shared, rep.Since, rep.Until = t.shared.Name(), q.Since, q.Until
	return rep, nil
}

// teamReport is the wire report of the tier's rollup lines.
func teamReport(lines []sharedtier.TeamLine) api.TeamReport {
	rep := api.TeamReport{Version: api.TeamReportFormat, Unit: "micro-USD",
		Machines: []api.TeamLine{}, People: []api.TeamLine{}, Clients: []api.TeamLine{}, Models: []api.TeamLine{}, Days: []api.TeamLine{}, DayMachines: []api.TeamCell{}}
	for _, l := range lines {
		f := teamFigures(l.Sums)
		switch l.By {
		case "total":
			rep.Total = f
		case "machine":
			rep.Machines = append(rep.Machines, api.TeamLine{Name: l.Machine, TeamFigures: f})
		case "person":
			rep.People = append(rep.People, api.TeamLine{Name: l.Person, TeamFigures: f})
		case "client":
			rep.Clients = append(rep.Clients, api.TeamLine{Name: l.Client, TeamFigures: f})
		case "model":
			rep.Models = append(rep.Models, api.TeamLine{Name: l.Model, TeamFigures: f})
		case "day":
			rep.Days = append(rep.Days, api.TeamLine{Name: l.Day, TeamFigures: f})
		case "day+machine":
			rep.DayMachines = append(rep.DayMachines, api.TeamCell{Day: l.Day, Machine: l.Machine, TeamFigures: f})
		}
	}
	bySpend := func(a, b api.TeamLine) int {
		return cmp.Or(cmp.Compare(b.Spend.Total, a.Spend.Total), cmp.Compare(a.Name, b.Name))
	}
	for _, ls := range [][]api.TeamLine{rep.Machines, rep.People, rep.Clients, rep.Models} {
		slices.SortFunc(ls, bySpend)
	}
	slices.SortFunc(rep.Days, func(a, b api.TeamLine) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(rep.DayMachines, func(a, b api.TeamCell) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Machine, b.Machine))
	})
	return rep
}

func teamFigures(s db.TeamFact) api.TeamFigures {
	f := api.TeamFigures{Requests: s.Requests, Errored: s.Errored,
		Input: s.Input, Output: s.Output, CacheRead: s.CacheRead, CacheWrite: s.CacheWrite, CacheWrite1h: s.CacheWrite1h,
		Spend:    api.TeamSpend{Input: s.SpendInput, Output: s.SpendOutput, CacheRead: s.SpendRead, CacheWrite: s.SpendWrite, Other: s.SpendOther, Total: s.Spend()},
		Unpriced: s.Unpriced,
		Breaks:   api.TeamBreaks{Count: s.Breaks, Rewritten: s.Rewritten, Cost: s.BreakCost, Excess: s.Excess, Avoidable: s.Avoidable}}
	if p := s.Input + s.CacheRead + s.CacheWrite; p > 0 {
		f.HitRatio = float64(s.CacheRead) / float64(p)
	}
	return f
}
