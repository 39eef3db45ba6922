package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/my-pi/bindery/api"
)

// A call that panics (net/http recovers a handler's panic and serves on)
// must not leave its conversation locked: every later call on it would
// hang for the daemon's life.
func TestBinderPanicDoesNotLeakConversationLock(t *testing.T) {
	e := newBindingEnv(t, nil)
	e.b.follow = func(context.Context, string) error { panic("follow broke") }
	body := request("pan", 2, 10)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the compile did not panic")
			}
		}()
		e.b.Compile(t.Context(), &api.CompileCall{Conversation: "pan", Branch: "main", SessionFile: "/nowhere/s.jsonl", Request: body, Return: api.ReturnPlan})
	}()
	e.b.follow = nil
	done := make(chan error, 1)
	go func() {
		_, err := e.b.Compile(t.Context(), &api.CompileCall{Conversation: "pan", Branch: "main", Request: body, Return: api.ReturnPlan})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the conversation stayed locked after a panicking compile")
	}
}
