package binding

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// spliceKnown is what compile by reference builds: into's messages array
// with the first n messages of from (their bytes, separators included)
// put before its own, or nil when either has no messages array to splice.
func spliceKnown(from []byte, r *Request, n int, into []byte) []byte {
	if r == nil || n < 1 || n > len(r.Messages) {
		return nil
	}
	at := bytes.Index(into, []byte(`"messages":[`))
	if at < 0 {
		return nil
	}
	at += len(`"messages":[`)
	prefix := from[r.Messages[0].Span.Start:r.Messages[n-1].Span.End]
	out := append([]byte(nil), into[:at]...)
	out = append(out, prefix...)
	if rest := bytes.TrimLeft(into[at:], " \t\r\n"); len(rest) > 0 && rest[0] != ']' {
		out = append(out, ',')
	}
	return append(out, into[at:]...)
}

// placeKnown is spliceKnown through KnownPrefix.Place, as the daemon's
// rebuild does: the body and the KnownPrefix that placed its prefix (nil
// when into has no messages array).
func placeKnown(from []byte, r *Request, n int, into []byte) ([]byte, *KnownPrefix) {
	at := bytes.Index(into, []byte(`"messages":[`))
	if r == nil || n < 1 || n > len(r.Messages) || at < 0 {
		return nil, nil
	}
	at += len(`"messages":[`)
	k := &KnownPrefix{Body: from, Request: r, Messages: n}
	out := append(make([]byte, 0, len(from)+len(into)+1), into[:at]...)
	out = k.Place(out)
	if rest := bytes.TrimLeft(into[at:], " \t\r\n"); len(rest) > 0 && rest[0] != ']' {
		out = append(out, ',')
	}
	return append(out, into[at:]...), k
}

// parseKnownAgrees fails t unless body parses with Known exactly as
// without (Request and error alike), with and without a memo, and reports
// how many messages the known parse took from Known.
func parseKnownAgrees(t *testing.T, body []byte, k *KnownPrefix, memo *Memo) int {
	t.Helper()
	want, werr := ParseRequest(body)
	var before *Request
	if k != nil && k.Request != nil {
		before = deepCopyRequest(k.Request)
	}
	p := Parser{Known: k, Memo: memo}
	got, gerr := p.Parse(body)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("known parse: error %v, want %v", gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("known parse (%d taken) differs from a parse without it", p.known)
	}
	thinkingAgrees(t, got)
	if p.Known != nil {
		t.Fatal("Known kept after the parse")
	}
	if before != nil && !reflect.DeepEqual(before, k.Request) {
		t.Fatal("the known parse changed the earlier request (its blocks may be shared)")
	}
	return p.known
}

// parseInPlaceAgrees fails t unless whole, rebuilt in the memory of an
// earlier parse of itself after its first n messages (as the daemon
// extends a base), parses with that parse Known and its memory as Spare
// exactly as without, leaving the earlier parse's first n messages as
// they were.
func parseInPlaceAgrees(t *testing.T, whole []byte, n int) {
	t.Helper()
	earlier := append(make([]byte, 0, 2*len(whole)+1), whole...)
	var ep Parser
	er, err := ep.Parse(earlier)
	if err != nil || !er.Bound || n < 1 || n > len(er.Messages) {
		return
	}
	mem := ep.Built()
	pe := er.Messages[n-1].Span.End
	tail := whole[pe:]
	ext := append(earlier[:pe], tail...)
	if &ext[0] != &earlier[0] {
		t.Fatal("the extension moved")
	}
	kept := deepCopyRequest(&Request{Messages: er.Messages[:n]})
	k := &KnownPrefix{Body: earlier[:pe], Request: er, Messages: n}
	k.PlacedAt(ext)
	want, werr := ParseRequest(whole)
	p := Parser{Known: k, Spare: mem}
	got, gerr := p.Parse(ext)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("in place: error %v, want %v", gerr, werr)
	}
	if gerr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("in place (%d taken) differs from a parse without Known", p.KnownTaken())
	}
	thinkingAgrees(t, got)
	if p.KnownTaken() == n && !p.inPlace {
		t.Fatal("the prefix was taken, not in place")
	}
	if !reflect.DeepEqual(kept, deepCopyRequest(&Request{Messages: er.Messages[:n]})) {
		t.Fatal("the earlier parse's first messages changed")
	}
}

