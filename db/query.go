package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// Session is one session file as the index knows it.
type Session struct {
	File          int64 // files.id
	ID            string
	Path          string
	Cwd           string
	Version       int
	ParentSession string
	HeaderTime    string
	Removed       bool
	Entries       int
	Thinking      int
	Leaf          string // pi's current leaf: the last entry in file order
	LastActivity  string
	Offset        int64 // bytes of the file ingested
	// Engaged, Stamps and Releases are the binding state of the
	// conversation named by the session id (the same rows GET
	// /v1/conversations/{id} reads): a session and its conversation are
	// one thing to a pi user, so the two views must never disagree.
	// Engaged is the conversation's own engagement, as that view shows it.
	Engaged  bool
	Stamps   int
	Releases int
}

// sessionColumns reads the binding state from its own tables in the same
// query: it is written by the binder, never by ingest, so it cannot be a
// column of sessions without two writers keeping one fact.
const sessionColumns = `s.file, s.id, f.path, s.cwd, s.version, coalesce(s.parent_session, ''), coalesce(s.header_time, ''),
	s.removed, s.entries, s.thinking, coalesce(s.leaf, ''), coalesce(s.last_activity, ''), f.offset,
	EXISTS (SELECT 1 FROM conversations c WHERE c.id = s.id AND c.engaged_compile IS NOT NULL),
	(SELECT count(*) FROM stamps st WHERE st.conversation = s.id),
	(SELECT count(*) FROM releases r WHERE r.conversation = s.id)`

func scanSession(sc interface{ Scan(...any) error }) (Session, error) {
	var s Session
	err := sc.Scan(&s.File, &s.ID, &s.Path, &s.Cwd, &s.Version, &s.ParentSession, &s.HeaderTime,
		&s.Removed, &s.Entries, &s.Thinking, &s.Leaf, &s.LastActivity, &s.Offset,
		&s.Engaged, &s.Stamps, &s.Releases)
	return s, err
}

