package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The team report's facts (issue 29, migration 017): one TeamFact per
// request the report counts, queued for the shared tier in the same
// transaction that records it here, so a fact is never recorded without
// being queued. A fact is not immutable: a session's branch moves and its
// break causes follow bindery's compile events, so a request's fact may
// change or be retracted (a zero fact: Requests 0). Each change gets a
// higher rev; the shared tier keeps, per machine and key, the fact of the
// highest rev, so a batch sent twice, or an older one sent late, changes
// nothing there.

// TeamHostScope is the scope of the host conversations' facts.
const TeamHostScope = "host:"

// TeamHostKey is the team key of a host conversation's accepted reply:
// compile ids are one machine's, so the key names the machine.
func TeamHostKey(machine, compile string) string { return TeamHostScope + machine + "/" + compile }

// MaxTeamFacts bounds one QueueTeamFacts call and one TeamOutbox read.
const MaxTeamFacts = 200000

// TeamFact is what the team report needs of one request. Money is in
// integer micro-USD, rounded once per request, so every sum of facts (per
// machine, person, client, day) is exact and the lines add up to the
// total to the micro-dollar. Person and client travel with the fact;
// the machine is the shipping store's.
type TeamFact struct {
	Key    string `json:"key"`
	Person string `json:"person"`
	Client string `json:"client"` // pi, claude-code, opencode, sdk...
	Day    string `json:"day"`    // the request's UTC day, "2026-12-01"
	Model  string `json:"model"`
	// Requests is 1 for a request, 0 for a retracted one (every figure 0);
	// Errored is 1 for an errored or aborted reply (billed, in Requests).
	Requests int64 `json:"requests"`
	Errored  int64 `json:"errored,omitempty"`
	// Tokens by kind; CacheWrite includes CacheWrite1h.
	Input        int64 `json:"input,omitempty"`
	Output       int64 `json:"output,omitempty"`
	CacheRead    int64 `json:"cacheRead,omitempty"`
	CacheWrite   int64 `json:"cacheWrite,omitempty"`
	CacheWrite1h int64 `json:"cacheWrite1h,omitempty"`
	// Spend in micro-USD, by kind where the price is split; SpendOther is
	// a price known only as a total (pi's cost.total alone). Unpriced is 1
	// when no price is known: its tokens count, its spend is 0.
	SpendInput  int64 `json:"spendInput,omitempty"`
	SpendOutput int64 `json:"spendOutput,omitempty"`
	SpendRead   int64 `json:"spendRead,omitempty"`
	SpendWrite  int64 `json:"spendWrite,omitempty"`
	SpendOther  int64 `json:"spendOther,omitempty"`
	Unpriced    int64 `json:"unpriced,omitempty"`
	// The request's cache break, if it is one (daemon/report's rule):
	// tokens rewritten, what they cost, the excess over reading them, and
	// that excess again when the cause is avoidable (strip, host, unknown).
	Breaks    int64 `json:"breaks,omitempty"`
	Rewritten int64 `json:"rewritten,omitempty"`
	BreakCost int64 `json:"breakCost,omitempty"`
	Excess    int64 `json:"excess,omitempty"`
	Avoidable int64 `json:"avoidable,omitempty"`
}

// Spend is the fact's whole spend in micro-USD.
func (f TeamFact) Spend() int64 {
	return f.SpendInput + f.SpendOutput + f.SpendRead + f.SpendWrite + f.SpendOther
}

// Retracted is the zero fact that replaces f when its request left the
// report (its branch moved).
func (f TeamFact) Retracted() TeamFact {
	return TeamFact{Key: f.Key, Person: f.Person, Client: f.Client, Day: f.Day, Model: f.Model}
}

