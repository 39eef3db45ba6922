package daemon

import (
	"context"
	"testing"

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
