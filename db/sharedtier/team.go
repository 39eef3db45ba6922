package sharedtier

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/my-pi/bindery/db"
)

// The team report (migration 004): facts shipped per request, rollups
// kept per day, machine, person, client and model, read by the report.

// Bounds on what a fact may name: a longer one is a bug or an attack, and
// is refused with the batch (the batch stays queued; the log says why).
const (
	MaxTeamKey  = 1024
	MaxTeamName = 256 // person, client, model
	// MaxTeamLines bounds one report read (its lines over every grouping);
	// a narrower --since bounds it further.
	MaxTeamLines = 200000
)

// teamCounters are the summed columns, in db.TeamFact's order (counters).
var teamCounters = []string{"requests", "errored", "input", "output", "cache_read", "cache_write", "cache_write_1h",
	"spend_input", "spend_output", "spend_read", "spend_write", "spend_other", "unpriced",
	"breaks", "rewritten", "break_cost", "excess", "avoidable"}

// counters are f's summed figures, in teamCounters' order.
func counters(f *db.TeamFact) []*int64 {
	return []*int64{&f.Requests, &f.Errored, &f.Input, &f.Output, &f.CacheRead, &f.CacheWrite, &f.CacheWrite1h,
		&f.SpendInput, &f.SpendOutput, &f.SpendRead, &f.SpendWrite, &f.SpendOther, &f.Unpriced,
		&f.Breaks, &f.Rewritten, &f.BreakCost, &f.Excess, &f.Avoidable}
}

var (
	teamDims   = []string{"machine", "key", "rev", "person", "client", "day", "model"}
	teamInCols = append(append([]string{}, teamDims...), teamCounters...)
	// sqlReplace inserts the batch's facts, replacing only this machine's
	// own of a lower rev, and keeps what it wrote in team_new.
	sqlReplace = func() string {
		set := make([]string, 0, len(teamInCols))
		for _, c := range teamInCols[2:] {
			set = append(set, c+" = excluded."+c)
		}
		cols := strings.Join(teamInCols, ", ")
		return `WITH up AS (INSERT INTO team_requests (` + cols + `) SELECT ` + cols + ` FROM team_in
ON CONFLICT (key) DO UPDATE SET ` + strings.Join(set, ", ") + `, shipped = now()
WHERE team_requests.machine = excluded.machine AND team_requests.rev < excluded.rev
RETURNING ` + cols + `) INSERT INTO team_new SELECT ` + cols + ` FROM up`
	}()
	// sqlDelta adds the new facts' figures to the rollups and takes out
	// those of the facts they replaced.
	sqlDelta = func() string {
		pos, neg, set := make([]string, len(teamCounters)), make([]string, len(teamCounters)), make([]string, len(teamCounters))
		sum := make([]string, len(teamCounters))
		for i, c := range teamCounters {
			pos[i], neg[i], sum[i] = c, "-"+c, "sum("+c+")"
			set[i] = c + " = team_rollup." + c + " + excluded." + c
		}
		return `INSERT INTO team_rollup (day, machine, person, client, model, ` + strings.Join(teamCounters, ", ") + `)
SELECT day, machine, person, client, model, ` + strings.Join(sum, ", ") + ` FROM (
  SELECT day, machine, person, client, model, ` + strings.Join(pos, ", ") + ` FROM team_new
  UNION ALL
  SELECT day, machine, person, client, model, ` + strings.Join(neg, ", ") + ` FROM team_old WHERE key IN (SELECT key FROM team_new)
) d GROUP BY day, machine, person, client, model
ON CONFLICT (day, machine, person, client, model) DO UPDATE SET ` + strings.Join(set, ", ")
	}()
)

