package db

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// A compile in a pi session reads the path from the root to its leaf
// (SessionPath), and walking it costs one indexed read per entry: 13 ms a
// compile on a 3,000-entry session, every turn, for a path grown by the
// turn's few entries. pathMemos keeps the last paths walked; a walk goes up
// from the new leaf only until it meets an entry of a kept path of the
// file, at the same seq, and takes the rest of the path from it.
//
// A kept path stays exact while no entry on it is replaced. An entry is
// found by its id as the file's last line with that id (walkFrom), so a
// later line repeating the id of an entry on the path moves the path: each
// use first reads the file's entries ingested since the path was walked,
// in the read transaction the walk then uses, and drops the path when one
// of them repeats an id on it, or has the id its first entry names as a
// parent not written yet (the path now goes on above it), or when there
// are more than pathMemoNew.
// Otherwise a file's entries are only appended, or deleted all at once
// (clearFile) and read again with new seqs, where no entry of a kept path
// can be met at its own seq; so the rest of a kept path is what a walk
// from the meeting entry returns. A path cut at a cycle (walk.go) is not
// kept: it would change with entries off it (a line repeating the id of
// an entry of the cycle's rest).
type pathMemo struct {
	file int64
	high int64 // the file's largest seq when walked
	// The path's nodes, leaf first as walkUp returns them, are walked
	// (its own, split of them), then base's from its node from on (a path
	// taken from a kept one holds and indexes only what it walked: a long
	// path's copy and index were most of a turn's cost). own indexes
	// walked's ids. depth bounds the chain of bases; n is the path's
	// length.
	walked      []walkNode
	own         map[string]int
	split, from int
	base        *pathMemo
	depth       int
	n           int
}

// pathMemoDepth bounds a kept path's chain of bases; past it the path is
// indexed whole.
const pathMemoDepth = 8

// node is the path's node i (0: the leaf).
func (m *pathMemo) node(i int) *walkNode {
	for i >= m.split {
		i, m = i-m.split+m.from, m.base
	}
	return &m.walked[i]
}

// nodes is the path's nodes, leaf first, in an array of their own.
func (m *pathMemo) nodes() []walkNode {
	out := make([]walkNode, 0, m.n)
	for i := 0; m != nil; m = m.base {
		if i < m.split {
			out = append(out, m.walked[i:m.split]...)
			i = m.split
		}
		i = i - m.split + m.from // where the rest begins on base's path
	}
	return out
}

// index is where id lies on the path (node).
func (m *pathMemo) index(id string) (int, bool) {
	if i, ok := m.own[id]; ok {
		return i, true
	}
	if m.base == nil {
		return 0, false
	}
	i, ok := m.base.index(id)
	if !ok || i < m.from {
		return 0, false
	}
	return i - m.from + m.split, true
}

type pathMemos struct {
	mu    sync.Mutex
	memos []*pathMemo // newest last; a kept memo is never changed
}

const (
	pathMemosKept = 16   // paths kept, over all files
	pathMemoNew   = 4096 // entries ingested since a path was walked past which it is dropped
	pathMemoReach = 64   // entries walked up looking for a kept path
)

// of is the kept paths of file, newest first.
func (p *pathMemos) of(file int64) []*pathMemo {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pathMemo
	for i := len(p.memos) - 1; i >= 0; i-- {
		if p.memos[i].file == file {
			out = append(out, p.memos[i])
		}
	}
	return out
}

// drop forgets m.
func (p *pathMemos) drop(m *pathMemo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.memos {
		if x == m {
			p.memos = append(p.memos[:i], p.memos[i+1:]...)
			return
		}
	}
}

