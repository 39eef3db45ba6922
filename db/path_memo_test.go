package db

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// walkedPath is SessionPath without the kept paths: a walk from the leaf
// to the root (the reference TestSessionPathKeptIsWalk holds it to).
func walkedPath(t *testing.T, d *DB, session, entry string) []PathEntry {
	t.Helper()
	var file int64
	err := d.readers.QueryRowContext(t.Context(), `SELECT s.file FROM sessions s JOIN files f ON f.id = s.file
		WHERE s.id = ? AND s.removed = 0 ORDER BY f.updated_ms DESC LIMIT 1`, session).Scan(&file)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := d.walkFrom(t.Context(), file, entry, 0)
	if err != nil {
		t.Fatal(err)
	}
	var path []PathEntry
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		path = append(path, PathEntry{ID: n.id, Seq: n.seq, Type: n.typ, Role: n.role})
	}
	return path
}

// TestSessionPathKeptIsWalk: a session grows turn by turn, as pi writes
// it, with branches back to any entry, lines that repeat an earlier
// entry's id (replacing it on every path through it), parents named
// before they exist, cycles, and rewrites of the whole file; after every
// batch, SessionPath from the new leaf, from earlier leaves and from any
// entry returns exactly the path a walk from scratch returns.
func TestSessionPathKeptIsWalk(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { keptIsWalk(t, seed) })
	}
}

func keptIsWalk(t *testing.T, seed uint64) {
	d := mustOpen(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 99))
	const path = "/s/grow.jsonl"
	var ids, parents []string
	var leaves []string
	next := 0
	newID := func() string { next++; return fmt.Sprintf("e%04d", next) }
	ingest := func(kind BatchKind, from int) {
		t.Helper()
		var es []Entry
		for i := from; i < len(ids); i++ {
			es = append(es, Entry{Line: i + 2, Offset: int64(100 * (i + 2)), Length: 100, Type: "message", Role: "user", ID: ids[i], ParentID: parents[i]})
		}
		b := Batch{Kind: kind, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: int64(100 * (len(ids) + 2)), Lines: len(ids) + 1}, Entries: es}
		if kind == Found {
			b.Header = &Header{ID: "grow", Version: 3, Cwd: "/"}
		}
		if _, err := d.Ingest(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	ids, parents = append(ids, newID()), append(parents, "")
	ingest(Found, 0)
	check := func(step int, leaf string) {
		t.Helper()
		want := walkedPath(t, d, "grow", leaf)
		// SessionPathHas first on odd steps, so that either call may be
		// the one that walks and keeps the path the other then uses.
		has := func() {
			t.Helper()
			asked := append(slices.Clone(ids), "absent", "")
			on, found, err := d.SessionPathHas(ctx, "grow", leaf, asked)
			if err != nil {
				t.Fatal(err)
			}
			if found != (len(want) > 0) {
				t.Fatalf("step %d, leaf %s: SessionPathHas found %v, a walk from scratch %d entries", step, leaf, found, len(want))
			}
			wantOn := map[string]bool{}
			for _, e := range want {
				wantOn[e.ID] = true
			}
			for _, id := range asked {
				if on[id] != wantOn[id] {
					t.Fatalf("step %d, leaf %s: SessionPathHas says %s on the path: %v; a walk from scratch gives %v", step, leaf, id, on[id], pathIDs(want))
				}
			}
			if len(on) > len(wantOn) {
				t.Fatalf("step %d, leaf %s: SessionPathHas answered %d ids on a path of %d", step, leaf, len(on), len(wantOn))
			}
		}
		if step%2 == 1 {
			has()
		}
		got, found, err := d.SessionPath(ctx, "grow", leaf)
		if err != nil {
			t.Fatal(err)
		}
		if found != (len(want) > 0) || !slices.Equal(got, want) {
			t.Fatalf("step %d, leaf %s: path %v (found %v), a walk from scratch gives %v", step, leaf, pathIDs(got), found, pathIDs(want))
		}
		if step%2 == 0 {
			has()
		}
	}
	leaf := ids[0]
	for step := range 120 {
		from := len(ids)
		for range 1 + rng.IntN(4) {
			id, parent := newID(), leaf
			switch r := rng.IntN(40); {
			case r < 4:
				parent = ids[rng.IntN(len(ids))] // a branch back
			case r < 6:
				id = ids[rng.IntN(len(ids))] // a line repeating an entry's id
			case r < 7:
				parent = fmt.Sprintf("e%04d", next+1+rng.IntN(3)) // a parent not written yet
			case r < 8:
				parent = ""
			}
			ids, parents = append(ids, id), append(parents, parent)
			leaf = id
		}
		switch {
		case rng.IntN(60) == 0:
			ingest(Rewritten, 0) // the whole file again: new seqs
		default:
			ingest(Grew, from)
		}
		leaves = append(leaves, leaf)
		check(step, leaf)
		switch step % 3 {
		case 0:
			check(step, leaves[rng.IntN(len(leaves))])
		case 1:
			check(step, ids[rng.IntN(len(ids))])
		}
		check(step, leaf)
	}
	if len(d.paths.memos) > pathMemosKept {
		t.Fatalf("%d paths kept, bound %d", len(d.paths.memos), pathMemosKept)
	}
}