// PutTeamFacts ships team facts in one transaction. A request's key
// means the same on every machine (a pi session's entry; a host's
// compile, which names its machine), so a session continued on a second
// machine from synced files is counted once: the first machine to ship a
// key owns it, and only it replaces the key's fact, and only with a
// higher rev. The rollups take the difference (the old fact's figures
// out, the new one's in), so a batch sent twice, an older batch sent
// after a newer one, or another machine's copy of a request changes
// nothing. It returns how many facts changed.
//
// Batches of one machine are serialised by an advisory lock, so the facts
// it owns do not change under it; machines race only for new keys, which
// ON CONFLICT settles, and the rollups take only what was written. A
// machine's rollup rows carry its name, so machines never wait on each
// other's.
func (s *Store) PutTeamFacts(ctx context.Context, items []db.TeamOutboxItem) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	if len(items) > db.MaxTeamFacts {
		return 0, fmt.Errorf("shared tier: %d team facts in one batch, over the bound of %d", len(items), db.MaxTeamFacts)
	}
	src := make([][]any, len(items))
	seen := make(map[string]bool, len(items))
	for i := range items {
		f := items[i].Fact
		if err := CheckTeamFact(f); err != nil {
			return 0, err
		}
		if seen[f.Key] {
			return 0, fmt.Errorf("shared tier: team fact %q twice in one batch", f.Key)
		}
		seen[f.Key] = true
		day, _ := time.Parse(time.DateOnly, f.Day)
		row := []any{s.machine, f.Key, items[i].Rev, f.Person, f.Client, day, f.Model}
		for _, c := range counters(&f) {
			row = append(row, *c)
		}
		src[i] = row
	}
	changed := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('bindery team ' || $1))`, s.machine); err != nil {
			return err
		}
		// The work tables live as long as the connection and are emptied
		// at each commit: made once, not at every batch (a catalog change
		// per batch costs more than the batch's rows).
		for _, t := range []string{"team_in", "team_new", "team_old"} {
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS `+t+` (LIKE team_requests INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
				return err
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"team_in"}, teamInCols, pgx.CopyFromRows(src)); err != nil {
			return err
		}
		// The facts of this machine that the batch replaces, read before
		// it does (the lock keeps them as read).
		if _, err := tx.Exec(ctx, `INSERT INTO team_old SELECT r.* FROM team_requests r JOIN team_in i ON i.key = r.key
			WHERE r.machine = $1 AND r.rev < i.rev`, s.machine); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlReplace)
		if err != nil {
			return fmt.Errorf("facts: %w", err)
		}
		changed = int(tag.RowsAffected())
		if changed == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlDelta); err != nil {
			return fmt.Errorf("rollups: %w", err)
		}
		return nil
	})
	return changed, err
}

// CheckTeamFact says why the tier would refuse f (a batch holding it is
// refused whole), nil when it would not.
func CheckTeamFact(f db.TeamFact) error {
	if f.Key == "" || len(f.Key) > MaxTeamKey {
		return fmt.Errorf("shared tier: a team fact's key is %d bytes, outside [1, %d]", len(f.Key), MaxTeamKey)
	}
	for _, n := range []struct{ what, v string }{{"person", f.Person}, {"client", f.Client}, {"model", f.Model}} {
		if len(n.v) > MaxTeamName {
			return fmt.Errorf("shared tier: team fact %q: its %s is %d bytes, over %d", f.Key, n.what, len(n.v), MaxTeamName)
		}
	}
	if _, err := time.Parse(time.DateOnly, f.Day); err != nil {
		return fmt.Errorf("shared tier: team fact %q: day %q is not YYYY-MM-DD", f.Key, f.Day)
	}
	return nil
}

// TeamLine is one line of the team report as the rollups sum it: By names
// its grouping ("total", "machine", "person", "client", "day", "model",
// "day+machine"), the dimension fields it groups by are set, and Sums
// holds the figures (its Key, Person, Client, Day and Model are empty).
type TeamLine struct {
	By                                  string
	Day, Machine, Person, Client, Model string
	Sums                                db.TeamFact
}

// teamSets are the groupings read, with the bits grouping() gives each
// (a bit is 1 for a column summed over: day, machine, person, client,
// model, from the high bit down).
var teamSets = []struct {
	by   string
	cols string
	bits int
}{
	{"total", "()", 0b11111},
	{"machine", "(machine)", 0b10111},
	{"person", "(person)", 0b11011},
	{"client", "(client)", 0b11101},
	{"day", "(day)", 0b01111},
	{"model", "(model)", 0b11110},
	{"day+machine", "(day, machine)", 0b00111},
}

func teamQuery(table string) string {
	sets := make([]string, len(teamSets))
	for i, s := range teamSets {
		sets[i] = s.cols
	}
	sum := make([]string, len(teamCounters))
	for i, c := range teamCounters {
		sum[i] = "coalesce(sum(" + c + "), 0)::bigint"
	}
	return `SELECT grouping(day, machine, person, client, model), coalesce(to_char(day, 'YYYY-MM-DD'), ''), coalesce(machine, ''), coalesce(person, ''), coalesce(client, ''), coalesce(model, ''), ` +
		strings.Join(sum, ", ") + ` FROM ` + table + ` WHERE day BETWEEN $1 AND $2
GROUP BY GROUPING SETS (` + strings.Join(sets, ", ") + `) HAVING sum(requests) > 0 OR grouping(day, machine, person, client, model) = 31
LIMIT ` + fmt.Sprint(MaxTeamLines+1)
}

var sqlTeamRollups = teamQuery("team_rollup")

// TeamReport reads the rollups of the days from since to until (UTC,
// "YYYY-MM-DD"; "" is unbounded): the total, and a line per machine,
// person, client, day, model, and day and machine. Lines of retracted
// requests only (all zero) are left out. The groupings are sums of the
// same integer rollups, so each adds up to the total exactly.
func (s *Store) TeamReport(ctx context.Context, since, until string) ([]TeamLine, error) {
	return s.teamReport(ctx, sqlTeamRollups, since, until)
}

func (s *Store) teamReport(ctx context.Context, query, since, until string) ([]TeamLine, error) {
	from, to, err := dayRange(since, until)
	if err != nil {
		return nil, err
	}
	var out []TeamLine
	err = s.tx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, query, from, to)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l TeamLine
			var bits int
			dst := []any{&bits, &l.Day, &l.Machine, &l.Person, &l.Client, &l.Model}
			for _, c := range counters(&l.Sums) {
				dst = append(dst, c)
			}
			if err := rows.Scan(dst...); err != nil {
				return err
			}
			for _, st := range teamSets {
				if st.bits == bits {
					l.By = st.by
				}
			}
			if l.By == "" {
				return fmt.Errorf("team report: an unknown grouping %05b", bits)
			}
			if len(out) == MaxTeamLines {
				return fmt.Errorf("team report: over %d lines; name fewer days (--since)", MaxTeamLines)
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

func dayRange(since, until string) (time.Time, time.Time, error) {
	from, to := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	var err error
	if since != "" {
		if from, err = time.Parse(time.DateOnly, since); err != nil {
			return from, to, fmt.Errorf("team report: since %q is not YYYY-MM-DD", since)
		}
	}
	if until != "" {
		if to, err = time.Parse(time.DateOnly, until); err != nil {
			return from, to, fmt.Errorf("team report: until %q is not YYYY-MM-DD", until)
		}
	}
	if to.Before(from) {
		return from, to, fmt.Errorf("team report: until %s is before since %s", until, since)
	}
	return from, to, nil
}