// thinkingAgrees fails t unless r (nil: no parse) records exactly where
// its messages' thinking blocks are, when its parse recorded them.
func thinkingAgrees(t *testing.T, r *Request) {
	t.Helper()
	if r == nil || r.thinking == nil {
		return
	}
	want := appendThinking(nil, r.Messages, 0)
	if len(want) == 0 && len(r.thinking) == 0 {
		return
	}
	if !reflect.DeepEqual(r.thinking, want) {
		t.Fatalf("the parse recorded thinking blocks at %v, they are at %v", r.thinking, want)
	}
}

// deepCopyRequest copies r and every message's blocks: a later parse that
// shares them must leave the copy equal to r.
func deepCopyRequest(r *Request) *Request {
	c := *r
	if r.Messages != nil {
		c.Messages = make([]Message, len(r.Messages))
		for i, m := range r.Messages {
			if m.Blocks != nil {
				m.Blocks = append(make([]Block, 0, len(m.Blocks)), m.Blocks...)
			}
			c.Messages[i] = m
		}
	}
	return &c
}

// TestParseKnownIsParse: a body that begins with an earlier request's
// messages parses, with that request Known, to exactly the Request a parse
// without it gives, and the known messages are taken (not parsed again)
// whenever they are byte for byte the earlier ones in the same shape; any
// other claim is ignored, never trusted.
func TestParseKnownIsParse(t *testing.T) {
	conv, msgs := converseAndMessages(6)
	grown := genRequestPrefix(7, 9, 12)
	short := genRequestPrefix(7, 6, 12)
	tests := []struct {
		name       string
		base, next []byte
		n          int
		taken      int // want: messages taken from Known
	}{
		{"a grown conversation, all shared", short, grown, 6, 6},
		{"all but the last shared", short, grown, 5, 5},
		{"one shared", short, grown, 1, 1},
		{"converse", conv, conv, 5, 5},
		{"messages body against a converse base", conv, msgs, 3, 0},
		{"converse body against a messages base", msgs, conv, 3, 0},
		{"the claim is longer than the base", short, grown, 99, 0},
		{"no message claimed", short, grown, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, err := ParseRequest(tc.base)
			if err != nil {
				t.Fatal(err)
			}
			body := tc.next
			if tc.n >= 1 && tc.n <= len(base.Messages) {
				// the next request sent whole: the base's first n messages
				// then the messages after them in next
				nr, err := ParseRequest(tc.next)
				if err != nil {
					t.Fatal(err)
				}
				if tc.taken > 0 {
					body = spliceKnown(tc.base, base, tc.n, dropMessages(tc.next, nr, tc.n))
				}
			}
			k := &KnownPrefix{Body: tc.base, Request: base, Messages: tc.n}
			if got := parseKnownAgrees(t, body, k, nil); got != tc.taken {
				t.Fatalf("took %d messages from Known, want %d", got, tc.taken)
			}
			if got := parseKnownAgrees(t, body, &KnownPrefix{Body: tc.base, Request: base, Messages: tc.n}, &Memo{}); got != tc.taken {
				t.Fatalf("with a memo: took %d messages from Known, want %d", got, tc.taken)
			}
		})
	}

	t.Run("a changed old message is parsed, not taken", func(t *testing.T) {
		base, _ := ParseRequest(short)
		changed := bytes.Replace(grown, []byte(`"role":"user"`), []byte(`"role":"user" `), 1)
		if bytes.Equal(changed, grown) {
			t.Fatal("nothing changed")
		}
		if got := parseKnownAgrees(t, changed, &KnownPrefix{Body: short, Request: base, Messages: 6}, nil); got != 0 {
			t.Fatalf("took %d messages of a changed history", got)
		}
	})
	t.Run("an unbound base is no prefix", func(t *testing.T) {
		base, _ := ParseRequest(short)
		un := *base
		un.Bound, un.NotMessages = false, whyUntyped
		if got := parseKnownAgrees(t, grown, &KnownPrefix{Body: short, Request: &un, Messages: 6}, nil); got != 0 {
			t.Fatalf("took %d messages of an unbound base", got)
		}
	})
	t.Run("MaxMessages holds with a known prefix", func(t *testing.T) {
		base, _ := ParseRequest(short)
		for _, max := range []int{3, 6, 9, 10} {
			want, werr := (&Parser{MaxMessages: max}).Parse(grown)
			p := Parser{MaxMessages: max, Known: &KnownPrefix{Body: short, Request: base, Messages: 6}}
			got, gerr := p.Parse(grown)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("max %d: %v / %v", max, gerr, werr)
			}
		}
	})
}

