package binding

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestMemoMatchesFreshParse(t *testing.T) {
	memo := &Memo{}
	p := Parser{Memo: memo}
	check := func(body []byte) {
		t.Helper()
		want, werr := ParseRequest(body)
		got, gerr := p.Parse(body)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("memo parse error %v, fresh %v", gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("memo parse differs from a fresh parse for\n%.300s", body)
		}
	}
	// A growing conversation: every earlier message is a hit.
	for n := 1; n <= 40; n++ {
		check(genRequest(5, n))
	}
	h0, m0 := memo.Stats()
	check(genRequest(5, 40))
	h1, m1 := memo.Stats()
	if m1 != m0 || h1-h0 != 40 {
		t.Fatalf("reparse of the same body: %d hits %d misses, want 40 hits", h1-h0, m1-m0)
	}
	// Earlier messages removed (a pruner), messages edited, whitespace
	// changed, messages moved: still equal to a fresh parse.
	body := genRequest(5, 40)
	r, _ := ParseRequest(body)
	check(Rewrite(body, r, nil, func(i int) bool { return i < 7 }))
	check(Rewrite(body, r, func(i, j int) bool { return r.Messages[i].Blocks[j].Kind == KindThinking }, nil))
	check(bytes.Replace(body, []byte(`"role":"user"`), []byte(`"role" : "user"`), 3))
	check(bytes.Replace(body, []byte(`/src/main.go`), []byte(`/src/main.rs`), 1))
	rng := rand.New(rand.NewPCG(9, 9))
	for range 500 {
		b := randBody(rng)
		check(b)
		check(b)
	}
	// A hit followed by garbage is still an error.
	m := genRequest(5, 3)
	i := bytes.LastIndex(m, []byte(`],"metadata"`))
	bad := append(append([]byte{}, m[:i]...), []byte(` x],"metadata":{}}`)...)
	if _, err := p.Parse(bad); err == nil {
		t.Fatal("garbage after a remembered message was accepted")
	}
	// A remembered message inside a longer, different element is not a hit.
	long := `{"role":"user","content":"` + strings.Repeat("a", 100) + `"}`
	check([]byte(`{"messages":[` + long + `]}`))
	check([]byte(`{"messages":[` + long[:len(long)-1] + `,"x":1}]}`))
}

func TestMemoBounded(t *testing.T) {
	memo := &Memo{MaxBytes: 20000}
	p := Parser{Memo: memo}
	for n := 1; n <= 60; n += 3 {
		if _, err := p.Parse(genRequest(uint64(n), n)); err != nil {
			t.Fatal(err)
		}
		if memo.size > memo.MaxBytes {
			t.Fatalf("memo holds %d bytes, bound %d", memo.size, memo.MaxBytes)
		}
		total := 0
		for _, e := range memo.entries {
			total += len(e.raw)
		}
		if total != memo.size {
			t.Fatalf("memo size %d, entries hold %d", memo.size, total)
		}
	}
}
