package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestRewriteTable(t *testing.T) {
	const body = `{"messages": [ {"role":"user","content":[ {"type":"text","text":"a"} , {"type":"text","text":"b"},{"type":"text","text":"c"} ]},
  {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"}]} ,
  {"role":"user","content":"x"} ] , "model":"m"}`
	r := mustParse(t, body)
	blocks := func(set ...int) func(int, int) bool {
		return func(i, j int) bool {
			if i != 0 {
				return false
			}
			for _, s := range set {
				if s == j {
					return true
				}
			}
			return false
		}
	}
	msgs := func(set ...int) func(int) bool {
		return func(i int) bool {
			for _, s := range set {
				if s == i {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		name  string
		strip func(int, int) bool
		drop  func(int) bool
		want  string
	}{
		{"nothing", nil, nil, body},
		{"first block", blocks(0), nil, strings.Replace(body, `{"type":"text","text":"a"} , `, ``, 1)},
		{"middle block", blocks(1), nil, strings.Replace(body, `{"type":"text","text":"b"},`, ``, 1)},
		{"last block", blocks(2), nil, strings.Replace(body, `,{"type":"text","text":"c"}`, ``, 1)},
		{"first and last block", blocks(0, 2), nil, strings.Replace(strings.Replace(body, `{"type":"text","text":"a"} , `, ``, 1), `,{"type":"text","text":"c"}`, ``, 1)},
		{"last two blocks", blocks(1, 2), nil, strings.Replace(body, ` , {"type":"text","text":"b"},{"type":"text","text":"c"}`, ``, 1)},
		{"all blocks", blocks(0, 1, 2), nil, strings.Replace(body, `{"type":"text","text":"a"} , {"type":"text","text":"b"},{"type":"text","text":"c"}`, ``, 1)},
		{"middle message", nil, msgs(1), strings.Replace(body, "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"}]} ,\n  ", ``, 1)},
		{"first message", nil, msgs(0), strings.Replace(body, "{\"role\":\"user\",\"content\":[ {\"type\":\"text\",\"text\":\"a\"} , {\"type\":\"text\",\"text\":\"b\"},{\"type\":\"text\",\"text\":\"c\"} ]},\n  ", ``, 1)},
		{"last message", nil, msgs(2), strings.Replace(body, " ,\n  {\"role\":\"user\",\"content\":\"x\"}", ``, 1)},
		{"all messages", nil, msgs(0, 1, 2), `{"messages": [  ] , "model":"m"}`},
		{"strip inside a dropped message is moot", blocks(1), msgs(0), strings.Replace(body, "{\"role\":\"user\",\"content\":[ {\"type\":\"text\",\"text\":\"a\"} , {\"type\":\"text\",\"text\":\"b\"},{\"type\":\"text\",\"text\":\"c\"} ]},\n  ", ``, 1)},
		{"strip and drop", blocks(0), msgs(1), strings.Replace(strings.Replace(body, `{"type":"text","text":"a"} , `, ``, 1), "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"}]} ,\n  ", ``, 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Rewrite([]byte(body), r, tc.strip, tc.drop)
			if string(got) != tc.want {
				t.Fatalf("Rewrite\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
		})
	}
	b := []byte(body)
	if got := Rewrite(b, r, func(int, int) bool { return false }, func(int) bool { return false }); &got[0] != &b[0] {
		t.Fatal("a rewrite that removes nothing must return body itself")
	}
}

// randBody writes a random request with random whitespace between tokens:
// messages with string or array content of thinking, text and tool_use
// blocks.
func randBody(rng *rand.Rand) []byte {
	wss := []string{"", "", " ", "\n  ", "\t", " \r\n "}
	ws := func() string { return wss[rng.IntN(len(wss))] }
	var b strings.Builder
	fmt.Fprintf(&b, "%s{%s\"model\"%s:%s\"m\"%s,%s\"messages\"%s:%s[", ws(), ws(), ws(), ws(), ws(), ws(), ws(), ws())
	n := rng.IntN(7)
	for i := range n {
		if i > 0 {
			b.WriteString(ws() + "," + ws())
		}
		fmt.Fprintf(&b, "{%s\"role\"%s:%s\"%s\"%s,%s\"content\"%s:%s", ws(), ws(), ws(), []string{"user", "assistant"}[i%2], ws(), ws(), ws(), ws())
		if rng.IntN(4) == 0 {
			fmt.Fprintf(&b, "\"m%d\"", i)
		} else {
			b.WriteString("[" + ws())
			k := rng.IntN(5)
			for j := range k {
				if j > 0 {
					b.WriteString(ws() + "," + ws())
				}
				switch rng.IntN(3) {
				case 0:
					fmt.Fprintf(&b, `{"type":"thinking",%s"thinking":"t%d.%d","signature":"s%d"}`, ws(), i, j, rng.IntN(1000))
				case 1:
					fmt.Fprintf(&b, `{"type":"text",%s"text":"x%d.%d"}`, ws(), i, j)
				default:
					fmt.Fprintf(&b, `{"type":"tool_use","input":{%s"a":[1,%s{"b":null}]},"id":"%d"}`, ws(), ws(), j)
				}
			}
			b.WriteString(ws() + "]")
		}
		b.WriteString(ws() + "}")
	}
	fmt.Fprintf(&b, "%s]%s}%s", ws(), ws(), ws())
	return []byte(b.String())
}

// checkRewrite applies Rewrite and checks it against encoding/json: the
// rewritten body decodes to the original with the same elements removed,
// and every kept element's bytes appear verbatim and in order.
func checkRewrite(t *testing.T, body []byte, r *Request, strip func(int, int) bool, drop func(int) bool) {
	t.Helper()
	out := Rewrite(body, r, strip, drop)
	if !json.Valid(out) {
		t.Fatalf("rewrite is not valid JSON:\n%s\nfrom\n%s", out, body)
	}
	var want map[string]any
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for i, m := range want["messages"].([]any) {
		if drop != nil && drop(i) {
			continue
		}
		if mo, ok := m.(map[string]any); ok {
			if blocks, ok := mo["content"].([]any); ok && strip != nil {
				nb := []any{}
				for j, bl := range blocks {
					if !strip(i, j) {
						nb = append(nb, bl)
					}
				}
				mo["content"] = nb
			}
		}
		kept = append(kept, m)
	}
	if kept == nil {
		kept = []any{}
	}
	want["messages"] = kept
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rewrite decodes to\n%v\nwant\n%v", got, want)
	}
	// Verbatim bytes: everything before the first message and after the
	// last, every kept block, and the bytes of each kept message around its
	// content array.
	at := 0
	find := func(piece []byte) {
		k := bytes.Index(out[at:], piece)
		if k < 0 {
			t.Fatalf("kept bytes %q not found verbatim in order in\n%s", piece, out)
		}
		at += k + len(piece)
	}
	if len(r.Messages) > 0 {
		find(body[:r.Messages[0].Span.Start])
	}
	for i, m := range r.Messages {
		if drop != nil && drop(i) {
			continue
		}
		if len(m.Blocks) == 0 {
			find(body[m.Span.Start:m.Span.End])
			continue
		}
		find(body[m.Span.Start:m.Blocks[0].Span.Start])
		for j, b := range m.Blocks {
			if strip == nil || !strip(i, j) {
				find(body[b.Span.Start:b.Span.End])
			}
		}
		find(body[m.Blocks[len(m.Blocks)-1].Span.End:m.Span.End])
	}
	if len(r.Messages) > 0 {
		tail := body[r.Messages[len(r.Messages)-1].Span.End:]
		if !bytes.HasSuffix(out, tail) {
			t.Fatalf("tail %q not kept", tail)
		}
	}
	if len(out) > len(body) {
		t.Fatal("rewrite grew the body")
	}
}

func TestRewriteProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		var body []byte
		if iter%100 == 0 {
			body = genRequest(uint64(iter), 30)
		} else {
			body = randBody(rng)
		}
		r, err := ParseRequest(body)
		if err != nil {
			t.Fatalf("%v\n%s", err, body)
		}
		p := rng.IntN(4)
		stripSet := map[[2]int]bool{}
		dropSet := map[int]bool{}
		for i, m := range r.Messages {
			if rng.IntN(4) < p-1 {
				dropSet[i] = true
			}
			for j := range m.Blocks {
				if rng.IntN(3) < p {
					stripSet[[2]int{i, j}] = true
				}
			}
		}
		checkRewrite(t, body, r, func(i, j int) bool { return stripSet[[2]int{i, j}] }, func(i int) bool { return dropSet[i] })
	}
}
