package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/my-pi/bindery/api"
)

// postBody POSTs body to the daemon and returns the status and the whole
// answer, bytes as the daemon wrote them.
func postBody(t testing.TB, sock, path string, body []byte) (int, []byte) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://bindery"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", path, err)
	}
	return resp.StatusCode, b
}

// dbCount counts rows in the daemon's database (read only, beside the
// running daemon: WAL lets a reader in).
func (d *bindDaemon) dbCount(q string, args ...any) int {
	d.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.dir, "state", "bindery.db")+"?mode=ro")
	if err != nil {
		d.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// OpenAI chat bodies (as pi's openai-completions builds them, reasoning
// included) pass through a real daemon byte for byte, and nothing is
// recorded: no compile row, no event, no conversation. Their compile id
// accepts and releases as a no-op, and the conversation's next Messages
// body compiles as usual. (Bedrock Converse bodies are compiled:
// converse_e2e_test.go.)
func TestNotMessagesBodiesPassThrough(t *testing.T) {
	d := newDaemon(t)
	const conv = "0193e6c4-ffff-7000-8000-000000000020"
	events := func() int { return d.dbCount(`SELECT count(*) FROM events WHERE conversation = ?`, conv) }
	for _, name := range []string{"openai-chat.json", "openai-chat-plain.json", "pi16-openrouter-openai-chat.json"} {
		body, err := os.ReadFile(filepath.Join("..", "..", "binding", "testdata", "foreign", name))
		if err != nil {
			t.Fatal(err)
		}
		// The request is the JSON value: its inner whitespace is kept, the
		// file's final newline is outside it.
		body = bytes.TrimRight(body, "\n")
		for _, ret := range []string{"", "request", "plan"} {
			call := []byte(`{"conversation":"` + conv + `","branch":"b1",`)
			if ret != "" {
				call = append(call, `"return":"`+ret+`",`...)
			}
			call = append(append(append(call, `"request":`...), body...), '}')
			status, out := postBody(t, d.sock, "/v1/compile", call)
			if status != http.StatusOK {
				t.Fatalf("%s: compile answered %d: %s", name, status, out)
			}
			var ans struct {
				api.CompilePlan
				Request json.RawMessage `json:"request"`
			}
			if err := json.Unmarshal(out, &ans); err != nil {
				t.Fatalf("%s: %v: %s", name, err, out)
			}
			if ans.Bound || ans.NotMessages == "" || ans.ThinkingStripped != 0 || len(ans.Strips) != 0 || ans.Engaged {
				t.Fatalf("%s: plan %+v", name, ans.CompilePlan)
			}
			if ret == "plan" {
				if ans.Request != nil {
					t.Fatalf("%s: return plan answered a request", name)
				}
			} else if !bytes.Equal(ans.Request, body) {
				t.Fatalf("%s: the request came back changed:\n got %q\nwant %q", name, ans.Request, body)
			}
			acc, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID,
				Reply: json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"hi"}]}`)})
			if err != nil || !acc.Accepted || acc.Stamped != 0 || acc.Released != 0 {
				t.Fatalf("%s: accept of %s: %+v %v", name, ans.CompileID, acc, err)
			}
			rel, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: conv, CompileID: ans.CompileID, Path: "messages.1.content.0"})
			if err != nil || rel.Released != 0 {
				t.Fatalf("%s: release of %s: %+v %v", name, ans.CompileID, rel, err)
			}
		}
	}
	if n := d.dbCount(`SELECT count(*) FROM compiles WHERE conversation = ?`, conv); n != 0 {
		t.Fatalf("%d compile rows for bodies bindery cannot read", n)
	}
	if n := events(); n != 0 {
		t.Fatalf("%d events for bodies bindery cannot read", n)
	}
	if _, err := d.client.Conversation(ctxT(t), conv); !api.IsCode(err, api.CodeUnknownConversation) {
		t.Fatalf("the conversation became known: %v", err)
	}

	// The same conversation's Messages body is compiled and recorded.
	h := newHost(t)
	h.messages = []any{map[string]any{"role": "user", "content": "hi"}}
	ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Branch: "b1", Request: h.body(h.system)})
	if err != nil || !ans.Bound || ans.NotMessages != "" {
		t.Fatalf("a Messages body after them: %+v %v", ans, err)
	}
	if n := d.dbCount(`SELECT count(*) FROM compiles WHERE conversation = ?`, conv); n != 1 {
		t.Fatalf("%d compile rows after one Messages compile", n)
	}
}
