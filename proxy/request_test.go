package proxy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/api/jsonscan"
)

// TestReadRequestBody: the one pass finds the messages and the metadata
// in either order, stops once it has both, and a body it cannot read
// before the messages is an error.
func TestReadRequestBody(t *testing.T) {
	uid := `"metadata":{"user_id":"{\"session_id\":\"s1\"}"}`
	for _, c := range []struct {
		name, body string
		msgs       int
		userID     string
		err        bool
	}{
		{"messages then metadata", `{"model":"m","messages":[{"a":1},{"b":[2]}],` + uid + `}`, 2, `{"session_id":"s1"}`, false},
		{"metadata first", `{` + uid + `,"messages":[{"a":1}],"stream":true}`, 1, `{"session_id":"s1"}`, false},
		{"no metadata", ` { "messages" : [ ] } `, 0, "", false},
		{"user_id not a string", `{"messages":[{}],"metadata":{"user_id":7}}`, 1, "", false},
		{"what follows both is not read", `{"messages":[{}],` + uid + `,"x":}`, 1, `{"session_id":"s1"}`, false},
		{"what follows the messages is the upstream's", `{"messages":[{}],"x":}`, 1, "", false},
		{"the first messages member counts", `{"messages":[{},{}],"messages":[{}]}`, 2, "", false},
		{"no messages", `{"model":"m"}`, 0, "", true},
		{"empty object", `{}`, 0, "", true},
		{"not an object", `[{"messages":[]}]`, 0, "", true},
		{"messages not an array", `{"messages":{}}`, 0, "", true},
		{"broken before the messages", `{"model":,"messages":[]}`, 0, "", true},
		{"cut inside the messages", `{"messages":[{"a":1}`, 0, "", true},
		{"as many messages as the API takes", `{"messages":[{}` + strings.Repeat(`,{}`, api.ProviderMaxMessages-1) + `]}`, api.ProviderMaxMessages, "", false},
		{"more messages than the API takes", `{"messages":[{}` + strings.Repeat(`,{}`, api.ProviderMaxMessages) + `]}`, 0, "", true},
	} {
		rb, err := readRequestBody([]byte(c.body))
		if (err != nil) != c.err {
			t.Errorf("%s: err %v, want error %v", c.name, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if len(rb.els) != c.msgs || rb.userID != c.userID {
			t.Errorf("%s: %d messages, user_id %q; want %d, %q", c.name, len(rb.els), rb.userID, c.msgs, c.userID)
		}
		if got := c.body[rb.arr.start:rb.arr.end]; got[0] != '[' || got[len(got)-1] != ']' {
			t.Errorf("%s: the array's span is %q", c.name, got)
		}
	}
}

// FuzzReadRequestBody: on valid JSON the one pass reads what reading each
// member on its own reads (topMember, elements, member), and on any input
// it stays in bounds.
func FuzzReadRequestBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"}}`,
		`{"metadata":{"user_id":"{\"session_id\":\"s\"}"},"messages":[]}`,
		`{"messages":[{"content":[{"type":"thinking","thinking":"","signature":"x"}]}, {"a":[1,2,{"b":"]"}]}]}`,
		`{"messages":[1,"]",{"}":"["}],"metadata":[]}`,
		`{"messages":[{}],"x":}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rb, err := readRequestBody(body)
		if err == nil {
			if rb.arr.start < 0 || rb.arr.end > len(body) || rb.arr.start >= rb.arr.end {
				t.Fatalf("array span %v outside a %d-byte body", rb.arr, len(body))
			}
			for _, e := range rb.els {
				if e.start < rb.arr.start || e.end > rb.arr.end || e.start >= e.end {
					t.Fatalf("element %v outside the array %v", e, rb.arr)
				}
			}
		}
		if !jsonscan.Valid(body) || !json.Valid(body) {
			return
		}
		arr, ok, merr := topMember(body, "messages")
		if merr != nil || !ok {
			if err == nil {
				t.Fatalf("read messages %v in a body where topMember finds none (%v)", rb.arr, merr)
			}
			return
		}
		els, eerr := elements(body, arr)
		if (eerr != nil) != (err != nil) {
			t.Fatalf("elements: %v; one pass: %v", eerr, err)
		}
		if eerr != nil {
			return
		}
		if rb.arr.start != jsonscan.SkipSpace(body, arr.start) || rb.arr.end != arr.end || !slices.Equal(rb.els, els) {
			t.Fatalf("one pass read %v %v, member by member %v %v", rb.arr, rb.els, arr, els)
		}
		want := ""
		if md, ok, err := topMember(body, "metadata"); err == nil && ok {
			want = userIDOf(body, md)
		}
		if rb.userID != want {
			t.Fatalf("user_id %q, member by member %q", rb.userID, want)
		}
	})
}
