package binding

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestKeySet: the repeat check answers as a map of the keys would, for
// keys that share their first 8 bytes (a tag match is compared whole), for
// keys that share every bit the slot is chosen from, across resets of
// another size, and with the memory of a larger set.
func TestKeySet(t *testing.T) {
	digest := func(s string) Digest { return sha256.Sum256([]byte(s)) }
	sameTag := func(i int) Digest { d := digest("x"); d[31] = byte(i); d[30] = byte(i >> 8); return d }
	cases := map[string][]Digest{}
	var random, tagged []Digest
	for i := range 300 {
		random = append(random, digest(fmt.Sprint(i%211))) // repeats from 211 on
		tagged = append(tagged, sameTag(i%97))
	}
	cases["random"], cases["one tag"] = random, tagged
	cases["empty"] = nil
	cases["one"] = []Digest{digest("a"), digest("a")}
	var s keySet
	for _, name := range []string{"random", "one tag", "empty", "one", "random"} {
		keys := cases[name]
		s.reset(len(keys))
		tb := make([]tblock, 0, len(keys))
		want := map[Digest]bool{}
		for i, k := range keys {
			if got := s.add(&k, len(tb), tb); got != want[k] {
				t.Fatalf("%s: key %d: repeat %v, want %v", name, i, got, want[k])
			}
			want[k] = true
			tb = append(tb, tblock{key: k})
		}
	}
	if s.salt == 0 {
		t.Fatal("no salt drawn")
	}
}
