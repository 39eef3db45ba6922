package binding

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// cloneRecord copies rec's Sent and Kept (and each message's blocks) into
// arrays of their own: the contents ShareTail must never change.
func cloneRecord(rec *CompileRecord) *CompileRecord {
	c := *rec
	if rec.Sent != nil {
		c.Sent = make([]SentMessage, len(rec.Sent))
		for i, m := range rec.Sent {
			if m.Blocks != nil {
				m.Blocks = append(make([]uint64, 0, len(m.Blocks)), m.Blocks...)
			}
			c.Sent[i] = m
		}
	}
	if rec.Kept != nil {
		c.Kept = append(make([]KeptBlock, 0, len(rec.Kept)), rec.Kept...)
	}
	return &c
}

// TestShareTailGrowing: the records of a conversation growing turn after
// turn (each compile's owner the one before) share one array, and every
// record still reads exactly as decided.
func TestShareTailGrowing(t *testing.T) {
	const turns = 40
	var tip ShareTip
	var recs, want []*CompileRecord
	var owner *CompileRecord
	stamps := map[Digest]*Stamp{}
	for n := 2; n < 2+turns; n++ {
		r, err := ParseRequest(genRequestPrefix(9, n, 2+turns))
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range stampsFor(r) {
			stamps[k] = s
		}
		out, err := Compile(CompileInput{ID: fmt.Sprint("c", n), Request: r, Engaged: true, Stamps: StampsFor(r, stamps), Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		rec := out.Record
		want = append(want, cloneRecord(rec))
		ShareTail(rec, owner, &tip)
		recs = append(recs, rec)
		owner = rec
	}
	for i, rec := range recs {
		if !reflect.DeepEqual(rec, want[i]) {
			t.Fatalf("record %d changed when shared", i)
		}
	}
	// Extended in place, an array is only left when it is full (append
	// doubles it): a few arrays in all, not one per record.
	sent, kept := map[*SentMessage]bool{}, map[*KeptBlock]bool{}
	for _, rec := range recs[1:] {
		if len(rec.Sent) == 0 || len(rec.Kept) == 0 {
			t.Fatal("nothing to share")
		}
		sent[&rec.Sent[0]], kept[&rec.Kept[0]] = true, true
	}
	if len(sent) > 8 || len(kept) > 8 {
		t.Errorf("%d records hold %d Sent arrays and %d Kept arrays: they do not share", len(recs), len(sent), len(kept))
	}
}

// TestShareTailAnyOrder: records made from any earlier record, in any order
// (retries from an older base, branches, a record sharing nothing), each
// with a changed or a new tail, never change one another: every record
// reads as it was made, through every later ShareTail.
func TestShareTailAnyOrder(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tip ShareTip
		var recs, want []*CompileRecord
		word := func() uint64 { return rng.Uint64N(4) }
		for step := 0; step < 30; step++ {
			var base *CompileRecord
			if len(recs) > 0 && rng.IntN(5) > 0 {
				base = recs[rng.IntN(len(recs))]
			}
			rec := &CompileRecord{ID: fmt.Sprint(seed, "/", step)}
			if base != nil {
				// the base's first n elements, equal but in arrays of their own
				c := cloneRecord(base)
				rec.Sent = c.Sent[:rng.IntN(len(c.Sent)+1)]
				rec.Kept = c.Kept[:rng.IntN(len(c.Kept)+1)]
			}
			for range rng.IntN(4) {
				m := SentMessage{Orig: len(rec.Sent), Frame: word()}
				if rng.IntN(3) > 0 {
					m.Blocks = []uint64{}
					for range rng.IntN(3) {
						m.Blocks = append(m.Blocks, word())
					}
				}
				rec.Sent = append(rec.Sent, m)
			}
			for range rng.IntN(3) {
				rec.Kept = append(rec.Kept, KeptBlock{Key: Digest{byte(word())}, Sent: Pos{len(rec.Kept), 0}})
			}
			want = append(want, cloneRecord(rec))
			ShareTail(rec, base, &tip)
			recs = append(recs, rec)
			for i, r := range recs {
				if !reflect.DeepEqual(r, want[i]) {
					t.Fatalf("seed %d step %d: record %d reads %+v, was made %+v", seed, step, i, r, want[i])
				}
			}
		}
	}
}

// TestCompileShare: a compile given Share makes exactly the record a
// compile without it makes and ShareTail then shares, turn after turn in
// one reused DecideMemory, from the owner, an older record or none; and
// no record it made changes under a later compile (the scratch it was
// built in is reused each turn).
func TestCompileShare(t *testing.T) {
	const turns = 40
	var tipA, tipB ShareTip
	var mem DecideMemory
	var recsA, recsB, want []*CompileRecord
	stamps := map[Digest]*Stamp{}
	rng := rand.New(rand.NewPCG(3, 9))
	// one conversation growing, then another one shrinking: the scratch is
	// then large enough to be written again in place, with other values,
	// under any record that still used it
	for step := 0; step < 2*turns; step++ {
		n, conv := 2+step, uint64(9)
		if step >= turns {
			n, conv = 2+2*turns-1-step, 13
		}
		r, err := ParseRequest(genRequestPrefix(conv, n, 2+turns))
		if err != nil {
			t.Fatal(err)
		}
		for k, s := range stampsFor(r) {
			stamps[k] = s
		}
		pick := len(recsA) - 1 // the owner
		switch rng.IntN(6) {
		case 0:
			pick = -1 // none
		case 1:
			pick = rng.IntN(len(recsA)+1) - 1 // any
		}
		var baseA, baseB *CompileRecord
		if pick >= 0 {
			baseA, baseB = recsA[pick], recsB[pick]
		}
		in := CompileInput{ID: fmt.Sprint("c", n), Request: r, Engaged: true, Stamps: StampsFor(r, stamps), Owner: baseA}
		a, err := Compile(in)
		if err != nil {
			t.Fatal(err)
		}
		ShareTail(a.Record, baseA, &tipA)
		in.Owner, in.Memory, in.Share = baseB, &mem, &RecordShare{Base: baseB, Tip: &tipB}
		b, err := Compile(in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Record, b.Record) {
			t.Fatalf("turn %d: the shared record differs from ShareTail's", n)
		}
		recsA, recsB = append(recsA, a.Record), append(recsB, b.Record)
		want = append(want, cloneRecord(b.Record))
		for i, rec := range recsB {
			if !reflect.DeepEqual(rec, want[i]) {
				t.Fatalf("turn %d: record %d changed", n, i)
			}
		}
	}
}
