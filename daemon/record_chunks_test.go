package daemon

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/my-pi/bindery/binding"
)

// storedForm is rec as the database gives it back: Sent and Kept in
// arrays of their own, empty ones nil.
func storedForm(rec *binding.CompileRecord) *binding.CompileRecord {
	c := *rec
	c.Sent, c.Kept = nil, nil
	for _, m := range rec.Sent {
		if m.Blocks != nil {
			m.Blocks = append([]uint64{}, m.Blocks...)
		}
		c.Sent = append(c.Sent, m)
	}
	c.Kept = append(c.Kept, rec.Kept...)
	if len(rec.Strips) == 0 {
		c.Strips = nil
	}
	return &c
}

// TestRecordsInChunksAcrossRestart: a long conversation compiled by
// reference turn after turn stores its records' history once, in shared
// chunks (not once per remembered record), retention's sweeps keep every
// chunk a remembered record names, and a daemon started again on the same
// database reads every record exactly as the first one held it, and
// decides the next turn keeping every block.
func TestRecordsInChunksAcrossRestart(t *testing.T) {
	e := newBindingEnv(t, nil)
	g := &growingConversation{e: e, conv: "long"}
	g.add(json.RawMessage(`{"role":"user","content":"start"}`))
	for g.turns < 200 {
		g.turn(t)
	}
	c := e.b.convs["long"]
	held := map[string]*binding.CompileRecord{}
	for id, ce := range c.compiles {
		if ce.rec != nil {
			held[id] = storedForm(ce.rec)
		}
	}
	st, err := e.db.RecordStorage(t.Context(), "long")
	if err != nil {
		t.Fatal(err)
	}
	// 200 turns: 401 messages, 6 full chunks per record; 65 records
	// remembered (binding.Retention) that would hold 390 chunks apart
	if st.Records != len(held) || st.Records < 60 || st.Chunks > 20 {
		t.Fatalf("stored %d records (%d held) in %d chunks, %d bytes: the records do not share their chunks", st.Records, len(held), st.Chunks, st.Bytes)
	}
	t.Logf("%d records, %d chunks, %d bytes", st.Records, st.Chunks, st.Bytes)

	// restart: a new binder on the same database
	b2 := NewBinder(&Journal{DB: e.db, Hub: e.hub}, BinderConfig{})
	c2 := b2.conv("long")
	if err := b2.load(t.Context(), c2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for id, ce := range c2.compiles {
		if ce.rec == nil {
			continue
		}
		n++
		if want := held[id]; !reflect.DeepEqual(storedForm(ce.rec), want) {
			t.Fatalf("compile %s after the restart reads %+v\nwant %+v", id, ce.rec, want)
		}
		if len(ce.chunks) == 0 {
			t.Fatalf("compile %s after the restart names no chunks", id)
		}
	}
	if n != len(held) {
		t.Fatalf("%d records after the restart, %d before", n, len(held))
	}
	// the next turns on the restarted daemon (in full: bases are in memory
	// only), then by reference again: every block kept (turn fails on a strip)
	e.b, g.last = b2, ""
	for g.turns < 260 {
		g.turn(t)
	}
	if st, err = e.db.RecordStorage(t.Context(), "long"); err != nil || st.Chunks > 24 {
		t.Fatalf("after 260 turns: %+v %v", st, err)
	}
}