// TestKeptPathHoldsItsTurn: a path walked from a kept one holds only
// the entries it walked, and the chain of kept paths it stands on stays
// within pathMemoDepth (past it the path is held whole again), so a turn
// neither copies the history nor asks a chain that grows with it.
func TestKeptPathHoldsItsTurn(t *testing.T) {
	d, add, count := turnsSession(t)
	ctx := t.Context()
	add(30)
	whole := 0
	for turn := range 40 {
		add(3)
		n := count()
		on, found, err := d.SessionPathHas(ctx, "turns", "e"+itoa(n), []string{"e1", "e" + itoa(n-3), "e0"})
		if err != nil || !found || !on["e1"] || !on["e"+itoa(n-3)] || on["e0"] {
			t.Fatalf("turn %d: on %v, found %v, err %v", turn, on, found, err)
		}
		m := d.paths.memos[len(d.paths.memos)-1]
		if m.node(0).id != "e"+itoa(n) || m.n != n || len(m.nodes()) != n {
			t.Fatalf("turn %d: the kept path is %s…, %d entries (%d), want e%d…, %d", turn, m.node(0).id, m.n, len(m.nodes()), n, n)
		}
		for j, nd := range m.nodes() {
			if i, ok := m.index(nd.id); !ok || i != j || m.node(j).id != nd.id {
				t.Fatalf("turn %d: %s is node %d, index says %d (%v)", turn, nd.id, j, i, ok)
			}
		}
		switch {
		case m.depth > pathMemoDepth:
			t.Fatalf("turn %d: a chain of %d kept paths, bound %d", turn, m.depth, pathMemoDepth)
		case m.base == nil:
			whole++
		case len(m.walked) > 3:
			t.Fatalf("turn %d: the path holds %d entries of its own, want the turn's 3", turn, len(m.walked))
		}
	}
	if whole < 40/(pathMemoDepth+1) || whole > 40/pathMemoDepth+1 {
		t.Fatalf("the path was held whole %d times in 40 turns", whole)
	}
}

