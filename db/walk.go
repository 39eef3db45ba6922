package db

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Walking up a session's parent links. pi writes a parent before its
// children, so the links form a tree; a damaged or hand-edited file can
// close a cycle (two entries naming each other), and pi's own walk would
// then never end. Every walk here detects the cycle and cuts it the same
// way, wherever it starts: the cycle's earliest entry in file order (whose
// parentId names a later entry) is taken as a root. Its cost stays
// proportional to the path it returns, and the cycle is recorded as an
// ingest error naming the file and the entries.

// walkNode is one entry met walking up.
type walkNode struct {
	seq        int64
	id, parent string
	typ, role  string
	line       int
	offset     int64
}

// cycle is a parentId cycle met walking up: its entries in parent order,
// starting at the one taken as a root.
type cycle struct {
	file  int64
	nodes []walkNode
}

// walkUp returns the entry at seq and its ancestors, nearest first: at
// most limit entries (0: no limit), stopping at a root or at the cut of a
// cycle, which it then returns too. It reads in growing steps, so a short
// walk costs one short query and a long one a few.
func walkUp(ctx context.Context, q querier, file, seq int64, limit int) ([]walkNode, *cycle, error) {
	var out []walkNode
	at := map[int64]int{} // seq -> index in out
	step := 256
	from := seq
	for {
		n := step
		if limit > 0 {
			again := 0
			if len(out) > 0 {
				again = 1 // the first row repeats the last one read
			}
			n = min(n, limit-len(out)+again)
		}
		rows, err := q.QueryContext(ctx, `WITH RECURSIVE p(seq, id, parent, type, role, line, offset, depth) AS (
				SELECT seq, id, coalesce(parent_id, ''), type, coalesce(role, ''), line, offset, 0 FROM entries WHERE seq = ?1
				UNION ALL
				SELECT e.seq, e.id, coalesce(e.parent_id, ''), e.type, coalesce(e.role, ''), e.line, e.offset, p.depth + 1 FROM p JOIN entries e
					ON e.seq = (SELECT max(seq) FROM entries WHERE file = ?2 AND id = p.parent)
				WHERE p.parent != '' AND p.parent != p.id AND p.depth + 1 < ?3)
			SELECT seq, id, parent, type, role, line, offset FROM p ORDER BY depth`, from, file, n)
		if err != nil {
			return nil, nil, err
		}
		got := 0
		var cyc *cycle
		for rows.Next() {
			var w walkNode
			if err := rows.Scan(&w.seq, &w.id, &w.parent, &w.typ, &w.role, &w.line, &w.offset); err != nil {
				rows.Close()
				return nil, nil, err
			}
			got++
			if got == 1 && len(out) > 0 {
				continue // the last entry of the previous step
			}
			if cyc != nil {
				continue
			}
			if i, seen := at[w.seq]; seen {
				out, cyc = cutCycle(out, i)
				cyc.file = file
				continue
			}
			at[w.seq] = len(out)
			out = append(out, w)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		if cyc != nil || got < n || (limit > 0 && len(out) >= limit) {
			if limit > 0 && len(out) > limit {
				out = out[:limit]
			}
			return out, cyc, nil
		}
		from = out[len(out)-1].seq
		step *= 4
	}
}

// cutCycle ends the walk out, which has just come back to out[i], at the
// cycle's earliest entry, and returns the cycle starting there.
func cutCycle(out []walkNode, i int) ([]walkNode, *cycle) {
	ring := out[i:]
	m := 0
	for k := range ring {
		if ring[k].seq < ring[m].seq {
			m = k
		}
	}
	c := &cycle{nodes: append(append([]walkNode(nil), ring[m:]...), ring[:m]...)}
	return out[:i+m+1], c
}

// maxCycleNamed bounds the entries a cycle's error names.
const maxCycleNamed = 8

// reason is the cycle's ingest error.
func (c *cycle) reason() string {
	var b strings.Builder
	b.WriteString("parentId cycle: ")
	for k, n := range c.nodes {
		if k == maxCycleNamed {
			fmt.Fprintf(&b, "… (%d entries) → ", len(c.nodes))
			break
		}
		fmt.Fprintf(&b, "%s (line %d) → ", strconv.Quote(n.id), n.line)
	}
	fmt.Fprintf(&b, "%s; its earliest entry, %s (line %d), is taken as a root", strconv.Quote(c.nodes[0].id), strconv.Quote(c.nodes[0].id), c.nodes[0].line)
	return b.String()
}

// cycleLog records cycles met by walks as ingest errors, once each, off
// the caller's path: a walk runs on a reader (perhaps while the caller
// holds the writer), and the record is not worth delaying a compile for.
type cycleLog struct {
	mu   sync.Mutex
	done map[[2]int64]bool // (file, seq of the cut entry)
	wg   sync.WaitGroup
}

func (d *DB) reportCycle(c *cycle) {
	if c == nil || len(c.nodes) == 0 {
		return
	}
	key := [2]int64{c.file, c.nodes[0].seq}
	d.cycles.mu.Lock()
	if d.cycles.done == nil {
		d.cycles.done = map[[2]int64]bool{}
	}
	if d.cycles.done[key] || len(d.cycles.done) > 10_000 {
		d.cycles.mu.Unlock()
		return
	}
	d.cycles.done[key] = true
	d.cycles.mu.Unlock()
	d.cycles.wg.Go(func() {
		// Without an event: the event log is written in seq order through
		// the daemon's journal. A failure is retried by the next walk of
		// a later run; the walk itself is right either way.
		d.write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			// A cycle found in a Tree has no lines yet.
			for k := range c.nodes {
				if n := &c.nodes[k]; n.line == 0 {
					if err := tx.QueryRowContext(ctx, `SELECT line, offset FROM entries WHERE seq = ?`, n.seq).Scan(&n.line, &n.offset); err != nil {
						return err
					}
				}
			}
			return recordCycle(ctx, tx, d.stmts.insertErrorOnce, c)
		})
	})
}

