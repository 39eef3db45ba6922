package db

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/binding"
)

func bdigest(s string) binding.Digest { return binding.Digest(sha256.Sum256([]byte(s))) }

func testRecord(id, conv, branch string, seq int64) *binding.CompileRecord {
	return &binding.CompileRecord{
		ID: id, Conversation: conv, Branch: branch, Seq: seq, Model: "claude-opus-4-5", Binds: true,
		Seed: bdigest("seed"), End: bdigest("end" + id), LastRead: bdigest("k1"),
		Kept:   []binding.KeptBlock{{Key: bdigest("k1"), Orig: binding.Pos{Message: 1, Block: 0}, Sent: binding.Pos{Message: 1, Block: 0}}},
		Sent:   []binding.SentMessage{{Orig: 0, Frame: 7}, {Orig: 1, Frame: 9, Blocks: []uint64{1, 2}}},
		Strips: []binding.Release{{Key: bdigest("k0"), Reason: string(binding.ReasonPrefixChanged), Compile: id, Message: 1, Path: "messages.1.content.0"}},
	}
}

func insertCompile(t *testing.T, d *DB, id, conv, branch string) *binding.CompileRecord {
	t.Helper()
	var rec *binding.CompileRecord
	last, err := d.LastCompileSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		rec = testRecord(id, conv, branch, last+1)
		if err := tx.UpsertConversation(ctx, ConversationRow{ID: conv, CreatedMs: 1}); err != nil {
			return err
		}
		if err := tx.UpsertBranch(ctx, BranchRow{Conversation: conv, Branch: branch, CreatedMs: 1}); err != nil {
			return err
		}
		_, err := tx.InsertCompile(ctx, rec, time.Now().UnixMilli(), ChunkSource{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestBindingStoreRoundTrip(t *testing.T) {
	d := mustOpen(t)
	rec := insertCompile(t, d, "c1", "conv", "b")
	got, found, err := d.Compile(t.Context(), "c1")
	if err != nil || !found {
		t.Fatalf("compile c1: found=%v err=%v", found, err)
	}
	if got.Record == nil || got.Record.Seq != rec.Seq || got.Record.Kept[0].Key != rec.Kept[0].Key || got.Record.Sent[1].Blocks[1] != 2 ||
		got.Record.Strips[0].Path != "messages.1.content.0" || got.AcceptedMs != 0 {
		t.Fatalf("record round trip: %+v", got)
	}
	if _, found, _ := d.Compile(t.Context(), "nope"); found {
		t.Fatal("unknown compile found")
	}

	// accept: stamps, releases, owner, engagement, in one transaction
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		hw, err := tx.IngestHighWater(ctx)
		if err != nil {
			return err
		}
		st := []StampRow{{Stamp: binding.Stamp{Key: bdigest("r1"), Seed: bdigest("seed"), Chain: bdigest("ch"), Model: "m"}, Source: "accept", Conversation: "conv", Branch: "b", Compile: "c1", CreatedMs: 5}}
		if added, err := tx.InsertStamps(ctx, append(st, st...)); err != nil || len(added) != 1 {
			return fmt.Errorf("stamps added %d: %v", len(added), err)
		}
		rl := []ReleaseRow{{Release: binding.Release{Key: bdigest("k0"), Reason: "prefix-changed", Compile: "c1", Message: 1, Path: "messages.1.content.0", Seq: hw}, Conversation: "conv", Branch: "b", CreatedMs: 5}}
		if added, err := tx.InsertReleases(ctx, append(rl, rl...)); err != nil || len(added) != 1 {
			return fmt.Errorf("releases added %d: %v", len(added), err)
		}
		if err := tx.UpsertBranch(ctx, BranchRow{Conversation: "conv", Branch: "b", Owner: "c1", CreatedMs: 9}); err != nil {
			return err
		}
		if err := tx.UpsertConversation(ctx, ConversationRow{ID: "conv", EngagedCompile: "c1", EngagedMs: 5, CreatedMs: 9}); err != nil {
			return err
		}
		rec.Accepted = true
		return tx.MarkAccepted(ctx, rec.ID, rec.LastRead, 5, 1, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	// a second accept of the same compile is refused by the store
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		return tx.MarkAccepted(ctx, rec.ID, rec.LastRead, 6, 1, 1)
	})
	if binding.Code(err) != "unknown-compile" {
		t.Fatalf("second MarkAccepted: %v", err)
	}
	st, err := d.LoadConversation(t.Context(), "conv")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Found || st.Conversation.EngagedCompile != "c1" || len(st.Branches) != 1 || st.Branches[0].Owner != "c1" ||
		len(st.Compiles) != 1 || st.Compiles[0].AcceptedMs != 5 || st.Compiles[0].Stamped != 1 || !st.Compiles[0].Record.Accepted ||
		len(st.Releases) != 1 || st.Releases[0].Key != bdigest("k0") || st.Releases[0].Path != "messages.1.content.0" {
		t.Fatalf("state: %+v", st)
	}
	stamps, err := d.Stamps(t.Context(), []binding.Digest{bdigest("r1"), bdigest("absent")})
	if err != nil || len(stamps) != 1 || stamps[bdigest("r1")].Chain != bdigest("ch") || !stamps[bdigest("r1")].Pred.IsZero() {
		t.Fatalf("stamps: %+v %v", stamps, err)
	}
	if _, total, linked, _ := d.StampCounts(t.Context(), "conv"); total != 1 || linked != 0 {
		t.Fatalf("stamp count %d", total)
	}
	// A stamp made before its reply was read from the session file is
	// linked by the ingest that reads it, in the same transaction, once.
	r1 := bdigest("r1")
	reply := []Entry{{Line: 2, Offset: 100, Length: 80, Type: "message", ID: "e1", Role: "assistant",
		Thinking: []Thinking{{Index: 0, Signed: true, SigDigest: r1[:], Chars: 10}}}}
	ing := ingest(t, d, reportBatch("/w/conv.jsonl", Found, 180, 2, reply))
	if ing.Linked != 1 || !hasEvent(ing.Events, EventStamp, `"linked":1`) {
		t.Fatalf("first ingest of the reply: linked %d, events %+v", ing.Linked, ing.Events)
	}
	if _, _, linked, _ := d.StampCounts(t.Context(), "conv"); linked != 1 {
		t.Fatalf("linked stamps %d", linked)
	}
	ing = ingest(t, d, reportBatch("/w/conv.jsonl", Rewritten, 180, 2, reply))
	if ing.Linked != 0 || hasEvent(ing.Events, EventStamp, "") {
		t.Fatalf("the same reply read again linked again: %d, events %+v", ing.Linked, ing.Events)
	}
	// an engagement is never moved
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		return tx.UpsertConversation(ctx, ConversationRow{ID: "conv", EngagedCompile: "c9", EngagedMs: 99, SessionFile: "/f", CreatedMs: 9})
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := d.LoadConversation(t.Context(), "conv"); st.Conversation.EngagedCompile != "c1" || st.Conversation.SessionFile != "/f" {
		t.Fatalf("engagement moved or file not learned: %+v", st.Conversation)
	}
}

func TestEventBoundsAndPrune(t *testing.T) {
	d := mustOpen(t)
	if o, l, err := d.EventBounds(t.Context()); err != nil || o != 0 || l != 0 {
		t.Fatalf("empty bounds %d %d %v", o, l, err)
	}
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		for i := range 30 {
			if _, err := tx.AppendEvent(ctx, "accept", "c", map[string]int{"i": i}); err != nil {
				return err
			}
		}
		// the first ten are old
		_, err := tx.tx.ExecContext(ctx, `UPDATE events SET time_ms = ? WHERE seq <= 10`, old)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		n, err = tx.PruneEvents(ctx, EventRetention{MaxAge: time.Hour}, time.Now())
		return err
	})
	if err != nil || n != 10 {
		t.Fatalf("pruned by age %d: %v", n, err)
	}
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		n, err = tx.PruneEvents(ctx, EventRetention{MaxCount: 5, MaxAge: time.Hour}, time.Now())
		return err
	})
	if err != nil || n != 15 {
		t.Fatalf("pruned by count %d: %v", n, err)
	}
	if o, l, err := d.EventBounds(t.Context()); err != nil || o != 26 || l != 30 {
		t.Fatalf("bounds %d %d %v", o, l, err)
	}
	err = d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, `DELETE FROM events`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// an empty log still knows the last seq; the next one continues it
	if o, l, _ := d.EventBounds(t.Context()); o != 0 || l != 30 {
		t.Fatalf("bounds after emptying: %d %d", o, l)
	}
	d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		e, err := tx.AppendEvent(ctx, "accept", "c", nil)
		if e.Seq != 31 {
			t.Errorf("seq after emptying = %d", e.Seq)
		}
		return err
	})
}