// turnsSession is a pi session of one linear branch, grown by add(k) of k
// entries; n() is the number of entries, the last one "e"+itoa(n()).
func turnsSession(b testing.TB) (d *DB, add func(k int), n func() int) {
	d = mustOpen(b)
	ctx := context.Background()
	const path = "/s/turns.jsonl"
	count := 0
	var es []Entry
	add = func(k int) {
		es = es[:0]
		for range k {
			count++
			p := ""
			if count > 1 {
				p = "e" + itoa(count-1)
			}
			es = append(es, Entry{Line: count + 1, Offset: int64(100 * (count + 1)), Length: 100, Type: "message", Role: "user", ID: "e" + itoa(count), ParentID: p})
		}
		bt := Batch{Kind: Grew, Path: path, Cursor: Cursor{Path: path, Ino: 1, Offset: int64(100 * (count + 2)), Lines: count + 1}, Entries: es}
		if count == k {
			bt.Kind, bt.Header = Found, &Header{ID: "turns", Version: 3, Cwd: "/"}
		}
		if _, err := d.Ingest(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	return d, add, func() int { return count }
}

// BenchmarkSessionPathTurn: a compile's path in a pi session of 3,000
// entries that grows by a turn (three entries) before each compile, against
// a walk from scratch of the same path (the simplest baseline), alternated:
// ratio is kept ÷ walked.
func BenchmarkSessionPathTurn(b *testing.B) {
	d, add, count := turnsSession(b)
	ctx := context.Background()
	add(3000)
	var file int64
	if err := d.readers.QueryRow(`SELECT file FROM sessions WHERE id = 'turns'`).Scan(&file); err != nil {
		b.Fatal(err)
	}
	var kept, walked time.Duration
	for b.Loop() {
		add(3)
		n := count()
		t0 := time.Now()
		p, _, err := d.SessionPath(ctx, "turns", "e"+itoa(n))
		if err != nil || len(p) != n {
			b.Fatal(err, len(p))
		}
		t1 := time.Now()
		nodes, err := d.walkFrom(ctx, file, "e"+itoa(n), 0)
		if err != nil || len(nodes) != n {
			b.Fatal(err, len(nodes))
		}
		kept += t1.Sub(t0)
		walked += time.Since(t1)
	}
	b.ReportMetric(float64(kept)/float64(walked), "ratio")
	b.ReportMetric(float64(kept.Microseconds())/float64(b.N), "kept-µs/op")
	b.ReportMetric(float64(walked.Microseconds())/float64(b.N), "walked-µs/op")
}

// BenchmarkSessionPathHasTurn: what a pi compile asks of its leaf's path,
// in the session of BenchmarkSessionPathTurn: which of the leaves of its
// 256 remembered compiles (the last 256 turns') lie on it. SessionPathHas
// against the way before it, the whole path (SessionPath) and a set of its
// ids; the two alternate which walks first (the other then finds the path
// kept). ratio is has ÷ path and set.
func BenchmarkSessionPathHasTurn(b *testing.B) {
	d, add, count := turnsSession(b)
	ctx := context.Background()
	add(3000)
	var has, whole time.Duration
	round := 0
	for b.Loop() {
		add(3)
		n := count()
		leaves := make([]string, 0, 256)
		for i := range 256 {
			leaves = append(leaves, "e"+itoa(n-3*i-2))
		}
		byHas := func() {
			t0 := time.Now()
			on, found, err := d.SessionPathHas(ctx, "turns", "e"+itoa(n), leaves)
			has += time.Since(t0)
			if err != nil || !found || len(on) != len(leaves) {
				b.Fatal(err, found, len(on))
			}
		}
		byPath := func() {
			t0 := time.Now()
			p, _, err := d.SessionPath(ctx, "turns", "e"+itoa(n))
			on := make(map[string]bool, len(p))
			for _, e := range p {
				on[e.ID] = true
			}
			whole += time.Since(t0)
			if err != nil || len(p) != n || !on[leaves[255]] {
				b.Fatal(err, len(p))
			}
		}
		if round++; round%2 == 0 {
			byHas()
			byPath()
		} else {
			byPath()
			byHas()
		}
	}
	b.ReportMetric(float64(has)/float64(whole), "ratio")
	b.ReportMetric(float64(has.Microseconds())/float64(b.N), "has-µs/op")
	b.ReportMetric(float64(whole.Microseconds())/float64(b.N), "path+set-µs/op")
}
