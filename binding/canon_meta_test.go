package binding

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

// reencode writes the decoded value v back as JSON with its keys in a
// random order, random whitespace between tokens, and strings spelled with
// random (but value-preserving) escapes: the same value, different bytes.
func reencode(rng *rand.Rand, v any) []byte {
	wss := []string{"", " ", "\n", "\t  ", "\r\n"}
	var b []byte
	ws := func() { b = append(b, wss[rng.IntN(len(wss))]...) }
	str := func(s string) {
		b = append(b, '"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				b = append(b, '\\', byte(r))
			case r < 0x20 || rng.IntN(20) == 0:
				if r > 0xFFFF {
					hi, lo := 0xD800+((r-0x10000)>>10), 0xDC00+((r-0x10000)&0x3FF)
					b = append(b, '\\', 'u')
					b = append(b, []byte(strconv.FormatInt(int64(0x10000+hi), 16))[1:]...)
					b = append(b, '\\', 'u')
					b = append(b, []byte(strconv.FormatInt(int64(0x10000+lo), 16))[1:]...)
				} else {
					b = append(b, '\\', 'u')
					b = append(b, []byte(strconv.FormatInt(int64(0x10000+r), 16))[1:]...)
				}
			case r == '/' && rng.IntN(2) == 0:
				b = append(b, '\\', '/')
			default:
				b = append(b, string(r)...)
			}
		}
		b = append(b, '"')
	}
	var enc func(v any)
	enc = func(v any) {
		ws()
		switch v := v.(type) {
		case nil:
			b = append(b, "null"...)
		case bool:
			b = strconv.AppendBool(b, v)
		case json.Number:
			b = append(b, v...)
		case string:
			str(v)
		case []any:
			b = append(b, '[')
			for i, e := range v {
				if i > 0 {
					ws()
					b = append(b, ',')
				}
				enc(e)
			}
			ws()
			b = append(b, ']')
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b = append(b, '{')
			for i, k := range keys {
				if i > 0 {
					b = append(b, ',')
				}
				ws()
				str(k)
				ws()
				b = append(b, ':')
				enc(v[k])
			}
			ws()
			b = append(b, '}')
		}
		ws()
	}
	enc(v)
	return b
}

func decodeNumber(t *testing.T, body []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// digestsOf lists everything a Request records that must depend only on
// values: seed, model, and per message role, frame, end and per block kind,
// digest, chain, key.
func digestsOf(r *Request) []any {
	out := []any{r.Seed, r.Model, r.Bound}
	for _, m := range r.Messages {
		out = append(out, m.Role, m.Frame, m.End, len(m.Blocks))
		for _, b := range m.Blocks {
			out = append(out, b.Kind, b.Digest, b.Chain, b.Key, b.Signed)
		}
	}
	return out
}

// TestValuesNotBytes re-encodes realistic requests with shuffled keys,
// random whitespace and random escapes: every digest must stay the same.
func TestValuesNotBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for seed := range uint64(6) {
		body := genRequest(seed, 40)
		r, err := ParseRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		want := digestsOf(r)
		v := decodeNumber(t, body)
		for range 5 {
			other := reencode(rng, v)
			if bytes.Equal(other, body) {
				t.Fatal("re-encoding did not change the bytes")
			}
			r2, err := ParseRequest(other)
			if err != nil {
				t.Fatalf("%v\n%.400s", err, other)
			}
			got := digestsOf(r2)
			if len(got) != len(want) {
				t.Fatalf("shape differs")
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("seed %d: item %d differs after re-encoding (%v vs %v)", seed, i, got[i], want[i])
				}
			}
		}
	}
}

// TestEveryValueChangeCounts changes one string value in one message (a
// trailing space) and checks that exactly that message's chain and every
// later one move, and nothing before it.
func TestEveryValueChangeCounts(t *testing.T) {
	body := genRequest(8, 24)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range r.Messages {
		raw := body[m.Span.Start:m.Span.End]
		// The last string value in the message: its closing quote.
		q := bytes.LastIndexByte(raw, '"')
		for q > 0 && raw[q-1] == '\\' {
			q = bytes.LastIndexByte(raw[:q-1], '"')
		}
		mod := append(append(append([]byte{}, body[:m.Span.Start+q]...), ' '), body[m.Span.Start+q:]...)
		r2, err := ParseRequest(mod)
		if err != nil {
			t.Fatal(err)
		}
		for k := range r.Messages {
			same := r2.Messages[k].End == r.Messages[k].End
			if same != (k < i) {
				t.Fatalf("edit in message %d: message %d chain same=%v", i, k, same)
			}
		}
		if r2.Seed != r.Seed {
			t.Fatalf("edit in message %d changed the seed", i)
		}
	}
}
