package db

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// rowsBatch is n entries shaped like a pi session's lines, from line
// first on: user turns, assistant replies with one or two signed blocks
// (sometimes a redacted or an unsigned one), usage with and without its
// cost split, tool results, frontiers, context edits carrying copies of
// blocks, a usage entry. tag makes the signatures the batch's own.
func rowsBatch(first, n int, tag string) []Entry {
	es := make([]Entry, 0, n)
	parent := ""
	for i := range n {
		line := first + i
		id := fmt.Sprintf("%s%04d", tag, i)
		var e Entry
		switch i % 9 {
		case 0:
			e = entry(line, id, parent, "message")
			e.Role, e.UserText = "user", true
		case 1:
			e = assistant(line, id, parent, signed(0, id))
			e.Usage.CacheWrite, e.Usage.TotalTokens = i64(200), i64(1230)
			e.Usage.CostTotal, e.Usage.CostInput, e.Usage.CostOutput = f64(0.01), f64(0.001), f64(0.002)
			e.Usage.CostCacheRead, e.Usage.CostCacheWrite = f64(0.003), f64(0.004)
		case 2:
			e = entry(line, id, parent, "message")
			e.Role = "toolResult"
		case 3:
			e = assistant(line, id, parent, signed(0, id), Thinking{Index: 1, Redacted: true, Signed: true, SigDigest: digest("r" + id)}, signed(2, id+"b"))
			e.Usage.CacheWrite1h, e.Usage.Reasoning = i64(7), i64(11)
			e.Timestamp = ""
		case 4:
			e = frontierEntry(line, id, parent, fmt.Sprintf(`{"n":%d}`, i))
		case 5:
			e = assistant(line, id, parent, Thinking{Index: 0, Chars: 5}) // unsigned: no digest
			e.Usage = Usage{}
			e.StopReason = ""
		case 6:
			e = entry(line, id, parent, "context_edit")
			e.TargetID, e.EditOmit = parent, i%2 == 0
			e.Thinking = []Thinking{signed(0, id+"copy")}
		case 7:
			e = entry(line, id, parent, "usage")
			e.UsageKind = "cache_warm"
			e.Usage = Usage{Input: i64(1), CostTotal: f64(0.5)}
		default:
			e = entry(line, id, parent, "compaction")
			e.FirstKeptEntryID = parent
		}
		parent = id
		es = append(es, e)
	}
	return es
}

