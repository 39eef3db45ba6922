package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// awaitT waits for ch or fails naming what was awaited.
func awaitT[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out after 60 s waiting for %s", what)
		panic("unreachable")
	}
}

// An abandoned compile must not hold its conversation: issue 13 saw a
// 1-message compile get no answer for 30 s after a client gave up on a
// long one. Over a real socket: the compile's context ends when its client
// goes away, the conversation is released, nothing of it is recorded, and
// the next compile on the conversation is answered.
func TestAbandonedCompileReleasesConversation(t *testing.T) {
	e := newBindingEnv(t, nil)
	body := request("ab", 2, 10)

	// 1. A parse still running for nobody holds the conversation's memo:
	// the next compile must not queue behind it.
	slot := e.b.memos.slot("ab")
	slot.mu.Lock()
	answered := make(chan error, 1)
	go func() {
		_, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "ab", Branch: "main", Request: body, Return: api.ReturnPlan})
		answered <- err
	}()
	if err := awaitT(t, "a compile while another parse of the conversation holds its memo", answered); err != nil {
		t.Fatal(err)
	}
	slot.mu.Unlock()

	// 2. A compile in progress whose client disconnects: its context ends
	// (the hook, inside the conversation's lock, sees it), and the next
	// compile is answered.
	entered, cancelled := make(chan struct{}), make(chan error, 1)
	e.b.follow = func(ctx context.Context, path string) error {
		if path != "/slow.jsonl" {
			return nil
		}
		close(entered)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return ctx.Err()
	}
	actx, abandon := context.WithCancel(t.Context())
	abandoned := make(chan error, 1)
	go func() {
		_, err := e.client.Compile(actx, &api.CompileCall{Conversation: "ab", Branch: "main", SessionFile: "/slow.jsonl", Request: body, Return: api.ReturnPlan})
		abandoned <- err
	}()
	awaitT(t, "the slow compile to start its work", entered)
	abandon()
	if err := awaitT(t, "the client of the slow compile to give up", abandoned); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned compile: %v", err)
	}
	if err := awaitT(t, "the abandoned compile's context to end in the daemon", cancelled); err == nil {
		t.Fatal("no cause")
	}
	go func() {
		_, err := e.client.Compile(t.Context(), &api.CompileCall{Conversation: "ab", Branch: "main", Request: body, Return: api.ReturnPlan})
		answered <- err
	}()
	if err := awaitT(t, "a compile after an abandoned one", answered); err != nil {
		t.Fatal(err)
	}
	st, err := e.client.Conversation(t.Context(), "ab")
	if err != nil {
		t.Fatal(err)
	}
	if st.Compiles != 2 {
		t.Fatalf("%d compiles remembered, want 2 (the abandoned one records nothing)", st.Compiles)
	}

	// 3. A call waiting for a busy conversation gives up when its context
	// ends, instead of waiting (and then working) for nobody.
	c, err := e.b.lock(t.Context(), "ab")
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.b.lock(gone, "ab"); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock of a busy conversation with an ended context: %v", err)
	}
	c.mu.Unlock()
}
