package daemon

import (
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// TestErrorsNameTheirConversation: an internal failure (here the database
// closed under the daemon) reaches the log naming the conversation and the
// compile it concerns, so a 500 can be traced.
func TestErrorsNameTheirConversation(t *testing.T) {
	e := newBindingEnv(t, nil)
	ctx := t.Context()
	ans, err := e.b.Compile(ctx, &api.CompileCall{Conversation: "conv-err", Branch: "main", Request: request("conv-err", 3, 10)})
	if err != nil {
		t.Fatal(err)
	}
	// A second Binder on the same journal, whose database is then closed:
	// its mirror is cold, so every call must read.
	b2 := NewBinder(e.j, BinderConfig{})
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func() error
		want []string
	}{
		{"compile", func() error {
			_, err := b2.Compile(ctx, &api.CompileCall{Conversation: "conv-err", Branch: "main", Request: request("conv-err", 4, 10)})
			return err
		}, []string{`conversation "conv-err"`, "compile "}},
		{"accept", func() error {
			_, err := b2.Accept(ctx, &api.AcceptCall{CompileID: ans.CompileID})
			return err
		}, []string{"accept of compile " + ans.CompileID}},
		{"release", func() error {
			_, err := b2.Release(ctx, &api.ReleaseCall{Conversation: "conv-err", Signature: "sig-conv-err-0"})
			return err
		}, []string{`conversation "conv-err"`, "release by signature"}},
		{"view", func() error {
			_, err := b2.Conversation(ctx, "conv-err")
			return err
		}, []string{`conversation "conv-err"`}},
	} {
		err := c.call()
		if err == nil {
			t.Errorf("%s on a closed database: no error", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", c.name, err, w)
			}
		}
	}
}
