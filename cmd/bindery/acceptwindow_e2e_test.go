package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// Issue 13 item 14: past the window of remembered accepted compiles, a
// repeated accept must say what it is. Within --accepted-window: 200
// repeated; beyond it: 404 compile_forgotten naming the window; an id this
// database never made: 404 unknown_compile. The same after a restart.
func TestAcceptWindowE2E(t *testing.T) {
	d := newDaemon(t, "--accepted-window", "256")
	h := newHost(t)
	var ids []string
	var replies [][]byte
	for i := range 300 {
		h.messages = []any{map[string]any{"role": "user", "content": fmt.Sprintf("question %d", i)}}
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: "win", Branch: fmt.Sprintf("b%d", i), Request: h.body(h.system)})
		if err != nil {
			t.Fatal(err)
		}
		res := h.send(ans.Request, h.reply(false))
		if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: res.Reply}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ans.CompileID)
		replies = append(replies, res.Reply)
	}
	for round := range 2 {
		if round == 1 {
			d.restart(1) // kill -9: what the database kept
		}
		again, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ids[len(ids)-1], Reply: replies[len(ids)-1]})
		if err != nil || !again.Repeated || !again.Accepted {
			t.Fatalf("round %d: repeat of the newest accept: %+v %v, want 200 repeated", round, again, err)
		}
		again, err = d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ids[300-256], Reply: replies[300-256]})
		if err != nil || !again.Repeated {
			t.Fatalf("round %d: repeat of the oldest accept in the window: %+v %v, want 200 repeated", round, again, err)
		}
		_, err = d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ids[0], Reply: replies[0]})
		e, ok := errors.AsType[*api.Error](err)
		if !ok || e.Code != api.CodeCompileForgotten || e.Status != 404 || !strings.Contains(e.Message, "256") {
			t.Fatalf("round %d: repeat of an accept beyond the window: %v, want 404 compile_forgotten naming 256", round, err)
		}
		_, err = d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: "c_zzzzzzzz_aaaaaaaaaaaaa"})
		if !api.IsCode(err, api.CodeUnknownCompile) {
			t.Fatalf("round %d: accept of an id never made: %v, want unknown_compile", round, err)
		}
	}
	if st, err := d.client.Conversation(ctxT(t), "win"); err != nil || st.Stamps != 300 {
		t.Fatalf("stamps after the repeats: %+v %v, want 300 (a repeat records nothing)", st, err)
	}
}