// TeamScans is what was scanned per scope (a session id, TeamHostScope):
// the report's stamp of the session when its facts were queued.
func (d *DB) TeamScans(ctx context.Context) (map[string]string, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT scope, stamp FROM team_scan`)
	if err != nil {
		return nil, fmt.Errorf("team scans: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var scope, stamp string
		if err := rows.Scan(&scope, &stamp); err != nil {
			return nil, fmt.Errorf("team scans: %w", err)
		}
		out[scope] = stamp
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("team scans: %w", err)
	}
	return out, nil
}

// TeamScope is one scope's facts as they are now, to queue.
type TeamScope struct {
	Scope string
	// Stamp is remembered as the scope's (TeamScans); "" remembers none.
	Stamp string
	Facts []TeamFact
	// Whole says Facts are all the scope's facts: a key queued before and
	// absent from Facts is retracted. A scope given in parts (the host
	// conversations' accepts, which never change) sets it false.
	Whole bool
}

// QueueTeamFacts records the scopes' facts and queues those that changed,
// in one transaction: a fact equal to the one recorded is not queued
// again; with Whole, a recorded key the scope no longer has is retracted
// (queued as its zero fact). It returns how many were queued.
func (d *DB) QueueTeamFacts(ctx context.Context, scopes []TeamScope) (int, error) {
	n := 0
	for _, s := range scopes {
		n += len(s.Facts)
	}
	if n > MaxTeamFacts {
		return 0, fmt.Errorf("team facts: %d in one call, over the bound of %d", n, MaxTeamFacts)
	}
	queued := 0
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		queued = 0
		// rev: the time in microseconds, kept above every earlier rev so it
		// only increases even when the clock steps back.
		var last int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rev), 0) FROM team_facts`).Scan(&last); err != nil {
			return err
		}
		rev := max(time.Now().UnixMicro(), last+1)
		for _, s := range scopes {
			had := map[string]string{}
			rows, err := tx.QueryContext(ctx, `SELECT key, fact FROM team_facts WHERE scope = ?`, s.Scope)
			if err != nil {
				return err
			}
			for rows.Next() {
				var k, f string
				if err := rows.Scan(&k, &f); err != nil {
					rows.Close()
					return err
				}
				had[k] = f
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			put := func(f TeamFact) error {
				data, err := json.Marshal(f)
				if err != nil {
					return err
				}
				if old, ok := had[f.Key]; ok && old == string(data) {
					return nil
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO team_facts (key, scope, rev, fact) VALUES (?, ?, ?, ?)
					ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, rev = excluded.rev, fact = excluded.fact`, f.Key, s.Scope, rev, string(data)); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO team_outbox (key) VALUES (?)`, f.Key); err != nil {
					return err
				}
				queued++
				return nil
			}
			seen := make(map[string]bool, len(s.Facts))
			for _, f := range s.Facts {
				if f.Key == "" {
					return errors.New("a team fact without a key")
				}
				seen[f.Key] = true
				if err := put(f); err != nil {
					return err
				}
			}
			if s.Whole {
				for k, old := range had {
					if seen[k] {
						continue
					}
					var f TeamFact
					if err := json.Unmarshal([]byte(old), &f); err != nil {
						return fmt.Errorf("recorded fact %s: %w", k, err)
					}
					if err := put(f.Retracted()); err != nil {
						return err
					}
				}
			}
			if s.Stamp != "" {
				if _, err := tx.ExecContext(ctx, `INSERT INTO team_scan (scope, stamp) VALUES (?, ?)
					ON CONFLICT (scope) DO UPDATE SET stamp = excluded.stamp`, s.Scope, s.Stamp); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("queue team facts: %w", err)
	}
	return queued, nil
}

// TeamOutboxItem is one queued fact with its rev.
type TeamOutboxItem struct {
	Rev  int64
	Fact TeamFact
}

// TeamOutbox returns the facts of up to limit queued rows, oldest first,
// each key once (a key queued twice ships its current fact once), and the
// last row read: TeamShipped(upto) once they are shipped.
func (d *DB) TeamOutbox(ctx context.Context, limit int) (items []TeamOutboxItem, upto int64, err error) {
	if limit <= 0 || limit > MaxTeamFacts {
		return nil, 0, fmt.Errorf("team outbox: limit %d outside [1, %d]", limit, MaxTeamFacts)
	}
	rows, err := d.readers.QueryContext(ctx, `SELECT o.id, f.rev, f.fact FROM team_outbox o JOIN team_facts f ON f.key = o.key ORDER BY o.id LIMIT ?`, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("team outbox: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var it TeamOutboxItem
		var id int64
		var data string
		if err := rows.Scan(&id, &it.Rev, &data); err != nil {
			return nil, 0, fmt.Errorf("team outbox: %w", err)
		}
		upto = id
		if err := json.Unmarshal([]byte(data), &it.Fact); err != nil {
			return nil, 0, fmt.Errorf("team outbox: fact of row %d: %w", id, err)
		}
		if seen[it.Fact.Key] {
			continue // the same current fact and rev
		}
		seen[it.Fact.Key] = true
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("team outbox: %w", err)
	}
	return items, upto, nil
}

// TeamShipped deletes the queued rows up to id (shipped, in order).
func (d *DB) TeamShipped(ctx context.Context, upto int64) error {
	err := d.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM team_outbox WHERE id <= ?`, upto)
		return err
	})
	if err != nil {
		return fmt.Errorf("team outbox: %w", err)
	}
	return nil
}

// TeamOutboxLen is how many team facts wait to be shipped.
func (d *DB) TeamOutboxLen(ctx context.Context) (int, error) {
	var n int
	if err := d.readers.QueryRowContext(ctx, `SELECT count(*) FROM team_outbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("team outbox: %w", err)
	}
	return n, nil
}

// HostAcceptsUnqueued returns up to limit host conversations' accepted
// replies whose team fact (TeamHostKey(machine, compile)) is not recorded
// yet, oldest first. An accept's usage never changes (a compile's first
// stays), so each is queued once.
func (d *DB) HostAcceptsUnqueued(ctx context.Context, machine string, limit int) ([]AcceptUsage, error) {
	if limit <= 0 || limit > MaxTeamFacts {
		return nil, fmt.Errorf("host accepts: limit %d outside [1, %d]", limit, MaxTeamFacts)
	}
	rows, err := d.readers.QueryContext(ctx, `SELECT u.compile, u.conversation, u.branch, u.model, u.accepted_ms, u.input, u.output, u.cache_read, u.cache_write, u.cache_write_1h
		FROM accept_usage u
		WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = u.conversation)
		AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = u.conversation AND coalesce(c.session_file, '') != '')
		AND NOT EXISTS (SELECT 1 FROM team_facts f WHERE f.key = ? || u.compile)
		ORDER BY u.accepted_ms, u.compile LIMIT ?`, TeamHostKey(machine, ""), limit)
	if err != nil {
		return nil, fmt.Errorf("host accepts: %w", err)
	}
	defer rows.Close()
	var out []AcceptUsage
	for rows.Next() {
		var u AcceptUsage
		var in, outp, cr, cw, cw1 sql.NullInt64
		if err := rows.Scan(&u.Compile, &u.Conversation, &u.Branch, &u.Model, &u.AcceptedMs, &in, &outp, &cr, &cw, &cw1); err != nil {
			return nil, fmt.Errorf("host accepts: %w", err)
		}
		p := func(n sql.NullInt64) *int64 {
			if !n.Valid {
				return nil
			}
			return &n.Int64
		}
		u.Input, u.Output, u.CacheRead, u.CacheWrite, u.CacheWrite1h = p(in), p(outp), p(cr), p(cw), p(cw1)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("host accepts: %w", err)
	}
	return out, nil
}
