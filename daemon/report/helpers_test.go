package report

import (
	"math"
	"testing"

	"github.com/my-pi/bindery/watcher"
)

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

// b builds the entries of a session file in order; each new entry's
// parent is the previous one unless parent() says otherwise.
type builder struct {
	entries []watcher.Entry
	line    int
}

func (b *builder) add(e watcher.Entry, parent string) *watcher.Entry {
	b.line++
	e.Line = b.line + 1 // the header is line 1
	if parent == "" && len(b.entries) > 0 {
		parent = b.entries[len(b.entries)-1].ID
	}
	if parent == "-" {
		parent = ""
	}
	e.ParentID = parent
	if e.Type == "" {
		e.Type = "message"
	}
	b.entries = append(b.entries, e)
	return &b.entries[len(b.entries)-1]
}

func (b *builder) user(id, parent string) {
	b.add(watcher.Entry{ID: id, Role: "user", UserText: true}, parent)
}

func (b *builder) toolResult(id string) {
	b.add(watcher.Entry{ID: id, Role: "toolResult"}, "")
}

type asst struct {
	model, stop      string
	in, out, cr, cw  int64
	think            []int // chars per block
	cost             *watcher.Cost
	ts               string
	noUsage, noWrite bool
}

func (b *builder) assistant(id, parent string, a asst) {
	e := watcher.Entry{ID: id, Role: "assistant", Model: a.model, StopReason: a.stop, Timestamp: a.ts}
	if !a.noUsage {
		e.Usage = &watcher.Usage{Input: i64(a.in), Output: i64(a.out), CacheRead: i64(a.cr), Cost: a.cost}
		if !a.noWrite {
			e.Usage.CacheWrite = i64(a.cw)
		}
	}
	for i, c := range a.think {
		e.Thinking = append(e.Thinking, watcher.ThinkingBlock{Index: i, Chars: c, Signed: true})
		if e.StopReason == "toolUse" {
			e.ToolCalls = 1
		}
	}
	b.add(e, parent)
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("%s = %.9f, want %.9f", what, got, want)
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
