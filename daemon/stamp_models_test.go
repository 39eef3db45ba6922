package daemon

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/my-pi/bindery/binding"
	"github.com/my-pi/bindery/db"
)

// TestCachedStampModelShared: every stamp a conversation caches with a
// model name holds the one copy of it (the decision's compare of minting
// models stops at the pointer), also for stamps cached after a GC, and
// after the cache starts again with stamps carried over. A name's string
// alone does not keep unique's canonical copy: without a handle held, a
// GC forgets it and the next stamp gets a copy of its own.
func TestCachedStampModelShared(t *testing.T) {
	row := func(k byte) db.StampRow {
		// each row's name in its own memory, as rows read from the database
		return db.StampRow{Stamp: binding.Stamp{Key: binding.Digest{k}, Model: strings.Clone("claude-opus-4-5")}}
	}
	c := &conv{id: "x"}
	c.cacheStamps([]db.StampRow{row(1)})
	first := unsafe.StringData(c.stamps[binding.Digest{1}].Model)
	same := func(name string, k byte) {
		t.Helper()
		if got := unsafe.StringData(c.stamps[binding.Digest{k}].Model); got != first {
			t.Fatalf("%s: stamp %d's model name is a copy of its own, not the one its conversation's stamps share", name, k)
		}
	}
	runtime.GC()
	runtime.GC()
	c.cacheStamps([]db.StampRow{row(2)})
	same("after a GC", 2)

	// The cache starts again, carrying stamp 1 over (as Binder.stamps
	// does with the request's own): names cached then still share it.
	c.restartStamps(map[binding.Digest]*binding.Stamp{{1}: c.stamps[binding.Digest{1}]})
	runtime.GC()
	runtime.GC()
	c.cacheStamps([]db.StampRow{row(3)})
	same("after the cache started again", 3)
	if len(c.models) != 1 {
		t.Fatalf("the conversation holds %d model names, want 1", len(c.models))
	}
	// Started again with nothing, it holds no name.
	c.restartStamps(map[binding.Digest]*binding.Stamp{})
	if len(c.models) != 0 {
		t.Fatalf("an empty cache holds %d model names", len(c.models))
	}
}
