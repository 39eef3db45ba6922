package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBaseShared: the messages a new request shares byte for byte with
// the history's base, separators included, with at least one left new,
// and the digest the daemon checks: the bytes from the first message's
// first byte to the last shared one's last.
func TestBaseShared(t *testing.T) {
	old := []byte(`{"messages":[{"a":1}, {"b":2},{"c":3}]}`)
	_, oldEls, _ := messageSpans(old)
	b := newBases(1 << 20)
	b.put("k", "c_1", old, oldEls, nil)
	bs := b.get("k")
	for _, c := range []struct {
		body string
		n    int
		upto string // the shared text
	}{
		{`{"messages":[{"a":1}, {"b":2},{"c":3},{"d":4}]}`, 3, `{"a":1}, {"b":2},{"c":3}`},
		{`{"x":0,"messages":[{"a":1}, {"b":2},{"c":3}]}`, 2, `{"a":1}, {"b":2}`},
		{`{"messages":[{"a":1},{"b":2},{"c":3},{"d":4}]}`, 1, `{"a":1}`}, // another separator
		{`{"messages":[{"a":1}, {"b":3},{"c":3},{"d":4}]}`, 1, `{"a":1}`},
		{`{"messages":[{"a":2}, {"b":2}]}`, 0, ``},
		{`{"messages":[{"a":1}]}`, 0, ``},
	} {
		body := []byte(c.body)
		_, els, err := messageSpans(body)
		if err != nil {
			t.Fatal(err)
		}
		n, digest := bs.shared(body, els)
		want := ""
		if c.upto != "" {
			sum := sha256.Sum256([]byte(c.upto))
			want = hex.EncodeToString(sum[:])
		}
		if n != c.n || digest != want {
			t.Errorf("%s: shared %d %s, want %d (%s)", c.body, n, digest, c.n, c.upto)
		}
	}
}

// TestBasesBounded: past MaxHeld the least recently used history goes.
func TestBasesBounded(t *testing.T) {
	body := []byte(`{"messages":[{"t":"0123456789012345678901234567890123456789"}]}`)
	_, els, _ := messageSpans(body)
	probe := newBases(1 << 20)
	probe.put("x", "c_0", body, els, nil)
	one := probe.get("x").held() // the region, its ends and its marks
	max := 2*one + one/2         // room for two histories, not three
	b := newBases(max)
	b.put("a", "c_1", body, els, nil)
	b.put("b", "c_2", body, els, nil)
	b.get("a")
	b.put("c", "c_3", body, els, nil)
	if b.get("b") != nil || b.get("a") == nil || b.get("c") == nil {
		t.Errorf("after a third history over the bound: a %v, b %v, c %v; want b gone", b.get("a") != nil, b.get("b") != nil, b.get("c") != nil)
	}
	if b.size > max {
		t.Errorf("holds %d bytes over its bound of %d", b.size, max)
	}
}

// TestBaseDigestMarks: over a history that grows, repeats a turn, edits an
// old message and crosses markEvery many times, every digest a base gives
// equals the SHA-256 of the bytes it names, however its marks were taken
// over from the bases before it; and the marks stay sparse.
func TestBaseDigestMarks(t *testing.T) {
	b := newBases(1 << 30)
	// Each message as the client sends it and as the daemon is shown it
	// (shape.go), written apart here: a digest is of the second.
	type message struct{ sent, shown string }
	var msgs []message
	body := func(form func(message) string) []byte {
		out := []byte(`{"model":"m","messages":[`)
		for i, m := range msgs {
			if i > 0 {
				out = append(out, ", "[:1+i%2]...) // separators differ
			}
			out = append(out, form(m)...)
		}
		return append(out, "]}"...)
	}
	msg := func(i, size int) message {
		text := fmt.Sprintf(`"%d %s"`, i, strings.Repeat("x", size))
		if i%3 == 0 { // a text block, sent and shown alike
			m := `{"role":"user","content":[{"type":"text","text":` + text + `}]}`
			return message{m, m}
		}
		return message{`{"role":"user","content":` + text + `}`, `{"role":"user","content":[{"type":"text","text":` + text + `}]}`}
	}
	for step := 0; step < 60; step++ {
		switch {
		case step%7 == 3: // the same request again
		case step%11 == 5: // an old message edited
			msgs[len(msgs)/2] = msg(-step, 10)
		default:
			msgs = append(msgs, msg(step, (step*37)%5000), msg(step+1, (step*7919)%(90<<10)))
		}
		body, shown := body(func(m message) string { return m.sent }), body(func(m message) string { return m.shown })
		_, els, err := messageSpans(body)
		if err != nil {
			t.Fatal(err)
		}
		_, shownEls, err := messageSpans(shown)
		if err != nil {
			t.Fatal(err)
		}
		b.put("k", fmt.Sprintf("c_%d", step), body, els, nil)
		bs := b.get("k")
		first := shownEls[0].start
		for n := 1; n <= len(els); n++ {
			sum := sha256.Sum256(shown[first:shownEls[n-1].end])
			if got, want := bs.digest(n), hex.EncodeToString(sum[:]); got != want {
				t.Fatalf("step %d: digest of %d of %d messages %s, want %s", step, n, len(els), got, want)
			}
		}
		if most := len(bs.region)/markEvery + 3; len(bs.marks) > most {
			t.Fatalf("step %d: %d marks over %d bytes, want at most %d", step, len(bs.marks), len(bs.region), most)
		}
	}
}

