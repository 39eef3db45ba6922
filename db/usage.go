package db

import (
	"context"
	"database/sql"
	"fmt"
)

// AcceptUsage is the usage one accepted reply carried (table accept_usage,
// migration 014). A nil count is one the usage did not give.
type AcceptUsage struct {
	Compile      string
	Conversation string
	Branch       string
	Model        string
	AcceptedMs   int64
	Input        *int64
	Output       *int64
	CacheRead    *int64
	CacheWrite   *int64 // every cache write, the 1-hour ones included
	CacheWrite1h *int64
}

// InsertAcceptUsage records an accept's usage; a compile's first stays
// (an accept repeated records nothing twice).
func (t *Tx) InsertAcceptUsage(ctx context.Context, u AcceptUsage) error {
	n := func(p *int64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	_, err := txExec(ctx, t.tx, `INSERT INTO accept_usage (compile, conversation, branch, model, accepted_ms, input, output, cache_read, cache_write, cache_write_1h)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (compile) DO NOTHING`,
		u.Compile, u.Conversation, u.Branch, u.Model, u.AcceptedMs, n(u.Input), n(u.Output), n(u.CacheRead), n(u.CacheWrite), n(u.CacheWrite1h))
	if err != nil {
		return fmt.Errorf("usage of compile %s: %w", u.Compile, err)
	}
	return nil
}

// HostUsage is the usage of one conversation's replies with one model,
// summed: a conversation no pi session names (HostConversations' rule),
// whose replies only their accepts report.
type HostUsage struct {
	Conversation string
	Model        string
	Day          string // the UTC day of the accepts, "2026-12-01"
	Replies      int
	// Missing counts replies whose usage lacked input, cache read or cache
	// write: their known counts are in the sums.
	Missing      int
	Input        int64
	Output       int64
	CacheRead    int64
	CacheWrite   int64
	CacheWrite1h int64
	FirstMs      int64
	LastMs       int64
}

// HostUsages sums accept_usage by conversation, model and UTC day, for the
// conversations of no pi session, the most recently active first.
func (d *DB) HostUsages(ctx context.Context) ([]HostUsage, error) {
	rows, err := d.readQuery(ctx, `SELECT u.conversation, u.model, date(u.accepted_ms / 1000, 'unixepoch'), count(*),
		sum(u.input IS NULL OR u.cache_read IS NULL OR u.cache_write IS NULL),
		coalesce(sum(u.input), 0), coalesce(sum(u.output), 0), coalesce(sum(u.cache_read), 0),
		coalesce(sum(u.cache_write), 0), coalesce(sum(u.cache_write_1h), 0), min(u.accepted_ms), max(u.accepted_ms)
		FROM accept_usage u
		WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = u.conversation)
		AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = u.conversation AND coalesce(c.session_file, '') != '')
		GROUP BY 1, 2, 3 ORDER BY max(u.accepted_ms) DESC, u.conversation, u.model, 3`)
	if err != nil {
		return nil, fmt.Errorf("host usage: %w", err)
	}
	defer rows.Close()
	var out []HostUsage
	for rows.Next() {
		var h HostUsage
		var missing sql.NullInt64
		if err := rows.Scan(&h.Conversation, &h.Model, &h.Day, &h.Replies, &missing, &h.Input, &h.Output, &h.CacheRead, &h.CacheWrite, &h.CacheWrite1h, &h.FirstMs, &h.LastMs); err != nil {
			return nil, fmt.Errorf("host usage: %w", err)
		}
		h.Missing = int(missing.Int64)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("host usage: %w", err)
	}
	return out, nil
}
