package db

import (
	"fmt"
	"testing"
)

// Skipping the stamp probes of a batch when no stamp exists links exactly
// what probing every signed block links: nothing while there is no stamp,
// and as soon as a stamp is recorded, the next batch that reads its reply
// links it (the skip is the batch's own, never carried to the next one),
// in a file that grew, one rewritten and a group commit alike; row by row
// and batched.
func TestStampLinksSkippedWithoutStamps(t *testing.T) {
	for _, limit := range []int{rowsPerInsert, 1} {
		t.Run(fmt.Sprint("rowsPerInsert=", limit), func(t *testing.T) {
			skip, probe := mustOpen(t), mustOpen(t)
			skip.rowsPerInsert, probe.rowsPerInsert = limit, limit
			probe.probeEveryBlock = true
			a, c, e := "/p/a.jsonl", "/p/c.jsonl", "/p/e.jsonl"
			steps := []struct {
				stamps []string // recorded before the step's batches
				group  []Batch
			}{
				{nil, []Batch{{Kind: Found, Path: a, Cursor: cursor(a, 1, 4100, 41), Header: &Header{ID: "a", Version: 3}, Entries: rowsBatch(2, 40, "a")}}},
				// a0001 was read before its stamp: linked when its line is read again.
				{[]string{"b0001", "a0001", "x0001"}, []Batch{{Kind: Grew, Path: a, Cursor: cursor(a, 1, 8100, 81), Entries: rowsBatch(42, 40, "b")}}},
				{nil, []Batch{{Kind: Rewritten, Path: a, Cursor: cursor(a, 1, 4100, 41), Header: &Header{ID: "a", Version: 3}, Entries: rowsBatch(2, 40, "a")}}},
				{[]string{"c0030"}, []Batch{
					{Kind: Found, Path: c, Cursor: cursor(c, 2, 4100, 41), Header: &Header{ID: "c", Version: 3}, Entries: rowsBatch(2, 40, "c")},
					{Kind: Found, Path: e, Cursor: cursor(e, 3, 4100, 41), Header: &Header{ID: "e", Version: 3}, Entries: rowsBatch(2, 40, "e")},
				}},
			}
			for i, st := range steps {
				for _, d := range []*DB{skip, probe} {
					for _, sig := range st.stamps {
						stampWaiting(t, d, sig)
					}
				}
				var got, want string
				if len(st.group) == 1 {
					got, want = ingested(skip.Ingest(t.Context(), st.group[0])), ingested(probe.Ingest(t.Context(), st.group[0]))
				} else {
					rs, err := skip.IngestAll(t.Context(), st.group)
					ps, perr := probe.IngestAll(t.Context(), st.group)
					if err != nil || perr != nil || len(rs) != len(ps) {
						t.Fatalf("step %d: group commit: %v, %v", i, err, perr)
					}
					for k := range rs {
						got += ingested(rs[k], nil)
						want += ingested(ps[k], nil)
					}
				}
				if got != want {
					t.Fatalf("step %d answered\n%s\nprobing every block\n%s", i, got, want)
				}
				if got, want := dump(t, skip), dump(t, probe); got != want {
					t.Fatalf("after step %d the rows differ:\n%s", i, diffLines(got, want))
				}
			}
			if n := count(t, skip, `SELECT count(*) FROM stamps WHERE entry IS NOT NULL`); n != 3 {
				t.Errorf("%d stamps linked, want 3 (b0001, a0001 read again, c0030)", n)
			}
		})
	}
}
