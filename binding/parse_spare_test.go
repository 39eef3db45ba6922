package binding

import (
	"bytes"
	"reflect"
	"testing"
)

// parseSpareAgrees fails t unless body parses with spare as Spare exactly
// as without, and reports whether the Request was built in the spare
// memory (its first message at the spare's first element).
func parseSpareAgrees(t *testing.T, body []byte, k *KnownPrefix, spare RequestMemory) bool {
	t.Helper()
	want, werr := ParseRequest(body)
	p := Parser{Known: k, Spare: spare}
	got, gerr := p.Parse(body)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("parse with a spare: error %v, want %v", gerr, werr)
	}
	built := p.Built()
	if gerr != nil {
		if built.Messages != nil || built.Blocks != nil {
			t.Fatal("a failed parse handed over memory")
		}
		return false
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the parse with a spare differs from a parse without it")
	}
	if p.Spare.Messages != nil || p.Spare.Blocks != nil || p.Built().Messages != nil {
		t.Fatal("the parser kept the spare, or handed its memory over twice")
	}
	if len(got.Messages) > 0 && &built.Messages[:1][0] != &got.Messages[0] {
		t.Fatal("Built is not the memory the Request is in")
	}
	return len(got.Messages) > 0 && cap(spare.Messages) > 0 && &spare.Messages[:1][0] == &got.Messages[0]
}

