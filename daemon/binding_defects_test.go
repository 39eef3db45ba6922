package daemon

import (
	"context"
	"github.com/my-pi/bindery/db"
	"strings"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// The first compile after a start reads the compile seq high-water. A
// client that goes away during that call must not leave its context's
// error behind: every later compile would fail until a restart.
func TestBinderSeqSurvivesCancelledFirstCompile(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("seq", 2, 10)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.b.Compile(gone, &api.CompileCall{Conversation: "seq", Branch: "main", Request: body, Return: api.ReturnPlan}); err == nil {
		t.Fatal("a compile with a cancelled context succeeded")
	}
	ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "seq", Branch: "main", Request: body, Return: api.ReturnPlan})
	if err != nil {
		t.Fatalf("a compile after a cancelled one: %v", err)
	}
	if _, err := e.b.Accept(t.Context(), &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("sig-seq-r")}); err != nil {
		t.Fatalf("accept: %v", err)
	}
}

// A release by signature can arrive before a conversation's first compile
// (a fork whose first request the provider refused). It must not create
// the conversation without its parent: the first compile reads the parent
// and inherits its releases and engagement, before and after a restart.
func TestBinderReleaseBeforeFirstCompileKeepsParent(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("par", 3, 10) // thinking at messages.1/3/5.content.0
	stampAll(t, e, "par", body)
	p, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "par", Branch: "main", Request: body, Return: api.ReturnPlan})
	if err != nil || len(p.Strips) != 0 {
		t.Fatalf("parent compile: %+v %v", p, err)
	}
	if r, err := e.b.Release(t.Context(), &api.ReleaseCall{Conversation: "par", CompileID: p.CompileID, Path: "messages.5.content.0"}); err != nil || r.Released != 1 {
		t.Fatalf("release on the parent: %+v %v", r, err)
	}
	// (the refused block is one the parent's replies minted: it is stamped,
	// so bindery knows it; an unknown signature records nothing)
	if r, err := e.b.Release(t.Context(), &api.ReleaseCall{Conversation: "kid", Signature: "sig-par-0"}); err != nil || r.Released != 1 {
		t.Fatalf("release on the fork before its first compile: %+v %v", r, err)
	}
	for i, b := range []*Binder{e.b, NewBinder(e.j, BinderConfig{})} { // and after a reload
		e.b = b
		ans, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "kid", Branch: "k", Parent: &api.BranchRef{Conversation: "par", Branch: "main"},
			Request: body, Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		// messages.1: kid's own release by signature; messages.5: the
		// parent's release, inherited at the fork
		if !ans.Engaged || len(ans.Strips) != 2 || ans.Strips[0].Path != "messages.1.content.0" || ans.Strips[1].Path != "messages.5.content.0" ||
			ans.Strips[0].Reason != "released" || ans.Strips[1].Reason != "released" {
			t.Fatalf("round %d: the fork lost its parent (engaged %v, strips %+v)", i, ans.Engaged, ans.Strips)
		}
		st, err := e.b.Conversation(t.Context(), "kid")
		if err != nil {
			t.Fatal(err)
		}
		if st.Parent == nil || st.Parent.Conversation != "par" || len(st.Releases) != 1 {
			t.Fatalf("round %d: kid's state: parent %+v, releases %+v", i, st.Parent, st.Releases)
		}
	}
}

// A write whose fn panics must not wedge the journal (its transaction
// left open, the writer lock held, the queue never drained): the panic is
// that call's error, its work is rolled back and later writes commit.
func TestJournalPanicDoesNotWedgeWriter(t *testing.T) {
	e := newBindingEnv(t, nil)
	first := make(chan error, 1)
	go func() {
		first <- e.j.Write(t.Context(), func(ctx context.Context, tx *db.Tx, emit Emit) error {
			if err := emit("test", "pan", nil); err != nil {
				return err
			}
			panic("fn broke")
		})
	}()
	select {
	case err := <-first:
		if err == nil || !strings.Contains(err.Error(), "fn broke") {
			t.Fatalf("a panicking write answered %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a panicking write never returned")
	}
	done := make(chan error, 1)
	go func() {
		done <- e.j.Write(t.Context(), func(ctx context.Context, tx *db.Tx, emit Emit) error { return emit("test", "after", nil) })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the journal stayed wedged after a panicking write")
	}
	evs, _, err := e.db.EventsSince(t.Context(), 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Conversation != "after" {
		t.Fatalf("events %+v: want only the later write's", evs)
	}
}
