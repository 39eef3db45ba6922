package binding

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func manyMessages(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%06d","content":"x"}]}`, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestParseMaxMessages(t *testing.T) {
	body := manyMessages(11)
	p := Parser{MaxMessages: 11}
	if r, err := p.Parse(body); err != nil || len(r.Messages) != 11 {
		t.Fatalf("11 messages at a bound of 11: %v", err)
	}
	p.MaxMessages = 10
	_, err := p.Parse(body)
	if !errors.Is(err, ErrTooManyMessages) || !strings.Contains(err.Error(), "more than 10") {
		t.Fatalf("11 messages at a bound of 10: err %v, want ErrTooManyMessages naming 10", err)
	}
}

func TestParseCanceled(t *testing.T) {
	done := make(chan struct{})
	close(done)
	p := Parser{Done: done, Memo: &Memo{}}
	_, err := p.Parse(manyMessages(1000))
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("parse with Done closed: err %v, want ErrCanceled", err)
	}
	// The memo stays usable: a parse without Done succeeds.
	p.Done = nil
	if _, err := p.Parse(manyMessages(1000)); err != nil {
		t.Fatal(err)
	}
}

// The memo's lookup is linear: messages sharing far more than any fixed
// prefix (all but their last bytes) are each found in one map probe.
func TestMemoSharedPrefix(t *testing.T) {
	memo := &Memo{}
	p := Parser{Memo: memo}
	body := manyMessages(2000)
	if _, err := p.Parse(body); err != nil {
		t.Fatal(err)
	}
	h0, m0 := memo.Stats()
	if _, err := p.Parse(body); err != nil {
		t.Fatal(err)
	}
	h1, m1 := memo.Stats()
	if h1-h0 != 2000 || m1 != m0 {
		t.Fatalf("second parse: %d hits %d misses, want 2000 hits 0 misses", h1-h0, m1-m0)
	}
}

func TestObjectEnd(t *testing.T) {
	for _, obj := range []string{`{}`, `{"a":1}`, `{"a":"}"}`, `{"a":"\"}"}`, `{"a":"\\"}`, `{"a":"\\\"}\\"}`, `{"a":[{"b":"]"},[]]}`, `{"\\\\":"\\\\\\\""}`} {
		for _, tail := range []string{"", ",", `,{"x":1}]`, `}`} {
			in := []byte("  " + obj + tail)
			end, ok := objectEnd(in, 2)
			if !ok || string(in[2:end]) != obj {
				t.Errorf("objectEnd(%q) = %q %v, want %q", in, in[2:end], ok, obj)
			}
		}
	}
	for _, bad := range []string{`{`, `{"a":"}`, `{"a":[}`} {
		if _, ok := objectEnd([]byte(bad), 0); ok {
			t.Errorf("objectEnd(%q) ok on an unterminated object", bad)
		}
	}
}

// BenchmarkParseMessages: a parse with a conversation's memo against the
// message count, messages sharing all but their last bytes (pi's tool
// results). ns/msg must stay flat: the memo's lookup is one map probe.
func BenchmarkParseMessages(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		body := manyMessages(n)
		for _, mode := range []string{"fresh", "memo"} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				p := Parser{}
				if mode == "memo" {
					p.Memo = &Memo{MaxBytes: 64 << 20}
					p.Parse(body)
				}
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if mode == "fresh" {
						p.Memo = &Memo{MaxBytes: 64 << 20}
					}
					if _, err := p.Parse(body); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/msg")
			})
		}
	}
}