// keep remembers the path walked in file at high: walked (leaf first),
// then, with base, base's path from its node from on. It returns the kept
// path (nil for no nodes).
func (p *pathMemos) keep(file, high int64, walked []walkNode, base *pathMemo, from int) *pathMemo {
	m := &pathMemo{file: file, high: high, walked: walked, split: len(walked), n: len(walked)}
	if base != nil {
		m.base, m.from, m.depth, m.n = base, from, base.depth+1, len(walked)+base.n-from
		if m.depth > pathMemoDepth {
			// indexed and held whole again
			m.walked = m.nodes()
			m.base, m.split, m.from, m.depth = nil, len(m.walked), 0, 0
		}
	}
	if m.n == 0 {
		return nil
	}
	m.own = make(map[string]int, m.split)
	for i := range m.split {
		m.own[m.walked[i].id] = i
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.memos {
		if x.file == file && x.node(0).seq == m.node(0).seq {
			p.memos = append(p.memos[:i], p.memos[i+1:]...) // replaced by the newer walk
			break
		}
	}
	if len(p.memos) >= pathMemosKept {
		p.memos = append(p.memos[:0], p.memos[1:]...)
	}
	p.memos = append(p.memos, m)
	return m
}

// current keeps of memos (file's) those still exact at high, reading in
// tx the entries ingested since the oldest was walked; it drops the others.
func (d *DB) currentPaths(ctx context.Context, tx keptReads, file, high int64, memos []*pathMemo) ([]*pathMemo, error) {
	if len(memos) == 0 {
		return nil, nil
	}
	from := high
	for _, m := range memos {
		from = min(from, m.high)
	}
	type added struct {
		seq int64
		id  string
	}
	var since []added
	if from < high {
		rows, err := tx.QueryContext(ctx, `SELECT seq, id FROM entries WHERE file = ? AND seq > ? ORDER BY seq LIMIT ?`, file, from, pathMemoNew+1)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var a added
			if err := rows.Scan(&a.seq, &a.id); err != nil {
				rows.Close()
				return nil, err
			}
			since = append(since, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var out []*pathMemo
	for _, m := range memos {
		ok := m.high <= high && len(since) <= pathMemoNew
		for _, a := range since {
			if !ok {
				break
			}
			if _, on := m.index(a.id); (on || a.id == m.node(m.n-1).parent) && a.seq > m.high {
				ok = false // an entry of the path is replaced, or the path goes on
			}
		}
		if ok {
			out = append(out, m)
		} else {
			d.paths.drop(m)
		}
	}
	return out, nil
}

// walkKept is walkFrom(file, entry, 0) through the kept paths: it returns
// the kept path of those nodes, or, when they are not kept (a path cut at
// a cycle), the nodes, leaf first (both nil: none). Nothing the caller
// gets may be changed: it may be a kept path's.
func (d *DB) walkKept(ctx context.Context, file int64, entry string) ([]walkNode, *pathMemo, error) {
	rtx, err := d.readers.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer rtx.Rollback()
	tx := keptReads{d: d, tx: rtx}
	var seq, high sql.NullInt64
	rows, err := tx.QueryContext(ctx, `SELECT (SELECT max(seq) FROM entries WHERE file = ?1 AND id = ?2), (SELECT max(seq) FROM entries WHERE file = ?1)`,
		file, entry)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		err = rows.Scan(&seq, &high)
	}
	if rerr := rows.Close(); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, nil, err
	}
	if !seq.Valid {
		return nil, nil, nil
	}
	memos, err := d.currentPaths(ctx, tx, file, high.Int64, d.paths.of(file))
	if err != nil {
		return nil, nil, fmt.Errorf("kept paths: %w", err)
	}
	for _, m := range memos {
		if m.node(0).seq == seq.Int64 {
			return nil, m, nil // the same leaf, its path unchanged
		}
	}
	// Up a few entries first (a turn's), then further.
	for _, reach := range []int{8, pathMemoReach} {
		if len(memos) == 0 {
			break
		}
		near, cyc, err := walkUp(ctx, tx, file, seq.Int64, reach)
		if err != nil {
			return nil, nil, err
		}
		for i, n := range near {
			for _, m := range memos {
				if j, ok := m.index(n.id); ok && m.node(j).seq == n.seq {
					return nil, d.paths.keep(file, high.Int64, near[:i:i], m, j), nil
				}
			}
		}
		if cyc != nil || len(near) < reach {
			d.reportCycle(cyc)
			if cyc != nil {
				return near, nil, nil
			}
			return nil, d.paths.keep(file, high.Int64, near, nil, 0), nil
		}
	}
	nodes, cyc, err := walkUp(ctx, tx, file, seq.Int64, 0)
	if err != nil {
		return nil, nil, err
	}
	d.reportCycle(cyc)
	if cyc != nil {
		return nodes, nil, nil
	}
	return nil, d.paths.keep(file, high.Int64, nodes, nil, 0), nil
}

// keptReads runs a walk's queries in its read transaction through the
// readers' kept statements (readstmts.go): the recursive walk prepared
// again each call cost more than the few rows a turn's walk reads.
type keptReads struct {
	d  *DB
	tx *sql.Tx
}

func (k keptReads) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := k.d.reads.get(ctx, k.d.readers, q); s != nil {
		return k.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return k.tx.QueryContext(ctx, q, args...)
}
