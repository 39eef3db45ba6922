package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// TestApplyPlan: a plan's strips and dropped messages are cut out and
// every other byte stays, whitespace, escapes and key order included.
func TestApplyPlan(t *testing.T) {
	body := `{"model":"m" ,"messages": [ {"role":"user","content":"a\u0041"},
  {"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"S1"}, {"type":"text","text":"<b>"} ]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]},
  {"role":"assistant","content":[ {"type":"thinking","thinking":"t","signature":"S2"} ,{"type":"redacted_thinking","data":"R"}]} ,
  {"role":"user","content":"go"} ],"stream":true}`
	for _, c := range []struct {
		name    string
		strips  []string
		dropped []string
		want    string
	}{
		{"nothing", nil, nil, body},
		{"first block", []string{"messages.1.content.0"}, nil,
			strings.Replace(body, `{"type":"thinking","thinking":"","signature":"S1"}, `, ``, 1)},
		{"last block", []string{"messages.3.content.1"}, nil,
			strings.Replace(body, ` ,{"type":"redacted_thinking","data":"R"}`, ``, 1)},
		{"a message emptied", []string{"messages.3.content.0", "messages.3.content.1"}, []string{"messages.3"},
			strings.Replace(body, `,
  {"role":"assistant","content":[ {"type":"thinking","thinking":"t","signature":"S2"} ,{"type":"redacted_thinking","data":"R"}]}`, ``, 1)},
		{"the first message dropped", nil, []string{"messages.0"},
			strings.Replace(body, `{"role":"user","content":"a\u0041"},
  `, ``, 1)},
	} {
		var strips []api.Strip
		for _, p := range c.strips {
			strips = append(strips, api.Strip{Path: p})
		}
		got, err := applyPlan([]byte(body), strips, c.dropped)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", c.name, got)
		}
	}
	for _, bad := range [][]api.Strip{{{Path: "messages.9.content.0"}}, {{Path: "messages.1.content.7"}}, {{Path: "messages.x"}}, {{Path: "messages.0.content.0"}}} {
		if _, err := applyPlan([]byte(body), bad, nil); err == nil {
			t.Errorf("plan %v applied to a body it does not fit", bad)
		}
	}
}

