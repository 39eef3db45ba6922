package daemon

import (
	"encoding/json"
	"testing"

	"github.com/my-pi/bindery/api"
)

// An accept's usage is recorded once per compile: the accept repeated
// with other figures adds nothing, and a usage that does not read (wrong
// types, out of bounds, not an object) still accepts the reply, its
// counts recorded as unknown (the report's usageMissing).
func TestAcceptUsageRecordedOnce(t *testing.T) {
	e := newBindingEnv(t, nil)
	ctx := t.Context()
	accept := func(i int, usage string) (*api.AcceptAnswer, string) {
		t.Helper()
		ans, err := e.b.Compile(ctx, &api.CompileCall{Conversation: "cli:u", Branch: "b", Request: request("u", 2+i, 10), Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		acc, err := e.b.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("u-reply-" + ans.CompileID), Usage: json.RawMessage(usage)})
		if err != nil {
			t.Fatalf("accept with usage %s: %v", usage, err)
		}
		return acc, ans.CompileID
	}
	_, first := accept(0, `{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":300,"cache_creation_input_tokens":40}`)
	again, err := e.b.Accept(ctx, &api.AcceptCall{CompileID: first, Reply: reply("u-reply-" + first),
		Usage: json.RawMessage(`{"input_tokens":999,"output_tokens":999,"cache_read_input_tokens":999,"cache_creation_input_tokens":999}`)})
	if err != nil || !again.Repeated {
		t.Fatalf("repeated accept: %+v %v", again, err)
	}
	for i, bad := range []string{`{"input_tokens":"10","output_tokens":-1,"cache_read_input_tokens":1e13,"cache_creation_input_tokens":0.5}`, `[1]`, `"usage"`} {
		if acc, _ := accept(1+i, bad); !acc.Accepted || acc.Repeated {
			t.Fatalf("accept with usage %s: %+v", bad, acc)
		}
	}
	us, err := e.db.HostUsages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 {
		t.Fatalf("host usage rows %+v, want one", us)
	}
	u := us[0]
	if u.Conversation != "cli:u" || u.Replies != 4 || u.Missing != 3 || u.Input != 10 || u.Output != 20 || u.CacheRead != 300 || u.CacheWrite != 40 {
		t.Fatalf("host usage %+v: want 4 replies, 3 without usage, the first accept's figures once", u)
	}
}
