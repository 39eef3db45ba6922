package api

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// echoBinder answers every compile with the request it was given, as the
// daemon does when it strips nothing.
type echoBinder struct {
	got     []byte
	account string
	alias   AccountAlias
}

func (e *echoBinder) Compile(_ context.Context, call *CompileCall) (*CompileAnswer, error) {
	e.got = bytes.Clone(call.Request)
	e.account = call.Account
	return &CompileAnswer{CompilePlan: CompilePlan{CompileID: "c_1", Bound: true, Strips: []Strip{}, DroppedMessages: []string{}},
		Request: call.Request}, nil
}
func (*echoBinder) Accept(context.Context, *AcceptCall) (*AcceptAnswer, error) {
	return &AcceptAnswer{}, nil
}
func (*echoBinder) Release(context.Context, *ReleaseCall) (*ReleaseAnswer, error) {
	return &ReleaseAnswer{}, nil
}
func (*echoBinder) Conversation(context.Context, string) (*ConversationState, error) {
	return &ConversationState{}, nil
}
func (*echoBinder) Conversations(context.Context) (*ConversationList, error) {
	return &ConversationList{}, nil
}
func (*echoBinder) AccountSalt(context.Context) ([]byte, error) {
	return []byte("0123456789abcdef0123456789abcdef"), nil
}
func (e *echoBinder) AccountAlias(_ context.Context, a AccountAlias) (*AccountAliasAnswer, error) {
	e.alias = a
	return &AccountAliasAnswer{Added: true, Account: a.Account}, nil
}

// A request goes through the Go client byte for byte. pi's compaction
// summaries hold "<summary>" and its tool results "&" and "<"; json.Marshal
// of a RawMessage escaped them (\u003c) and compacted the whitespace, so the
// CLI's --out differed from the request it read even when nothing was
// stripped (seen on pi's before-compaction fixture).
func TestClientCompileSendsRequestVerbatim(t *testing.T) {
	s, _ := testServer()
	eb := &echoBinder{}
	s.Binder = eb
	c := NewClient(serveUnix(t, s, selfPeer))
	req := []byte("{\"model\": \"claude-opus-4-5\",\n \"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":" +
		"\"The conversation history before this point was compacted into the following summary:\\n\\n<summary>\\nA & B > C\\n</summary>\"," +
		"\"cache_control\":{\"type\":\"ephemeral\"}}]}], \"max_tokens\":32000,\"stream\":true}")
	ans, err := c.Compile(context.Background(), &CompileCall{Conversation: "ffae836b", Branch: "v1:999", Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(eb.got, req) {
		t.Errorf("daemon got\n%s\nwant\n%s", eb.got, req)
	}
	if !bytes.Equal(ans.Request, req) {
		t.Errorf("answer\n%s\nwant\n%s", ans.Request, req)
	}

	// The rest of the call still arrives.
	body, err := compileBody(&CompileCall{Conversation: "a<b", DryRun: true, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	var back CompileCall
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if back.Conversation != "a<b" || !back.DryRun {
		t.Errorf("call fields lost: %+v", back)
	}
}

// An accept's reply goes out byte for byte, beside the call's other
// fields, and the whole body is the call json.Marshal would write.
func TestAcceptBody(t *testing.T) {
	for _, call := range []*AcceptCall{
		{CompileID: "c_1", Reply: json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"<&>"}]}`), Usage: json.RawMessage(`{"input_tokens":3}`),
			InputTransformations: []InputTransformation{{Type: "thinking_dropped", Path: "messages.1.content.0", Reason: "prefix_binding_mismatch"}}},
		{CompileID: "c_2"},
		{CompileID: "c_3", Reply: json.RawMessage(`{"content":[]}`)},
	} {
		b, err := acceptBody(call)
		if err != nil {
			t.Fatal(err)
		}
		if len(call.Reply) > 0 && !bytes.Contains(b, append([]byte(`"reply":`), call.Reply...)) {
			t.Errorf("the reply was re-encoded: %s", b)
		}
		var got, want AcceptCall
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		w, _ := json.Marshal(call)
		json.Unmarshal(w, &want)
		var gotReply, wantReply any
		json.Unmarshal(got.Reply, &gotReply)
		json.Unmarshal(want.Reply, &wantReply)
		got.Reply, want.Reply = nil, nil
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotReply, wantReply) {
			t.Errorf("body %s\nreads as %+v, want %+v", b, got, want)
		}
	}
}
