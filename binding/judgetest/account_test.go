package judgetest

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Research 1.5 and 3: Sonnet 5.5 and Haiku 5.5 blocks are read only in the
// account that minted them; elsewhere they are dropped unread, reported as
// organization_binding_mismatch, in every mode (never a 400). Other
// models' blocks replay in any account.
func TestAccountBoundBlocksDroppedInAnotherAccount(t *testing.T) {
	for _, model := range []string{"claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"} {
		for _, m := range []mode{ENF, DROP, REC} {
			t.Run(model+"/"+string(m), func(t *testing.T) {
				c := newConv(t, m, Documented())
				c.beta = true
				c.top["model"] = model
				c.user("q1")
				res := c.j.Answer(Call{Body: c.body(), Beta: true, Account: "A"}, []ReplyBlock{think("a"), say("1")})
				if res.Status != 200 {
					t.Fatal(res.Error)
				}
				c.msgs = append(c.msgs, decodeMsg(t, res.Reply))
				c.user("q2")
				body := c.body()
				same := c.j.Judge(Call{Body: body, Beta: true, Account: "A"})
				other := c.j.Judge(Call{Body: body, Beta: true, Account: "B"})
				if same.Status != 200 || len(same.Read()) != 1 || len(same.Transformations) != 0 {
					t.Fatalf("in its own account: %+v", same)
				}
				if other.Status != 200 {
					t.Fatalf("another account must never be a 400: %s", other.Error)
				}
				max, err := c.j.MaxAs("B", body)
				if err != nil {
					t.Fatal(err)
				}
				if model == "claude-opus-5-5" {
					if len(other.Read()) != 1 || max != 1 {
						t.Fatalf("an Opus 5.5 block is not account-bound: read %v, max %d", other.Read(), max)
					}
					return
				}
				want := []Transformation{{"thinking_dropped", "messages.1.content.0", "organization_binding_mismatch"}}
				if len(other.Read()) != 0 || other.Blocks[0].Fate != FateDroppedAccount || !reflect.DeepEqual(other.Transformations, want) || max != 0 {
					t.Fatalf("in another account: read %v, fate %v, transformations %+v, max %d", other.Read(), other.Blocks[0].Fate, other.Transformations, max)
				}
			})
		}
	}
}

func decodeMsg(t *testing.T, raw []byte) any {
	t.Helper()
	var msg any
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	return msg
}
