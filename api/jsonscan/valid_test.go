package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `-12.25E-2`, `true`, `false`, `null`, ` {"a" : [1, 2 ,{"b":null}] } `,
	`{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, `"é🙂"`, "\"\xff\xfe\"", `"12345678\"12345678"`,
	`{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `"abc`,
	"\"a\x01b\"", "\"12345678\x1f\"", `"\x"`, `"\u12"`, `"\u12g4"`, `[1 2]`, `{"a":1}{}`, `{"a":1} x`, ``, ` `,
	`"\`, `[`, `["a",`, `{"a":`, `NaN`, `Infinity`, `1 `, "\t[\n]\r",
	`[}`, `{]`, `{"a":1]`, `[1}`, `{"a":[}`, `{"a":{"b":[1,{"c":"]"}]}}`, `{"a":1 "b":2}`, `{"a"::1}`, `{,}`, `[,1]`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

// sessionLine is a line shaped like pi's: an envelope with short fields
// around long strings with escapes.
func sessionLine(i int) []byte {
	line, err := json.Marshal(map[string]any{
		"type": "message", "id": "a1b2c3d4", "parentId": nil, "timestamp": "2026-11-29T16:00:00.000Z",
		"message": map[string]any{
			"role": "assistant",
			"content": []any{
				map[string]any{"type": "thinking", "thinking": strings.Repeat("step \"one\"\n\tthen é🙂 ", i+1), "thinkingSignature": "Eq+/=="},
				map[string]any{"type": "toolCall", "id": "t1", "name": "bash", "arguments": map[string]any{"command": "ls -la\n"}},
			},
			"usage":     map[string]any{"input": 12, "output": 3.5, "cost": map[string]any{"total": 1e-6}},
			"timestamp": 1764432000000 + i,
		},
	})
	if err != nil {
		panic(err)
	}
	return line
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid = %v", c, got, want)
		}
	}
	for i := range 20 {
		line := sessionLine(i)
		if !Valid(line) {
			t.Fatalf("line %d rejected: %s", i, line)
		}
		// Every cut of a line (a torn write) gets json.Valid's verdict.
		for cut := 0; cut < len(line); cut++ {
			if Valid(line[:cut]) != json.Valid(line[:cut]) {
				t.Fatalf("line %d cut at %d: verdicts differ", i, cut)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Add(sessionLine(0))
	f.Add([]byte(`{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"a\nb","thinkingSignature":"Eq+/="}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}
