package reporter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/my-pi/bindery/watcher"
	"github.com/my-pi/bindery/watcher/pisessiontest"
)

// Rows of pi 1.6 usage and context_edit entries ingested before schema
// version 6 get what the report reads of them from the session file; a
// file rewritten shorter since leaves them as they are.
func TestPi16FromFile(t *testing.T) {
	s := pisessiontest.Generate(pisessiontest.Options{Seed: 11, Turns: 40, Pi16: true})
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := s.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	p := watcher.NewParser(path)
	var want []watcher.Entry
	for i := range s.Lines {
		end := len(s.Data)
		if i+1 < len(s.Offsets) {
			end = s.Offsets[i+1]
		}
		if e := p.Line(s.Data[s.Offsets[i]:end], int64(s.Offsets[i])).Entry; e != nil {
			want = append(want, *e)
		}
	}
	old := make([]watcher.Entry, len(want))
	n := 0
	for i, e := range want {
		old[i] = e
		if e.Type == "usage" || e.Type == "context_edit" {
			// as a version 5 index holds them
			old[i].UsageKind, old[i].Usage, old[i].Model, old[i].Provider = "", nil, "", ""
			old[i].TargetID, old[i].EditOmit, old[i].Thinking = "", false, nil
			n++
		}
	}
	if n == 0 {
		t.Fatal("no pi 1.6 entries generated")
	}
	got := append([]watcher.Entry(nil), old...)
	if err := Pi16FromFile(path, 3, got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("entry %d:\n got %+v\nwant %+v", i, got[i], want[i])
			}
		}
	}
	if err := os.WriteFile(path, s.Data[:s.Offsets[1]], 0o644); err != nil {
		t.Fatal(err)
	}
	again := append([]watcher.Entry(nil), old...)
	if err := Pi16FromFile(path, 3, again); err != nil || !reflect.DeepEqual(again, old) {
		t.Fatalf("a rewritten file: %v", err)
	}
}