// dump is every row ingest writes, in key order, without the columns that
// hold the time of the write.
func dump(t *testing.T, d *DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT * FROM files ORDER BY id`,
		`SELECT * FROM sessions ORDER BY file`,
		`SELECT * FROM entries ORDER BY seq`,
		`SELECT * FROM thinking ORDER BY entry, block`,
		`SELECT * FROM frontier ORDER BY entry`,
		`SELECT * FROM ingest_errors ORDER BY id`,
		`SELECT key, entry FROM stamps ORDER BY key`,
		`SELECT * FROM events ORDER BY seq`,
	} {
		rows, err := d.readers.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		fmt.Fprintf(&b, "%s\n", q)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, c := range cols {
				if strings.HasSuffix(c, "_ms") {
					continue
				}
				fmt.Fprintf(&b, " %s=%#v", c, vals[i])
			}
			b.WriteByte('\n')
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return b.String()
}

// ingested is what an Ingest answered, without the events' times.
func ingested(r Ingested, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "file=%d session=%q entries=%d linked=%d err=%v\n", r.File, r.SessionID, r.Entries, r.Linked, err)
	for _, e := range r.Events {
		fmt.Fprintf(&b, " %d %s %q %s\n", e.Seq, e.Type, e.Conversation, e.Fields)
	}
	return b.String()
}

// stampWaiting records a stamp for sig whose reply was not read yet.
func stampWaiting(t *testing.T, d *DB, sig string) {
	t.Helper()
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.InsertStamps(ctx, []StampRow{{Stamp: binding.Stamp{Key: bdigest(sig), Seed: bdigest("seed"), Chain: bdigest(sig + "chain"), Model: "m"},
			Source: "accept", Conversation: "s", Branch: "b", CreatedMs: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rowsPair is two databases given the same history, one ingesting row by
// row (the reference), the other batched. Subtests share a pair (opening
// databases is most of their cost under -race), each with its own files
// and signatures, so both see the same history throughout.
func rowsPair(t *testing.T, limit int) (batched, oneByOne *DB) {
	batched, oneByOne = mustOpen(t), mustOpen(t)
	batched.rowsPerInsert, oneByOne.rowsPerInsert = limit, 1
	for _, d := range []*DB{batched, oneByOne} {
		// Rows before: a batch's seqs do not start at 1.
		ingest(t, d, Batch{Kind: Found, Path: "/p/before.jsonl", Cursor: cursor("/p/before.jsonl", 9, 500, 4),
			Header: &Header{ID: "before", Version: 3}, Entries: rowsBatch(2, 3, "z")})
		stampWaiting(t, d, "nowhere")
	}
	return batched, oneByOne
}

// A batch written many rows to an INSERT stores exactly the rows, seqs,
// links, counters and events that row by row does, for batch sizes around
// the INSERT sizes and for rows appended to a file and rewritten.
func TestIngestBatchedAsRowByRow(t *testing.T) {
	cases := []struct{ limit, n int }{
		{rowsPerInsert, 2}, {rowsPerInsert, 3}, {rowsPerInsert, 31}, {rowsPerInsert, 32}, {rowsPerInsert, 33},
		{rowsPerInsert, 65}, {rowsPerInsert, 100}, {4, 7}, {4, 64}, {4, 65},
	}
	pairs := map[int][2]*DB{}
	for _, c := range cases {
		if _, ok := pairs[c.limit]; !ok {
			b, o := rowsPair(t, c.limit)
			pairs[c.limit] = [2]*DB{b, o}
		}
	}
	for _, c := range cases {
		n := c.n
		t.Run(fmt.Sprintf("limit=%d/n=%d", c.limit, n), func(t *testing.T) {
			batched, oneByOne := pairs[c.limit][0], pairs[c.limit][1]
			tag := fmt.Sprintf("l%dn%d", c.limit, n)
			for _, d := range []*DB{batched, oneByOne} {
				stampWaiting(t, d, tag+"a0001") // in the first batch below
				stampWaiting(t, d, tag+"a0030") // a reply past the first 32 rows, when there are
			}
			path := "/p/" + tag + ".jsonl"
			batches := []Batch{
				{Kind: Found, Path: path, Cursor: cursor(path, 1, int64(100*n+100), n+1), Header: &Header{ID: tag, Version: 3}, Entries: rowsBatch(2, n, tag+"a")},
				{Kind: Grew, Path: path, Cursor: cursor(path, 1, int64(200*n+100), 2*n+1), Entries: rowsBatch(n+2, n, tag+"b")},
				{Kind: Rewritten, Path: path, Cursor: cursor(path, 1, int64(100*n+100), n+1), Header: &Header{ID: tag, Version: 3}, Entries: rowsBatch(2, n, tag+"c")},
			}
			for i, b := range batches {
				got := ingested(batched.Ingest(t.Context(), b))
				want := ingested(oneByOne.Ingest(t.Context(), b))
				if got != want {
					t.Fatalf("batch %d answered\n%s\nrow by row\n%s", i, got, want)
				}
				if got, want := dump(t, batched), dump(t, oneByOne); got != want {
					t.Fatalf("after batch %d the rows differ:\n%s", i, diffLines(got, want))
				}
			}
			linked := count(t, batched, `SELECT count(*) FROM stamps WHERE entry LIKE ?`, tag+"%")
			if want := min(2, 1+(n-1)/30); linked != want {
				t.Errorf("stamps linked: %d, want %d", linked, want)
			}
			if want := n; count(t, batched, `SELECT count(*) FROM entries e JOIN files f ON f.id = e.file WHERE f.path = ?`, path) != want {
				t.Errorf("entries of %s: want %d", path, want)
			}
		})
	}
}

// The batched writer on its own (no row-by-row retry behind it) stores
// what row by row stores: the equality above is not the retry's.
func TestSaveRowsManyAsOneByOne(t *testing.T) {
	for _, limit := range []int{rowsPerInsert, 2} {
		for _, n := range []int{33} {
			t.Run(fmt.Sprintf("limit=%d/n=%d", limit, n), func(t *testing.T) {
				batched, oneByOne := rowsPair(t, limit)
				es := rowsBatch(2, n, "a")
				save := func(d *DB, many bool) savedRows {
					var r savedRows
					err := d.write(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
						var f int64
						if err := tx.QueryRowContext(ctx, `SELECT id FROM files`).Scan(&f); err != nil {
							return err
						}
						var err error
						if many {
							r, err = d.saveRowsMany(ctx, tx, f, es, limit)
						} else {
							r, err = d.saveRowsOneByOne(ctx, tx, f, es)
						}
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					return r
				}
				got, want := save(batched, true), save(oneByOne, false)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("batched %v\nrow by row %v", got, want)
				}
				if got, want := dump(t, batched), dump(t, oneByOne); got != want {
					t.Fatalf("the rows differ:\n%s", diffLines(got, want))
				}
			})
		}
	}
}

// A batch with a bad row fails exactly as row by row: the same error,
// naming the file and the row's line, and nothing of the batch stored;
// the database takes the next batch. A thinking block repeated in a
// message breaks the thinking table's key; an entry row is refused by a
// trigger. Both are tried in the first rows of an INSERT, at its last
// row, in the tail that does not fill one, and inside a group commit.
func TestIngestBatchedBadRowAsRowByRow(t *testing.T) {
	batched, oneByOne := rowsPair(t, rowsPerInsert)
	for _, d := range []*DB{batched, oneByOne} {
		if _, err := d.writer.ExecContext(t.Context(), `CREATE TRIGGER refuse_bad BEFORE INSERT ON entries
			WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ n, bad int }{{2, 1}, {70, 0}, {70, 31}, {70, 32}, {70, 69}}
	for _, c := range cases {
		for _, kind := range []string{"thinking", "entry"} {
			n, bad := c.n, c.bad
			t.Run(fmt.Sprintf("n=%d/bad=%d/%s", n, bad, kind), func(t *testing.T) {
				tag := fmt.Sprintf("n%db%d%s", n, bad, kind)
				es := rowsBatch(2, n, tag)
				if kind == "thinking" {
					e := &es[bad]
					es[bad] = assistant(e.Line, e.ID, e.ParentID, signed(0, "x"+e.ID), signed(0, "dup"+e.ID))
				} else {
					es[bad].ID = "bad"
				}
				path := "/p/" + tag + ".jsonl"
				b := Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, int64(100*n+100), n+1), Header: &Header{ID: tag, Version: 3}, Entries: es}
				var errs [2]error
				for i, d := range []*DB{batched, oneByOne} {
					before := dump(t, d)
					_, errs[i] = d.Ingest(t.Context(), b)
					if errs[i] == nil {
						t.Fatal("a batch with a bad row was committed")
					}
					if got := dump(t, d); got != before {
						t.Fatalf("the failed batch left rows:\n%s", diffLines(got, before))
					}
					group := []Batch{{Kind: Found, Path: "/p/" + tag + "-other.jsonl", Cursor: cursor("/p/"+tag+"-other.jsonl", 2, 500, 4),
						Header: &Header{ID: tag + "o", Version: 3}, Entries: rowsBatch(2, 40, tag+"o")}, b}
					if _, err := d.IngestAll(t.Context(), group); err == nil || err.Error() != errs[i].Error() {
						t.Errorf("group commit: %v, want %v", err, errs[i])
					}
					if got := dump(t, d); got != before {
						t.Fatalf("the failed group left rows:\n%s", diffLines(got, before))
					}
				}
				if errs[0].Error() != errs[1].Error() {
					t.Errorf("batched: %v\nrow by row: %v", errs[0], errs[1])
				}
				if want := fmt.Sprintf("ingest %s (found): line %d: ", path, es[bad].Line); !strings.HasPrefix(errs[0].Error(), want) {
					t.Errorf("error %q does not start %q", errs[0], want)
				}
				// Nothing of the failure stays behind: the next batch goes in.
				good := Batch{Kind: Found, Path: path, Cursor: b.Cursor, Header: b.Header, Entries: rowsBatch(2, n, tag+"g")}
				for _, d := range []*DB{batched, oneByOne} {
					ingest(t, d, good)
				}
				if got, want := dump(t, batched), dump(t, oneByOne); got != want {
					t.Fatalf("after the good batch the rows differ:\n%s", diffLines(got, want))
				}
			})
		}
	}
}