// TestParseSpare: a parse given the memory of a Request nobody reads any
// more builds in it when it is large enough, and returns exactly the
// Request a parse without it returns, with or without a known prefix.
func TestParseSpare(t *testing.T) {
	short := genRequestPrefix(7, 6, 12)
	grown := genRequestPrefix(7, 9, 12)
	long := genRequestPrefix(8, 40, 40)
	memoryOf := func(body []byte) RequestMemory {
		var p Parser
		if _, err := p.Parse(body); err != nil {
			t.Fatal(err)
		}
		return p.Built()
	}
	t.Run("a large enough spare is built in", func(t *testing.T) {
		if !parseSpareAgrees(t, grown, nil, memoryOf(long)) {
			t.Fatal("the spare was not used")
		}
	})
	t.Run("a spare too small is not", func(t *testing.T) {
		if parseSpareAgrees(t, long, nil, memoryOf(short)) {
			t.Fatal("a spare too small was built in")
		}
	})
	t.Run("with a known prefix", func(t *testing.T) {
		base, err := ParseRequest(short)
		if err != nil {
			t.Fatal(err)
		}
		nr, _ := ParseRequest(grown)
		body := spliceKnown(short, base, 5, dropMessages(grown, nr, 5))
		before := deepCopyRequest(base)
		if !parseSpareAgrees(t, body, &KnownPrefix{Body: short, Request: base, Messages: 5}, memoryOf(long)) {
			t.Fatal("the spare was not used")
		}
		if !reflect.DeepEqual(before, base) {
			t.Fatal("the known request changed")
		}
	})
	t.Run("the spare's old contents do not show", func(t *testing.T) {
		// a spare full of another conversation's messages and blocks,
		// then a body with fewer: nothing of the old shows through
		spare := memoryOf(long)
		for _, body := range [][]byte{short, []byte(`{"messages":[]}`), []byte(`{"messages":[{"role":"user","content":"x"}]}`), []byte(`{"model":"m"}`)} {
			parseSpareAgrees(t, body, nil, spare)
		}
	})
	t.Run("a failed parse hands nothing over", func(t *testing.T) {
		parseSpareAgrees(t, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":1}]}`), nil, memoryOf(long))
	})
}

// TestParseSpareGrowing: a long conversation's turns, each parsed by
// reference to the one before and given the memory of the turn before
// that (as the daemon's bases hand it over, bases_spare.go). Each turn
// asks a few messages more than the last; memory a turn had to make must
// still hold the ask two turns later, when it comes back as the spare.
// (Memory made to the exact size asked never held the next ask, and every
// turn made new arrays.) The first turn is parsed whole, its memory sized
// by its bytes, so the rule is checked from the memory of the second on.
func TestParseSpareGrowing(t *testing.T) {
	var mems []RequestMemory
	var made []bool // the turn's memory was made new, not its spare
	var prev []byte
	var prevReq *Request
	reused := 0
	for turn := range 24 {
		body := genRequestPrefix(9, 100+2*turn, 200)
		want, err := ParseRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		p := Parser{}
		if prevReq != nil {
			p.Known = &KnownPrefix{Body: prev, Request: prevReq, Messages: len(prevReq.Messages)}
		}
		var spare RequestMemory
		if turn >= 2 {
			spare = mems[turn-2]
			p.Spare = spare
		}
		got, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		if turn > 0 && p.KnownTaken() != len(prevReq.Messages) {
			t.Fatalf("turn %d took %d known messages, want %d", turn, p.KnownTaken(), len(prevReq.Messages))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("turn %d: the parse differs from a parse without Known and Spare", turn)
		}
		mem := p.Built()
		inSpare := turn >= 2 && &mem.Messages[:1][0] == &spare.Messages[:1][0]
		if inSpare {
			reused++
		}
		if turn >= 3 && made[turn-2] && !inSpare {
			t.Fatalf("turn %d (%d messages) was not built in the memory turn %d made (capacity %d messages, %d blocks)",
				turn, len(got.Messages), turn-2, cap(spare.Messages), cap(spare.Blocks))
		}
		mems, made = append(mems, mem), append(made, !inSpare)
		prev, prevReq = body, got
	}
	if reused < 24/2 {
		t.Fatalf("%d of 24 turns were built in their spare", reused)
	}
	t.Logf("%d of 24 turns built in their spare", reused)
}

// TestParseKnownInPlace: given the known request's own memory as Spare, a
// parse that takes the known prefix keeps it where it lies (the new
// request's first messages and blocks are the known request's, unmoved,
// and the known request's first Known.Messages messages read as before)
// and is exactly a parse without it; one that cannot take the prefix
// leaves that memory whole, every message of it, and parses afresh.
func TestParseKnownInPlace(t *testing.T) {
	const n = 5
	base, next := genRequestPrefix(11, 6, 9), genRequestPrefix(11, 9, 9)
	nr, err := ParseRequest(next)
	if err != nil {
		t.Fatal(err)
	}
	tail := dropMessages(next, nr, n)
	// the earlier request, parsed into memory with room (a rebuild's)
	earlier := func() ([]byte, *Request, RequestMemory) {
		body, _ := placeKnown(base, mustParse(t, string(base)), n, tail)
		body = append(make([]byte, 0, 2*len(body)), body...)
		var p Parser
		r, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		return body, r, p.Built()
	}
	extendBody := func(body []byte, r *Request) []byte {
		at := r.Messages[0].Span.Start
		out := body[:r.Messages[n-1].Span.End]
		return append(append(out, ','), tail[at:]...)
	}

	body, r, mem := earlier()
	kept := deepCopyRequest(&Request{Messages: r.Messages[:n]})
	ext := extendBody(body, r)
	k := &KnownPrefix{Body: body[:r.Messages[n-1].Span.End], Request: r, Messages: n}
	k.PlacedAt(ext)
	want, _ := ParseRequest(ext)
	p := Parser{Known: k, Spare: mem}
	got, err := p.Parse(ext)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the parse in place differs from a parse without Known")
	}
	withBlocks := -1
	for j := range n {
		if len(r.Messages[j].Blocks) > 0 {
			withBlocks = j
		}
	}
	if withBlocks < 0 {
		t.Fatal("no known message has blocks")
	}
	if p.KnownTaken() != n || &got.Messages[0] != &mem.Messages[:1][0] || &got.Messages[withBlocks].Blocks[0] != &r.Messages[withBlocks].Blocks[0] {
		t.Fatalf("took %d messages, not in the known request's memory", p.KnownTaken())
	}
	if !reflect.DeepEqual(kept, deepCopyRequest(&Request{Messages: r.Messages[:n]})) {
		t.Fatal("the known messages changed under the parse in place")
	}
	if built := p.Built(); &built.Messages[:1][0] != &mem.Messages[:1][0] {
		t.Fatal("Built is not the memory extended")
	}

	// A prefix the parse cannot take (a byte of it changed, not placed):
	// the known request's memory is left whole.
	body, r, mem = earlier()
	whole := deepCopyRequest(r)
	ext = extendBody(body, r)
	changed := append([]byte(nil), ext...)
	at := r.Messages[1].Span.Start
	i := at + bytes.IndexByte(changed[at:r.Messages[1].Span.End], 'a')
	if i < at {
		t.Fatal("no 'a' in the second message")
	}
	changed[i] = 'b' // inside the second message, still valid JSON
	p = Parser{Known: &KnownPrefix{Body: body, Request: r, Messages: n}, Spare: mem}
	if got, err = p.Parse(changed); err != nil {
		t.Fatal(err)
	}
	if want, _ := ParseRequest(changed); !reflect.DeepEqual(got, want) || p.KnownTaken() != 0 {
		t.Fatalf("a changed prefix: took %d messages, or differs from a parse without Known", p.KnownTaken())
	}
	if !reflect.DeepEqual(whole, r) {
		t.Fatal("a parse that took nothing wrote over the known request")
	}
	if &got.Messages[0] == &mem.Messages[:1][0] {
		t.Fatal("a parse that took nothing was built in the known request's memory")
	}
}
