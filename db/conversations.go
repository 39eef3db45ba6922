package db

import (
	"context"
	"fmt"
)

// HostConversation is a conversation no pi session names (no session
// file, and not a pi session's id, which bindery sessions lists): one a
// host named itself (bindery proxy's "claude-code:<session>", a script's own
// id), summed from its rows.
type HostConversation struct {
	ID        string
	Engaged   bool
	CreatedMs int64
	LastMs    int64 // the newest compile or accept
	Compiles  int
	Accepted  int
	Branches  int
	Stamps    int
	Releases  int
	// Retries counts the releases a host made after the provider refused
	// a block (bindery proxy's release, recompile and retry: reason host).
	Retries int
	// Replies and the token sums are the accepts' usage (accept_usage).
	Replies                              int
	Input, Output, CacheRead, CacheWrite int64
}

// maxHostConversations bounds the list: the newest first.
const maxHostConversations = 1000

// HostConversations lists the conversations of no pi session, the
// most recently active first, at most maxHostConversations.
func (d *DB) HostConversations(ctx context.Context) ([]HostConversation, error) {
	rows, err := d.readQuery(ctx, `SELECT c.id, c.engaged_compile IS NOT NULL, c.created_ms,
		coalesce((SELECT max(max(k.created_ms, coalesce(k.accepted_ms, 0))) FROM compiles k WHERE k.conversation = c.id), c.created_ms),
		(SELECT count(*) FROM compiles k WHERE k.conversation = c.id),
		(SELECT count(*) FROM compiles k WHERE k.conversation = c.id AND k.accepted_ms IS NOT NULL),
		(SELECT count(*) FROM branches b WHERE b.conversation = c.id),
		(SELECT count(*) FROM stamps s WHERE s.conversation = c.id),
		(SELECT count(*) FROM releases r WHERE r.conversation = c.id),
		(SELECT count(*) FROM releases r WHERE r.conversation = c.id AND r.reason = 'host'),
		(SELECT count(*) FROM accept_usage u WHERE u.conversation = c.id),
		(SELECT coalesce(sum(u.input), 0) FROM accept_usage u WHERE u.conversation = c.id),
		(SELECT coalesce(sum(u.output), 0) FROM accept_usage u WHERE u.conversation = c.id),
		(SELECT coalesce(sum(u.cache_read), 0) FROM accept_usage u WHERE u.conversation = c.id),
		(SELECT coalesce(sum(u.cache_write), 0) FROM accept_usage u WHERE u.conversation = c.id)
		FROM conversations c WHERE coalesce(c.session_file, '') = ''
		AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.id)
		ORDER BY 4 DESC, c.id LIMIT ?`, maxHostConversations)
	if err != nil {
		return nil, fmt.Errorf("host conversations: %w", err)
	}
	defer rows.Close()
	var out []HostConversation
	for rows.Next() {
		var h HostConversation
		if err := rows.Scan(&h.ID, &h.Engaged, &h.CreatedMs, &h.LastMs, &h.Compiles, &h.Accepted, &h.Branches, &h.Stamps, &h.Releases,
			&h.Retries, &h.Replies, &h.Input, &h.Output, &h.CacheRead, &h.CacheWrite); err != nil {
			return nil, fmt.Errorf("host conversations: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("host conversations: %w", err)
	}
	return out, nil
}
