package watcher

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/my-pi/bindery/watcher/pisession"
)

var validCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `-12.25E-2`, `true`, `false`, `null`, ` {"a" : [1, 2 ,{"b":null}] } `,
	`{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, `"é🙂"`, "\"\xff\xfe\"", `"12345678\"12345678"`,
	`{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `"abc`,
	"\"a\x01b\"", "\"12345678\x1f\"", `"\x"`, `"\u12"`, `"\u12g4"`, `[1 2]`, `{"a":1}{}`, `{"a":1} x`, ``, ` `,
	`"\`, `[`, `["a",`, `{"a":`, `NaN`, `Infinity`, `1 `, "\t[\n]\r",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, json.Valid = %v", c, got, want)
		}
	}
	s := pisession.Generate(pisession.Options{Seed: 5, Turns: 20})
	for i := range s.Offsets {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		line := s.Data[s.Offsets[i] : end-1]
		if !validJSON(line) {
			t.Fatalf("line %d rejected", i+1)
		}
		// Every truncation of a line is invalid (a torn write).
		for cut := 1; cut < len(line); cut += 1 + len(line)/50 {
			if validJSON(line[:cut]) != json.Valid(line[:cut]) {
				t.Fatalf("line %d cut at %d: verdicts differ", i+1, cut)
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"a\nb","thinkingSignature":"Eq+/="}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}
