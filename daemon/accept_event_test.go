package daemon

import (
	"encoding/json"
	"testing"

	"github.com/my-pi/bindery/api"
)

// An accept's event carries exactly the fields a map of them marshalled
// to (acceptFields is a struct for speed, its JSON must not change), and
// an owner moved by the accept is the branch's owner after a restart.
func TestAcceptEventFieldsAndOwner(t *testing.T) {
	e := newBindingEnv(t, nil)
	ctx := t.Context()
	var last string
	for i := range 2 { // the second accept moves an owner the branch row already holds
		ans, err := e.b.Compile(ctx, &api.CompileCall{Conversation: "ev", Branch: "b", Request: request("ev", 2+i, 10), Return: api.ReturnPlan})
		if err != nil {
			t.Fatal(err)
		}
		acc, err := e.b.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID, Reply: reply("ev-reply-" + ans.CompileID)})
		if err != nil {
			t.Fatal(err)
		}
		last = ans.CompileID
		evs, _, err := e.db.EventsSince(ctx, 0, "ev", 1000)
		if err != nil {
			t.Fatal(err)
		}
		var got json.RawMessage
		for _, ev := range evs {
			if ev.Type == api.EventAccept {
				got = ev.Fields
			}
		}
		want, _ := json.Marshal(map[string]any{"compileId": ans.CompileID, "branch": "b",
			"stamped": acc.Stamped, "released": acc.Released, "owner": true, "reply": true})
		if string(got) != string(want) {
			t.Fatalf("accept %d event fields:\n got %s\nwant %s", i, got, want)
		}
	}
	st, err := e.db.LoadConversation(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Branches) != 1 || st.Branches[0].Owner != last {
		t.Fatalf("stored branches %+v, want b owned by %s", st.Branches, last)
	}
}
