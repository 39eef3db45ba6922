package watcher

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/my-pi/bindery/api/jsonscan"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// TestValidOnSessionLines: the validator the parser uses (jsonscan.Valid,
// tested and fuzzed against json.Valid in its package) accepts every line
// of a generated session and gives json.Valid's verdict on its cuts.
func TestValidOnSessionLines(t *testing.T) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 5, Turns: 20})
	lines := bytes.Split(bytes.TrimSuffix(s.Data, []byte("\n")), []byte("\n"))
	if len(lines) != len(s.Offsets) {
		t.Fatalf("%d lines, the generator wrote %d", len(lines), len(s.Offsets))
	}
	for i, line := range lines {
		if !jsonscan.Valid(line) {
			t.Fatalf("line %d rejected", i+1)
		}
		// Every truncation of a line is invalid (a torn write).
		for cut := 1; cut < len(line); cut += 1 + len(line)/50 {
			if jsonscan.Valid(line[:cut]) != json.Valid(line[:cut]) {
				t.Fatalf("line %d cut at %d: verdicts differ", i+1, cut)
			}
		}
	}
}