// dropMessages is body with its first n messages (as r parsed them) cut
// from its messages array.
func dropMessages(body []byte, r *Request, n int) []byte {
	if n >= len(r.Messages) {
		start := r.Messages[0].Span.Start
		end := r.Messages[len(r.Messages)-1].Span.End
		return append(append([]byte(nil), body[:start]...), body[end:]...)
	}
	start := r.Messages[0].Span.Start
	next := r.Messages[n].Span.Start
	return append(append([]byte(nil), body[:start]...), body[next:]...)
}

// FuzzParseKnown: whatever the earlier body and whatever the new one, a
// parse with Known returns what a parse without it returns.
func FuzzParseKnown(f *testing.F) {
	short, grown := genRequestPrefix(3, 4, 8), genRequestPrefix(3, 7, 8)
	conv, msgs := converseAndMessages(3)
	f.Add(short, grown, uint8(4))
	f.Add(conv, conv, uint8(2))
	f.Add(msgs, conv, uint8(1))
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":"s"}]}]}`),
		[]byte(`{"model":"m","messages":[{"role":"user","content":[]}],"system":"s"}`), uint8(2))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"text":"q"},{"cachePoint":{}}]}],"toolConfig":{}}`),
		[]byte(`{"messages":[],"toolConfig":{"tools":[]}}`), uint8(1))
	memo := &Memo{MaxBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, base, next []byte, n uint8) {
		r, err := ParseRequest(base)
		if err != nil {
			return
		}
		k := &KnownPrefix{Body: base, Request: r, Messages: int(n)}
		parseKnownAgrees(t, next, k, nil)
		if whole := spliceKnown(base, r, int(n), next); whole != nil {
			parseKnownAgrees(t, whole, &KnownPrefix{Body: base, Request: r, Messages: int(n)}, nil)
			parseKnownAgrees(t, whole, &KnownPrefix{Body: base, Request: r, Messages: int(n)}, memo)
			placed, k := placeKnown(base, r, int(n), next)
			if !bytes.Equal(placed, whole) {
				t.Fatalf("Place built %q, want %q", placed, whole)
			}
			parseKnownAgrees(t, placed, k, nil)
			// built in the memory of another parse of base's bytes
			var sp Parser
			if _, err := sp.Parse(base); err == nil {
				parseSpareAgrees(t, whole, &KnownPrefix{Body: base, Request: r, Messages: int(n)}, sp.Built())
			}
			// extended in place: the whole request parsed into memory with
			// room, then the same bytes written after its first n messages
			// in that memory, and parsed there
			parseInPlaceAgrees(t, whole, int(n))
		}
	})
}

// BenchmarkParseKnown: a long conversation's next request parsed with its
// last request Known (what compile by reference does every turn), against
// copying the same bytes once (the least a turn that holds the whole
// request does), in the same run: ratio is known-parse ÷ copy.
func BenchmarkParseKnown(b *testing.B) {
	const n = 1000 // about 2 MB
	prev := genRequestPrefix(42, n, n+2)
	pr, err := ParseRequest(prev)
	if err != nil {
		b.Fatal(err)
	}
	next := genRequestPrefix(42, n+2, n+2)
	nr, err := ParseRequest(next)
	if err != nil {
		b.Fatal(err)
	}
	body := spliceKnown(prev, pr, n-1, dropMessages(next, nr, n-1))
	var p Parser
	var copied []byte
	var copyDur, parseDur time.Duration
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		t0 := time.Now()
		copied = append(make([]byte, 0, len(body)), body...)
		t1 := time.Now()
		p.Known = &KnownPrefix{Body: prev, Request: pr, Messages: n - 1}
		if _, err := p.Parse(body); err != nil {
			b.Fatal(err)
		}
		copyDur += t1.Sub(t0)
		parseDur += time.Since(t1)
	}
	if p.KnownTaken() != n-1 {
		b.Fatalf("took %d messages, want %d", p.KnownTaken(), n-1)
	}
	_ = copied
	b.ReportMetric(float64(parseDur)/float64(copyDur), "ratio")
	b.ReportMetric(float64(parseDur.Microseconds())/float64(b.N), "parse-µs/op")
	b.ReportMetric(float64(copyDur.Microseconds())/float64(b.N), "copy-µs/op")
}

// TestParseKnownPlaced: a body built with Place takes the known prefix
// where Place copied it, without comparing it again; anywhere else, or in
// a second parse, the prefix is compared as any claim is.
func TestParseKnownPlaced(t *testing.T) {
	base, next := genRequestPrefix(11, 6, 9), genRequestPrefix(11, 9, 9)
	r, err := ParseRequest(base)
	if err != nil {
		t.Fatal(err)
	}
	nr, err := ParseRequest(next)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	tail := dropMessages(next, nr, n)
	body, k := placeKnown(base, r, n, tail)
	if !bytes.Equal(body, spliceKnown(base, r, n, tail)) {
		t.Fatal("Place built another body than the splice")
	}
	if got := parseKnownAgrees(t, body, k, nil); got != n {
		t.Fatalf("placed body: took %d messages, want %d", got, n)
	}

	// The same bytes elsewhere, one of the prefix's changed: compared, so
	// not taken, and the parse is a parse without Known.
	body, k = placeKnown(base, r, n, tail)
	at := bytes.Index(body, []byte(`"messages":[`)) + len(`"messages":[`)
	moved := append([]byte(nil), body...)
	i := at + bytes.IndexByte(moved[at:], 'a') // inside the first message
	moved[i] = 'b'
	if got := parseKnownAgrees(t, moved, k, nil); got != 0 {
		t.Fatalf("a changed copy of the placed body: took %d messages, want 0", got)
	}

	// A placement serves one parse: the memory changed after it is
	// compared by the next.
	body, k = placeKnown(base, r, n, tail)
	if got := parseKnownAgrees(t, body, k, nil); got != n {
		t.Fatalf("placed body: took %d messages, want %d", got, n)
	}
	body[i] = 'b'
	if got := parseKnownAgrees(t, body, k, nil); got != 0 {
		t.Fatalf("second parse of changed placed memory: took %d messages, want 0", got)
	}

	// Where Place copied them, the bytes are not compared: Place's
	// contract is that the caller leaves them as copied (the daemon's
	// rebuild appends only after them). Written over anyway, the prefix
	// is still taken: this pins that the compare is skipped.
	body, k = placeKnown(base, r, n, tail)
	body[i] = 'b'
	var p Parser
	p.Known = k
	if _, err := p.Parse(body); err != nil {
		t.Fatal(err)
	}
	if p.KnownTaken() != n {
		t.Fatalf("placed prefix compared again: took %d messages, want %d", p.KnownTaken(), n)
	}

	// Extended in place: the earlier body's own memory, its prefix left
	// where it lies and the new messages written after it (the daemon's
	// rebuild when it extends its base). The parse takes the prefix as a
	// placement; the same bytes in other memory are not one.
	placed, _ := placeKnown(base, r, n, tail)
	earlier := append(make([]byte, 0, 2*len(placed)), placed...)
	er, err := ParseRequest(earlier)
	if err != nil {
		t.Fatal(err)
	}
	pe := er.Messages[n-1].Span.End
	ext := earlier[:pe]
	if rest := tail[at:]; bytes.TrimLeft(rest, " \t\r\n")[0] != ']' {
		ext = append(ext, ',')
	}
	ext = append(ext, tail[at:]...)
	if &ext[0] != &earlier[0] || !bytes.Equal(ext, spliceKnown(earlier, er, n, tail)) {
		t.Fatal("the extension is not the splice, in the earlier body's memory")
	}
	k = &KnownPrefix{Body: earlier, Request: er, Messages: n}
	if k.PlacedAt(append([]byte(nil), ext...)) {
		t.Fatal("PlacedAt took a copy for the earlier body's memory")
	}
	if !k.PlacedAt(ext) {
		t.Fatal("PlacedAt refused the earlier body's own memory")
	}
	if got := parseKnownAgrees(t, ext, k, nil); got != n {
		t.Fatalf("extended body: took %d messages, want %d", got, n)
	}
	// and not compared: written over after PlacedAt, it is still taken
	k = &KnownPrefix{Body: earlier, Request: er, Messages: n}
	k.PlacedAt(ext)
	ext[i] = 'b'
	p = Parser{Known: k}
	if _, err := p.Parse(ext); err != nil {
		t.Fatal(err)
	}
	if p.KnownTaken() != n {
		t.Fatalf("prefix placed in place compared again: took %d messages, want %d", p.KnownTaken(), n)
	}
	if (&KnownPrefix{Body: earlier, Request: er, Messages: len(er.Messages) + 1}).PlacedAt(ext) {
		t.Fatal("PlacedAt placed more messages than the earlier body has")
	}

	// A KnownPrefix that offers nothing places nothing.
	empty := &KnownPrefix{Body: base, Request: r, Messages: 0}
	if out := empty.Place([]byte("x")); string(out) != "x" {
		t.Fatalf("Place of no messages appended %q", out[1:])
	}
}