// BenchmarkBaseFollowUp: a follow-up turn of a 1 MB history (the base's
// messages and two new ones): what the proxy spends finding what it shares
// with the base, its digest and recording the new base, against the
// simplest way (hashing the shared prefix whole, as before marks), in one
// run.
func BenchmarkBaseFollowUp(b *testing.B) {
	var msgs []string
	for i := 0; len(msgs) < 2 || i < 256; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"%d %s"}]}`, i, strings.Repeat("x", 4000)))
	}
	build := func(ms []string) ([]byte, []span) {
		body := []byte(`{"model":"m","messages":[` + strings.Join(ms, ",") + `]}`)
		_, els, err := messageSpans(body)
		if err != nil {
			b.Fatal(err)
		}
		return body, els
	}
	prev, prevEls := build(msgs)
	next, nextEls := build(append(msgs, `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`, `{"role":"user","content":"go on"}`))
	var marks, whole time.Duration
	for b.Loop() {
		bs := newBases(1 << 30)
		bs.put("k", "c_1", prev, prevEls, nil)
		t0 := time.Now()
		from := bs.get("k")
		n, digest := from.shared(next, nextEls)
		if n != len(from.ends) {
			b.Fatalf("shares %d of the base's %d messages", n, len(from.ends))
		}
		bs.put("k", "c_2", next, nextEls, from) // as compile does

		marks += time.Since(t0)
		t1 := time.Now()
		first := nextEls[0].start
		bytes.Equal(next[first:nextEls[n-1].end], prev[first:prevEls[n-1].end])
		sum := sha256.Sum256(next[first:nextEls[n-1].end])
		whole += time.Since(t1)
		if hex.EncodeToString(sum[:]) != digest {
			b.Fatal("the digests differ")
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(float64(len(next))/1024, "request-KB")
	b.ReportMetric(us(marks), "marks-µs")
	b.ReportMetric(us(whole), "rehash-µs")
	b.ReportMetric(float64(marks)/float64(whole), "marks/rehash")
}

// TestBaseHashCarried: a history's base proves its messages with the
// digest it carries from turn to turn, hashing only the messages each turn
// adds, and that digest is the SHA-256 of the whole region, as the daemon
// checks it.
func TestBaseHashCarried(t *testing.T) {
	b := newBases(1 << 20)
	turns := []string{
		`{"messages":[{"a":1}]}`,
		`{"messages":[{"a":1}, {"b":2},{"c":3}]}`,
		`{"messages":[{"a":1}, {"b":2},{"c":3},{"d":"four"}]}`,
		`{"model":"m","messages":[{"a":1}, {"b":2},{"c":3},{"d":"four"},{"e":5}]}`,
	}
	for i, turn := range turns {
		body := []byte(turn)
		_, els, err := messageSpans(body)
		if err != nil {
			t.Fatal(err)
		}
		var from *base
		if bs := b.get("k"); bs != nil {
			n, digest := bs.shared(body, els)
			first, last := els[0].start, els[n-1].end
			sum := sha256.Sum256(body[first:last])
			if n != len(bs.ends) || digest != hex.EncodeToString(sum[:]) {
				t.Fatalf("turn %d: shared %d of %d, digest %s, want %x", i, n, len(bs.ends), digest, sum)
			}
			from = bs
		}
		b.put("k", "c", body, els, from)
		bs := b.get("k")
		sum := sha256.Sum256(bs.region)
		if got := bs.digest(len(bs.ends)); got != hex.EncodeToString(sum[:]) {
			t.Fatalf("turn %d: carried digest %s, want %x", i, got, sum)
		}
	}
}