func TestForgetCompiles(t *testing.T) {
	d := mustOpen(t)
	for _, id := range []string{"a", "b", "c"} {
		rec := insertCompile(t, d, id, "conv", "leaf-"+id)
		if id == "c" {
			continue
		}
		err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
			rec.Accepted = true
			return tx.MarkAccepted(ctx, rec.ID, rec.LastRead, 1, 0, 0)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := d.Write(t.Context(), func(ctx context.Context, tx *Tx) error {
		return tx.ForgetCompiles(ctx, []string{"a", "c"}, []string{"b"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, found, _ := d.Compile(t.Context(), "a"); !found || c.Record != nil {
		t.Fatalf("a: found %v record %v", found, c.Record != nil)
	}
	if _, found, _ := d.Compile(t.Context(), "b"); found {
		t.Fatal("b not forgotten")
	}
	// an unaccepted compile never loses its record (only forgotten whole)
	if c, found, _ := d.Compile(t.Context(), "c"); !found || c.Record == nil {
		t.Fatal("c (unaccepted) lost its record")
	}
}

func hasEvent(evs []Event, typ, fields string) bool {
	for _, e := range evs {
		if e.Type == typ && strings.Contains(string(e.Fields), fields) {
			return true
		}
	}
	return false
}

// TestStampsEveryListLength: Stamps answers exactly the stored stamps of
// the keys asked, whatever their number (each IN-list size, the padding of
// a short part, repeats and absent keys), and reads by the kept statements
// of its few sizes, not by a query prepared per call.
func TestStampsEveryListLength(t *testing.T) {
	d := mustOpen(t)
	ctx := t.Context()
	const stored = 500
	var rows []StampRow
	for i := range stored {
		k := fmt.Sprint("key", i)
		rows = append(rows, StampRow{Stamp: binding.Stamp{Key: bdigest(k), Seed: bdigest("seed"), Chain: bdigest(k + "chain"), Model: "m"},
			Source: "accept", Conversation: "conv", Branch: "b", CreatedMs: int64(i)})
	}
	if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		_, err := tx.InsertStamps(ctx, rows)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 199, 200, 201, 264, 401, 700} {
		var keys []binding.Digest
		want := map[binding.Digest]int64{}
		for i := range n {
			// every third key absent, every fifth asked twice
			k := bdigest(fmt.Sprint("key", (i*7)%stored))
			if i%3 == 2 {
				k = bdigest(fmt.Sprint("absent", i))
			} else {
				want[k] = int64((i * 7) % stored)
			}
			keys = append(keys, k)
			if i%5 == 4 {
				keys = append(keys, k)
			}
		}
		got, err := d.Stamps(ctx, keys)
		if err != nil {
			t.Fatalf("%d keys: %v", n, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d keys: %d stamps, want %d", n, len(got), len(want))
		}
		for k, ms := range want {
			s, ok := got[k]
			if !ok || s.CreatedMs != ms || s.Key != k || s.Chain != bdigest(fmt.Sprint("key", ms, "chain")) {
				t.Fatalf("%d keys: stamp of key %d: %+v (found %v)", n, ms, s, ok)
			}
		}
	}
	if len(d.reads.m) != len(stampsQueries) {
		t.Fatalf("%d statements kept, want %d: one per IN-list size", len(d.reads.m), len(stampsQueries))
	}
	for _, q := range stampsQueries {
		if d.reads.m[q] == nil {
			t.Fatalf("no kept statement for %.100s...", q)
		}
	}
}