func recordCycle(ctx context.Context, tx *sql.Tx, ins *sql.Stmt, c *cycle) error {
	n := c.nodes[0]
	_, err := tx.StmtContext(ctx, ins).ExecContext(ctx, c.file, n.line, n.offset, c.reason(), nowMS())
	if err != nil {
		return fmt.Errorf("record parentId cycle in file %d: %w", c.file, err)
	}
	return nil
}

// batchCycles finds the parentId cycles among a batch's entries (seqs
// their rows' seqs): those whose every link resolves inside the batch. A
// cycle closed through entries of earlier batches is found by the first
// walk that meets it. One pass, whatever the links.
func batchCycles(file int64, es []Entry, seqs []int64) []*cycle {
	last := make(map[string]int, len(es))
	for i := range es {
		last[es[i].ID] = i
	}
	up := func(i int) int {
		p := es[i].ParentID
		if p == "" || p == es[i].ID {
			return -1
		}
		if j, ok := last[p]; ok {
			return j
		}
		return -1
	}
	var out []*cycle
	for _, ring := range cyclesOf(len(es), up) {
		c := &cycle{file: file}
		for _, r := range ring {
			e := &es[r]
			c.nodes = append(c.nodes, walkNode{seq: seqs[r], id: e.ID, parent: e.ParentID, typ: e.Type, role: e.Role, line: e.Line, offset: e.Offset})
		}
		out = append(out, c)
	}
	return out
}

// walkFrom walks up from the last entry of file with id entry (walkUp),
// reporting a cycle it meets.
func (d *DB) walkFrom(ctx context.Context, file int64, entry string, limit int) ([]walkNode, error) {
	var seq sql.NullInt64
	if err := d.readRow(ctx, `SELECT max(seq) FROM entries WHERE file = ? AND id = ?`, file, entry).Scan(&seq); err != nil {
		return nil, err
	}
	if !seq.Valid {
		return nil, nil
	}
	nodes, cyc, err := walkUp(ctx, d.readers, file, seq.Int64, limit)
	if err != nil {
		return nil, err
	}
	d.reportCycle(cyc)
	return nodes, nil
}

// cyclesOf finds the cycles of the parent links up (up(i) is i's parent,
// -1 for a root) over nodes 0..n-1, each once, listed from its earliest
// node (the one every walk takes as the root), in one pass: each node is
// walked once, and a walk that comes back onto itself has met a cycle.
func cyclesOf(n int, up func(int) int) [][]int {
	state := make([]uint8, n) // 0 unseen, 1 on the walk in progress, 2 done
	var out [][]int
	var walk []int
	for i := range n {
		walk = walk[:0]
		k := i
		for k >= 0 && state[k] == 0 {
			state[k] = 1
			walk = append(walk, k)
			k = up(k)
		}
		if k >= 0 && state[k] == 1 {
			// Back on this walk: walk[pos:] is a cycle.
			pos := 0
			for walk[pos] != k {
				pos++
			}
			ring := walk[pos:]
			m := 0
			for r := range ring {
				if ring[r] < ring[m] {
					m = r
				}
			}
			out = append(out, append(append([]int(nil), ring[m:]...), ring[:m]...))
		}
		for _, w := range walk {
			state[w] = 2
		}
	}
	return out
}
