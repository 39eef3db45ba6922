package reporter

import (
	"context"
	"fmt"
	"time"

	"github.com/my-pi/bindery/daemon/report"
	"github.com/my-pi/bindery/db"
)

// TeamScopes is the team facts (issue 29) of the pi sessions whose
// report stamp differs from known's (db.TeamScans), each session whole,
// until about maxFacts facts: a large archive joining a team catches up
// over several calls. A session id that several files carry is taken
// once, from the file the report names first (its requests carry the same
// keys in every copy). more says sessions were left for the next call.
func (r *Reporter) TeamScopes(ctx context.Context, known map[string]string, person string, maxFacts int) (scopes []db.TeamScope, more bool, err error) {
	sessions, err := r.db.ReportSessions(ctx)
	if err != nil {
		return nil, false, err
	}
	seqs, err := r.compiles.Seqs(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("compile events: %w", err)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	n := 0
	done := map[string]bool{}
	for _, s := range sessions {
		if done[s.ID] {
			continue
		}
		done[s.ID] = true
		stamp := report.Stamp(s.Progress, seqs[s.ID], r.prices)
		if known[s.ID] == stamp {
			continue
		}
		if n >= maxFacts {
			return scopes, true, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		compiles, err := r.sessionCompiles(ctx, s.ID)
		if err != nil {
			return nil, false, err
		}
		in, _, err := r.input(ctx, source{file: s.File, id: s.ID, path: s.Path, version: s.Version, removed: s.Removed}, compiles)
		if err != nil {
			return nil, false, fmt.Errorf("team facts of session %s: %w", s.ID, err)
		}
		facts := report.SessionTeamFacts(in, report.Analyze(in, r.prices), r.prices, person, today)
		n += len(facts)
		scopes = append(scopes, db.TeamScope{Scope: s.ID, Stamp: stamp, Facts: facts, Whole: true})
	}
	return scopes, false, nil
}

// HostTeamFacts is the team facts of up to limit host accepts not queued
// yet (db.HostAcceptsUnqueued), priced by this report's table.
func (r *Reporter) HostTeamFacts(ctx context.Context, person, machine string, limit int) ([]db.TeamFact, error) {
	us, err := r.db.HostAcceptsUnqueued(ctx, machine, limit)
	if err != nil {
		return nil, err
	}
	out := make([]db.TeamFact, len(us))
	for i, u := range us {
		out[i] = report.HostTeamFact(u, r.prices, person, machine)
	}
	return out, nil
}