// TestRemovalsEveryShape: every subset of a four-element array removed
// leaves exactly the others, as JSON, separators kept.
func TestRemovalsEveryShape(t *testing.T) {
	arr := []byte(`[ 1 , {"a":[2]} ,"3",[4] ]`)
	els, err := elements(arr, span{0, len(arr)})
	if err != nil || len(els) != 4 {
		t.Fatalf("elements: %v %v", els, err)
	}
	all := []any{json.Number("1"), map[string]any{"a": []any{json.Number("2")}}, "3", []any{json.Number("4")}}
	for mask := 0; mask < 16; mask++ {
		rm := map[int]bool{}
		var want []any
		for i := 0; i < 4; i++ {
			if mask&(1<<i) != 0 {
				rm[i] = true
			} else {
				want = append(want, all[i])
			}
		}
		out := splice(arr, removals(arr, span{0, len(arr)}, els, rm)).bytes()
		var got []any
		if err := decodeNumbers(out, &got); err != nil {
			t.Errorf("mask %04b: %s is not JSON: %v", mask, out, err)
			continue
		}
		if want == nil {
			want = []any{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mask %04b: %s, want %v", mask, out, want)
		}
	}
}

// TestTextBlocks: string content is shown as one text block, its bytes
// kept, and each message written on its own (writeShown, as a digest
// hashes runs of messages) is that message in the shown body.
func TestTextBlocks(t *testing.T) {
	body := []byte(`{"messages":[{"role":"user","content":"a \"q\" \u00e9"},{"role":"assistant","content":[{"type":"text","text":"x"}]},{"content":"s","role":"system"}]}`)
	_, els, err := messageSpans(body)
	if err != nil {
		t.Fatal(err)
	}
	wraps, err := stringContents(body, els)
	if err != nil {
		t.Fatal(err)
	}
	out := shownBody(body, wraps)
	want := `{"messages":[{"role":"user","content":[{"type":"text","text":"a \"q\" \u00e9"}]},{"role":"assistant","content":[{"type":"text","text":"x"}]},{"content":[{"type":"text","text":"s"}],"role":"system"}]}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	_, wantEls, _ := messageSpans(out)
	if len(wantEls) != len(els) {
		t.Fatalf("%d messages shown, want %d", len(wantEls), len(els))
	}
	for i := range els {
		var one bytes.Buffer
		writeShown(&one, body, els[i].start, els[i].end, wraps)
		if got := out[wantEls[i].start:wantEls[i].end]; !bytes.Equal(one.Bytes(), got) {
			t.Errorf("message %d written on its own: %s, in the shown body %s", i, one.Bytes(), got)
		}
	}
	var all bytes.Buffer
	writeShown(&all, body, els[0].start, els[len(els)-1].end, wraps)
	if got := out[wantEls[0].start:wantEls[len(wantEls)-1].end]; !bytes.Equal(all.Bytes(), got) {
		t.Errorf("the messages written as a run: %s, in the shown body %s", all.Bytes(), got)
	}
	same := []byte(`{"messages":[{"role":"user","content":[]}]}`)
	_, els, _ = messageSpans(same)
	wraps, _ = stringContents(same, els)
	if out := shownBody(same, wraps); &out[0] != &same[0] {
		t.Error("a body with no string content was copied")
	}
}

// TestAsksError reads only thinking.block_binding.prefix_mismatch_behavior.
func TestAsksError(t *testing.T) {
	for body, want := range map[string]bool{
		`{"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"error"}}}`:      true,
		`{"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}}`: false,
		`{"thinking":{"type":"adaptive"},"x":{"prefix_mismatch_behavior":"error"}}`:                  false,
		`{"thinking":"error"}`: false,
		`{}`:                   false,
	} {
		if got := asksError([]byte(body)); got != want {
			t.Errorf("asksError(%s) = %v", body, got)
		}
	}
}

// TestBindingRefusal tells the binding refusal from other 400s.
func TestBindingRefusal(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"error","error":{"type":"invalid_request_error","message":"messages.5.content.0: Invalid ` + "`signature`" + ` in ` + "`thinking`" + ` block. The block is bound to a different conversation."}}`: "messages.5.content.0",
		`{"type":"error","error":{"type":"invalid_request_error","message":"messages.5.content.0: Invalid ` + "`signature`" + ` in ` + "`thinking`" + ` block."}}`:                                                 "",
		`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`:                                                                                                              "",
		`not json`: "",
	} {
		if got := bindingRefusal([]byte(body)); got != want {
			t.Errorf("bindingRefusal(%.60s) = %q, want %q", body, got, want)
		}
	}
}

// TestSpliced: a body kept as pieces reads, cuts and compares as the same
// bytes in one buffer would, wherever its pieces begin and end.
func TestSpliced(t *testing.T) {
	b := []byte("0123456789abcdefghij")
	flat := func(cuts []span) []byte {
		var out []byte
		at := 0
		for _, c := range cuts {
			out = append(out, b[at:c.start]...)
			at = c.end
		}
		return append(out, b[at:]...)
	}
	for _, cuts := range [][]span{nil, {{0, 3}}, {{2, 5}, {9, 10}}, {{5, 6}, {0, 1}}, {{0, 20}}, {{19, 20}}, {{3, 3}}} {
		want := flat(slices.SortedFunc(slices.Values(cuts), func(x, y span) int { return x.start - y.start }))
		s := splice(b, slices.Clone(cuts))
		if s.Len() != len(want) || !bytes.Equal(s.bytes(), want) {
			t.Fatalf("cuts %v: %q (%d), want %q", cuts, s.bytes(), s.Len(), want)
		}
		read, _ := io.ReadAll(s.reader())
		again, _ := io.ReadAll(s.reader())
		if !bytes.Equal(read, want) || !bytes.Equal(again, want) {
			t.Fatalf("cuts %v: read %q then %q, want %q", cuts, read, again, want)
		}
		for n := 0; n <= len(want); n++ {
			head, tail := s.cut(n)
			if !bytes.Equal(head.bytes(), want[:n]) || !bytes.Equal(tail.bytes(), want[n:]) || head.Len()+tail.Len() != len(want) {
				t.Fatalf("cuts %v, cut at %d: %q %q", cuts, n, head.bytes(), tail.bytes())
			}
			if !head.equal(whole(want[:n])) || !whole(want[n:]).equal(tail) {
				t.Fatalf("cuts %v, cut at %d: not equal to the same bytes whole", cuts, n)
			}
			if n < len(want) {
				other := bytes.Clone(want)
				other[n] ^= 1
				if s.equal(whole(other)) || whole(other).equal(s) {
					t.Fatalf("cuts %v: equal to a body other at byte %d", cuts, n)
				}
			}
		}
		if s.equal(whole(want[:len(want)/2])) && len(want) > 0 {
			t.Fatalf("cuts %v: equal to a shorter body", cuts)
		}
	}
}