// Sessions lists every session, most recently active first. Removed ones
// are included only when withRemoved is set.
func (d *DB) Sessions(ctx context.Context, withRemoved bool) ([]Session, error) {
	q := `SELECT ` + sessionColumns + ` FROM sessions s JOIN files f ON f.id = s.file`
	if !withRemoved {
		q += ` WHERE s.removed = 0`
	}
	q += ` ORDER BY s.last_activity DESC, s.file DESC`
	rows, err := d.readers.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// sameIDOrder is the order of the files carrying one session id: Session
// picks the first (live before removed, then the latest last activity, a
// tie going to the file ingested last) and SessionFiles lists them in it.
const sameIDOrder = ` ORDER BY s.removed, s.last_activity DESC, s.file DESC`

const sessionByID = `SELECT ` + sessionColumns + ` FROM sessions s JOIN files f ON f.id = s.file
	WHERE s.id = ?` + sameIDOrder + ` LIMIT 1`

// SessionFile is one file whose header carries a given session id.
type SessionFile struct {
	Path         string
	Removed      bool
	LastActivity string
}

// SessionFiles lists every file whose header carries session id id, the
// one Session picks first. More than one means the file was copied (pi's
// ids are unique per session); none means the id is unknown.
func (d *DB) SessionFiles(ctx context.Context, id string) ([]SessionFile, error) {
	return sessionFiles(ctx, d.readers, id)
}

func sessionFiles(ctx context.Context, q querier, id string) ([]SessionFile, error) {
	rows, err := q.QueryContext(ctx, `SELECT f.path, s.removed, coalesce(s.last_activity, '')
		FROM sessions s JOIN files f ON f.id = s.file WHERE s.id = ?`+sameIDOrder, id)
	if err != nil {
		return nil, fmt.Errorf("files of session %q: %w", id, err)
	}
	defer rows.Close()
	var out []SessionFile
	for rows.Next() {
		var f SessionFile
		if err := rows.Scan(&f.Path, &f.Removed, &f.LastActivity); err != nil {
			return nil, fmt.Errorf("files of session %q: %w", id, err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("files of session %q: %w", id, err)
	}
	return out, nil
}

// Session finds a session by pi's id. Should two files carry the same id
// (a copied file), the live one most recently active wins, a tie going to
// the file ingested last; SessionFiles lists them all.
func (d *DB) Session(ctx context.Context, id string) (Session, error) {
	s, err := scanSession(d.readRow(ctx, sessionByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("session %q: %w", id, err)
	}
	return s, nil
}

// Cursors returns the saved cursor of every live file: what the watcher
// resumes from.
func (d *DB) Cursors(ctx context.Context) ([]Cursor, error) {
	rows, err := d.readers.QueryContext(ctx, `SELECT path, dev, ino, offset, lines, check_digest FROM files WHERE removed = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("cursors: %w", err)
	}
	defer rows.Close()
	var out []Cursor
	for rows.Next() {
		var c Cursor
		var dev, ino int64
		if err := rows.Scan(&c.Path, &dev, &ino, &c.Offset, &c.Lines, &c.Check); err != nil {
			return nil, fmt.Errorf("cursors: %w", err)
		}
		c.Dev, c.Ino = uint64(dev), uint64(ino)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cursors: %w", err)
	}
	return out, nil
}

// Stats are whole-database counts for the health endpoint.
type Stats struct {
	Files, Sessions, RemovedSessions int
	Entries, ThinkingBlocks          int64
	IngestErrors                     int64
	IngestedBytes                    int64 // sum of the live files' offsets
	LastEvent                        int64 // newest event seq
}

// Stats counts what the index holds.
func (d *DB) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := d.readers.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM files WHERE removed = 0),
		(SELECT count(*) FROM sessions WHERE removed = 0),
		(SELECT count(*) FROM sessions WHERE removed = 1),
		(SELECT coalesce(sum(entries), 0) FROM sessions),
		(SELECT coalesce(sum(thinking), 0) FROM sessions),
		(SELECT count(*) FROM ingest_errors),
		(SELECT coalesce(sum(offset), 0) FROM files WHERE removed = 0),
		(SELECT coalesce(max(seq), 0) FROM events)`).Scan(
		&s.Files, &s.Sessions, &s.RemovedSessions, &s.Entries, &s.ThinkingBlocks, &s.IngestErrors, &s.IngestedBytes, &s.LastEvent)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}

// Branch is one leaf of a session's tree and the path that ends in it.
type Branch struct {
	Leaf      string // id of the leaf entry
	Seq       int64  // the leaf's ingest seq
	Depth     int    // entries on the path root..leaf
	Timestamp string // the leaf's timestamp
	Current   bool   // the leaf is pi's current leaf (last in file order)
	// Frontier is pi-condense's context-prune-frontier in force on this
	// branch: the last one on the path, or nil.
	Frontier *FrontierEntry
}

// FrontierEntry is one context-prune-frontier snapshot.
type FrontierEntry struct {
	Entry     string // entry id
	Seq       int64
	Timestamp string
	Data      json.RawMessage // pi-condense's PruneFrontier, verbatim
}

// Tree is a session's tree, derived from the stored entries. A Tree is
// never changed once returned: Extend makes a new one, so trees can be
// cached and shared between readers.
type Tree struct {
	file     int64
	maxSeq   int64
	nodes    []treeNode
	byID     map[string]int // last entry with each id (pi's byId map)
	hasChild []bool
	up       []int32 // each node's parent (-1: a root), parentId cycles cut (walk.go)
	cycles   []*cycle
	frontier map[int]*FrontierEntry

	branchesOnce sync.Once
	branches     []Branch
}

type treeNode struct {
	seq       int64
	id        string
	parent    string
	timestamp string
}

// Tree loads the tree of one file's entries: (seq, id, parent) of each plus
// the frontier snapshots. Memory is proportional to the one session.
func (d *DB) Tree(ctx context.Context, file int64) (*Tree, error) {
	return loadTree(ctx, d.readers, file, nil)
}

// SessionTree reads a session, its tree and the files that carry its id
// (SessionFiles) in one read transaction, so the counters, the tree and
// which file is the session describe the same committed state (a file
// ingested between two reads once showed one file as the session and
// listed another first). When prev
// is the tree of the same file from an earlier call, only the entries
// added since are read (a rewritten file is detected and read whole).
func (d *DB) SessionTree(ctx context.Context, id string, prev *Tree) (Session, *Tree, []SessionFile, error) {
	tx, err := d.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Session{}, nil, nil, fmt.Errorf("session %q: %w", id, err)
	}
	defer tx.Rollback()
	s, err := scanSession(tx.QueryRowContext(ctx, sessionByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, nil, nil, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, nil, nil, fmt.Errorf("session %q: %w", id, err)
	}
	files, err := sessionFiles(ctx, tx, id)
	if err != nil {
		return Session{}, nil, nil, err
	}
	if prev != nil && prev.file == s.File && len(prev.nodes) <= s.Entries {
		t, err := loadTree(ctx, tx, s.File, prev)
		if err != nil {
			return Session{}, nil, nil, err
		}
		if len(t.nodes) == s.Entries {
			for _, c := range t.cycles {
				d.reportCycle(c)
			}
			return s, t, files, nil
		}
		// Rows went away (a rewrite): read the file's rows afresh.
	}
	t, err := loadTree(ctx, tx, s.File, nil)
	if err != nil {
		return Session{}, nil, nil, err
	}
	for _, c := range t.cycles {
		d.reportCycle(c)
	}
	return s, t, files, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// loadTree reads a file's entries after prev's last one (all of them when
// prev is nil) and returns prev extended by them.
func loadTree(ctx context.Context, q querier, file int64, prev *Tree) (*Tree, error) {
	var after int64
	if prev != nil {
		after = prev.maxSeq
	}
	// INDEXED BY: without statistics SQLite may prefer scanning every
	// entry in seq order to using the file index.
	rows, err := q.QueryContext(ctx, `SELECT seq, id, coalesce(parent_id, ''), coalesce(timestamp, '')
		FROM entries INDEXED BY entries_file WHERE file = ? AND seq > ? ORDER BY seq`, file, after)
	if err != nil {
		return nil, fmt.Errorf("tree of file %d: %w", file, err)
	}
	defer rows.Close()
	var t *Tree
	first := 0
	for rows.Next() {
		var n treeNode
		if err := rows.Scan(&n.seq, &n.id, &n.parent, &n.timestamp); err != nil {
			return nil, fmt.Errorf("tree of file %d: %w", file, err)
		}
		if t == nil {
			t = &Tree{file: file, byID: map[string]int{}, frontier: map[int]*FrontierEntry{}}
			if prev != nil {
				// Clipped copies: appending must never write into prev's
				// arrays, which other readers may be using.
				t.maxSeq = prev.maxSeq
				t.nodes = slices.Clip(prev.nodes)
				t.byID = maps.Clone(prev.byID)
				t.frontier = maps.Clone(prev.frontier)
			}
			first = len(t.nodes)
		}
		t.byID[n.id] = len(t.nodes)
		t.nodes = append(t.nodes, n)
		t.maxSeq = n.seq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tree of file %d: %w", file, err)
	}
	rows.Close()
	switch {
	case t == nil && prev != nil:
		return prev, nil // nothing new: trees are never changed, so share it
	case t == nil:
		return &Tree{file: file, byID: map[string]int{}, frontier: map[int]*FrontierEntry{}}, nil
	}
	// Every node is relinked: a repeated id moves pi's byId entry, which
	// re-parents earlier children, and a new entry can close a cycle.
	t.link()
	frows, err := q.QueryContext(ctx, `SELECT entry, data FROM frontier WHERE file = ? AND entry >= ? ORDER BY entry`, file, t.nodes[first].seq)
	if err != nil {
		return nil, fmt.Errorf("frontier of file %d: %w", file, err)
	}
	defer frows.Close()
	i := first
	for frows.Next() {
		var seq int64
		var data string
		if err := frows.Scan(&seq, &data); err != nil {
			return nil, fmt.Errorf("frontier of file %d: %w", file, err)
		}
		for i < len(t.nodes) && t.nodes[i].seq < seq {
			i++
		}
		if i < len(t.nodes) && t.nodes[i].seq == seq {
			n := t.nodes[i]
			t.frontier[i] = &FrontierEntry{Entry: n.id, Seq: n.seq, Timestamp: n.timestamp, Data: json.RawMessage(data)}
		}
	}
	if err := frows.Err(); err != nil {
		return nil, fmt.Errorf("frontier of file %d: %w", file, err)
	}
	return t, nil
}

// Len is the number of entries.
func (t *Tree) Len() int { return len(t.nodes) }

// link resolves every node's parent (pi's rule: a root's parent is empty,
// itself, or missing; a repeated id resolves to its last entry) and cuts
// each parentId cycle at its earliest entry, as the walks in walk.go do:
// from then on the links are a forest. One pass over the nodes.
func (t *Tree) link() {
	n := len(t.nodes)
	t.up = make([]int32, n)
	for i, node := range t.nodes {
		t.up[i] = -1
		if p, ok := t.byID[node.parent]; ok && node.parent != node.id {
			t.up[i] = int32(p)
		}
	}
	t.cycles = nil
	for _, ring := range cyclesOf(n, func(i int) int { return int(t.up[i]) }) {
		c := &cycle{file: t.file}
		for _, r := range ring {
			c.nodes = append(c.nodes, walkNode{seq: t.nodes[r].seq, id: t.nodes[r].id, parent: t.nodes[r].parent})
		}
		t.cycles = append(t.cycles, c)
		t.up[ring[0]] = -1 // cut at its earliest entry
	}
	t.hasChild = make([]bool, n)
	for _, p := range t.up {
		if p >= 0 {
			t.hasChild[p] = true
		}
	}
}

// walk calls fn for each node from i up to its root.
func (t *Tree) walk(i int, fn func(int) bool) {
	for i >= 0 && fn(i) {
		i = int(t.up[i])
	}
}

// Branches lists the leaves (entries without children) in file order,
// each with its depth and the pi-condense frontier in force on it. One
// pass in file order: a parent normally precedes its children, so its
// depth and frontier are known when a child is reached (a parent written
// later is handled by walking).
//
// The result is computed once per Tree and shared: do not modify it.
func (t *Tree) Branches() []Branch {
	t.branchesOnce.Do(func() { t.branches = t.deriveBranches() })
	return t.branches
}

func (t *Tree) deriveBranches() []Branch {
	n := len(t.nodes)
	depth := make([]int, n) // 0: not known yet
	front := make([]*FrontierEntry, n)
	var stack []int
	for i := range n {
		// Up to a node whose depth is known (or a root), then back down:
		// each node is resolved once, whatever order the file has.
		for k := i; k >= 0 && depth[k] == 0; k = int(t.up[k]) {
			stack = append(stack, k)
		}
		for j := len(stack) - 1; j >= 0; j-- {
			k := stack[j]
			depth[k], front[k] = 1, t.frontier[k]
			if p := t.up[k]; p >= 0 {
				depth[k] = depth[p] + 1
				if front[k] == nil {
					front[k] = front[p]
				}
			}
		}
		stack = stack[:0]
	}
	var out []Branch
	for i, node := range t.nodes {
		if t.hasChild[i] || t.byID[node.id] != i {
			continue // not a leaf, or a duplicate id (pi's byId keeps the later entry)
		}
		out = append(out, Branch{Leaf: node.id, Seq: node.seq, Timestamp: node.timestamp, Current: i == n-1,
			Depth: depth[i], Frontier: front[i]})
	}
	return out
}

// File is the files.id the tree belongs to.
func (t *Tree) File() int64 { return t.file }

// Path returns the ids from the root to the entry id, or ErrNotFound.
func (t *Tree) Path(id string) ([]string, error) {
	i, ok := t.byID[id]
	if !ok {
		return nil, fmt.Errorf("entry %q: %w", id, ErrNotFound)
	}
	var rev []string
	t.walk(i, func(k int) bool { rev = append(rev, t.nodes[k].id); return true })
	for l, r := 0, len(rev)-1; l < r; l, r = l+1, r-1 {
		rev[l], rev[r] = rev[r], rev[l]
	}
	return rev, nil
}

// PathEntries returns the path from the root to the entry id, root first,
// with each entry's ingest seq (Type and Role are not part of the tree and
// stay empty); found is false when the tree does not hold id. It follows
// the same links as SessionPath, from the tree in memory.
func (t *Tree) PathEntries(id string) (path []PathEntry, found bool) {
	i, ok := t.byID[id]
	if !ok {
		return nil, false
	}
	t.walk(i, func(k int) bool {
		path = append(path, PathEntry{ID: t.nodes[k].id, Seq: t.nodes[k].seq})
		return true
	})
	slices.Reverse(path)
	return path, true
}