// When the batched writer fails where row by row does not (here a trigger
// refuses a row only when its seq is given, as only the batched INSERTs
// give it), its transaction is rolled back and written again row by row:
// the batch is stored once, exactly as the reference stores it.
func TestIngestBatchedRetriedRowByRow(t *testing.T) {
	batched, oneByOne := rowsPair(t, rowsPerInsert)
	for _, d := range []*DB{batched, oneByOne} {
		if _, err := d.writer.ExecContext(t.Context(), `CREATE TRIGGER refuse_given_seq BEFORE INSERT ON entries
			WHEN NEW.id = 'flaky' AND NEW.seq > 0 BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
			t.Fatal(err)
		}
	}
	for _, flaky := range []int{0, 40, 69} {
		t.Run(fmt.Sprint("flaky=", flaky), func(t *testing.T) {
			tag := fmt.Sprint("f", flaky)
			es := rowsBatch(2, 70, tag)
			es[flaky].ID = "flaky"
			path := "/p/" + tag + ".jsonl"
			b := Batch{Kind: Found, Path: path, Cursor: cursor(path, 1, 7100, 71), Header: &Header{ID: tag, Version: 3}, Entries: es}
			got, want := ingested(batched.Ingest(t.Context(), b)), ingested(oneByOne.Ingest(t.Context(), b))
			if got != want || !strings.Contains(got, "err=<nil>") {
				t.Fatalf("batched answered\n%s\nrow by row\n%s", got, want)
			}
			if got, want := dump(t, batched), dump(t, oneByOne); got != want {
				t.Fatalf("the rows differ:\n%s", diffLines(got, want))
			}
			err := batched.write(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
				_, err := batched.saveRowsMany(ctx, tx, 1, es, rowsPerInsert)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("the trigger let the batched writer pass: %v", err)
			}
		})
	}
}

// The batched writer finds the bad row on its own: the row-by-row retry
// is there for the error's line, not to catch what the INSERTs let pass.
func TestSaveRowsManyRefusesBadRow(t *testing.T) {
	d := mustOpen(t)
	es := rowsBatch(2, 40, "a")
	es[35] = assistant(es[35].Line, es[35].ID, es[35].ParentID, signed(0, "x"), signed(0, "y"))
	ingest(t, d, Batch{Kind: Found, Path: "/p/s.jsonl", Cursor: cursor("/p/s.jsonl", 1, 100, 1), Header: &Header{ID: "s", Version: 3}})
	err := d.write(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := d.saveRowsMany(ctx, tx, 1, es, rowsPerInsert)
		return err
	})
	// Its thinking rows go many to an INSERT: the error names the lines
	// of the INSERT that held the bad row (row by row names the row).
	var from, to int
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed: thinking.entry, thinking.block") {
		t.Fatalf("saveRowsMany over a repeated block: %v", err)
	}
	if _, serr := fmt.Sscanf(err.Error(), "lines %d-%d: save thinking blocks:", &from, &to); serr != nil || from > 37 || to < 37 {
		t.Fatalf("saveRowsMany over a repeated block at line 37: %v", err)
	}
}

// insertSize splits any count into prepared INSERT sizes, largest first,
// never past the limit.
func TestInsertSize(t *testing.T) {
	for _, limit := range []int{1, 2, 4, 5, 32, 1000} {
		for n := 1; n <= 200; n++ {
			var sizes []int
			for left := n; left > 0; {
				k := insertSize(left, limit)
				sizes = append(sizes, 1<<k)
				if 1<<k > min(left, max(limit, 1)) || 1<<k > rowsPerInsert {
					t.Fatalf("n=%d limit=%d: %v", n, limit, sizes)
				}
				left -= 1 << k
			}
			widest := 1 << insertSize(limit, limit)
			if len(sizes) > n/widest+insertSizes {
				t.Errorf("n=%d limit=%d: %d INSERTs %v", n, limit, len(sizes), sizes)
			}
		}
	}
}

func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, a, b)
		}
	}
	return "(equal)"
}
