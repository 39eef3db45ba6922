package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
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
	b := newBases(100)
	body := []byte(`{"messages":[{"t":"` + string(make([]byte, 0)) + `0123456789012345678901234567890123456789"}]}`)
	_, els, _ := messageSpans(body)
	b.put("a", "c_1", body, els, nil)
	b.put("b", "c_2", body, els, nil)
	b.get("a")
	b.put("c", "c_3", body, els, nil)
	if b.get("b") != nil || b.get("a") == nil || b.get("c") == nil {
		t.Errorf("after a third history over the bound: a %v, b %v, c %v; want b gone", b.get("a") != nil, b.get("b") != nil, b.get("c") != nil)
	}
	if b.size > 100 {
		t.Errorf("holds %d bytes over its bound of 100", b.size)
	}
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
		if bs.digest != hex.EncodeToString(sum[:]) {
			t.Fatalf("turn %d: carried digest %s, want %x", i, bs.digest, sum)
		}
	}
}
