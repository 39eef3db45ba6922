package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
)

// Bedrock Converse bodies through a real daemon (binding/converse.go): the
// first compile engages nothing and strips nothing it can keep, the accept
// of a Converse reply (a whole Converse response, with Bedrock's
// additionalModelResponseFields) stamps its block, the next compile keeps
// every block, a tool result rewritten under them strips the later blocks
// with the request cut byte for byte, and a release by the provider's path
// (a ValidationException) releases that block and every later one.
func TestConverseBodiesCompiled(t *testing.T) {
	d := newDaemon(t)
	const conv = "0193e6c4-ffff-7000-8000-000000000021"
	sys := `"system":[{"text":"You are pi."},{"cachePoint":{"type":"default"}}],"toolConfig":{"tools":[{"toolSpec":{"name":"read","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"auto":{}}},` +
		`"additionalModelRequestFields":{"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}},"anthropic_beta":["thinking-binding-controls-2026-08-01"]}`
	req := func(msgs ...string) json.RawMessage {
		return json.RawMessage(`{"modelId":"us.anthropic.claude-opus-5-5","messages":[` + strings.Join(msgs, ",") + `],` + sys + `}`)
	}
	user := func(s string) string {
		return `{"role":"user","content":[{"text":"` + s + `"},{"cachePoint":{"type":"default"}}]}`
	}
	userPlain := func(s string) string { return `{"role":"user","content":[{"text":"` + s + `"}]}` }
	reason := func(sig string) string {
		return `{"reasoningContent":{"reasoningText":{"text":"think","signature":"` + sig + `"}}}`
	}
	toolUse := func(id string) string {
		return `{"toolUse":{"toolUseId":"` + id + `","name":"read","input":{"path":"a.go"}}}`
	}
	result := func(id, text string) string {
		return `{"role":"user","content":[{"toolResult":{"toolUseId":"` + id + `","content":[{"text":"` + text + `"}],"status":"success"}}]}`
	}
	assistant := func(blocks ...string) string {
		return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
	}
	compile := func(body json.RawMessage) *api.CompileAnswer {
		t.Helper()
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Branch: "b1", Request: body, Return: api.ReturnRequest})
		if err != nil || !ans.Bound || ans.NotMessages != "" {
			t.Fatalf("compile: %+v %v", ans, err)
		}
		return ans
	}
	accept := func(id, reply string) {
		t.Helper()
		acc, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: id, Reply: json.RawMessage(reply)})
		if err != nil || !acc.Accepted {
			t.Fatalf("accept %s: %+v %v", id, acc, err)
		}
	}
	paths := func(a *api.CompileAnswer) []string {
		var out []string
		for _, s := range a.Strips {
			out = append(out, s.Path+" "+s.Reason)
		}
		return out
	}

	r1 := assistant(reason("S1"), toolUse("t1"))
	a1 := compile(req(user("read a.go")))
	accept(a1.CompileID, `{"output":{"message":`+r1+`},"stopReason":"tool_use","usage":{"inputTokens":10,"outputTokens":5},"additionalModelResponseFields":{"input_transformations":[]}}`)
	r2 := assistant(reason("S2"), toolUse("t2"))
	a2 := compile(req(userPlain("read a.go"), r1, result("t1", "package a")+"", user("more")))
	if len(a2.Strips) != 0 || a2.ThinkingKept != 1 {
		t.Fatalf("after the accept: strips %v kept %d", paths(a2), a2.ThinkingKept)
	}
	accept(a2.CompileID, r2)
	h := []string{userPlain("read a.go"), r1, result("t1", "package a"), userPlain("more"), r2, result("t2", "package b"), user("go on")}
	a3 := compile(req(h...))
	if len(a3.Strips) != 0 || a3.ThinkingKept != 2 || !bytes.Equal(a3.Request, req(h...)) {
		t.Fatalf("a pure append: strips %v kept %d", paths(a3), a3.ThinkingKept)
	}
	// The pruner: the first tool result rewritten under S2.
	pruned := append([]string(nil), h...)
	pruned[2] = result("t1", "[pruned]")
	a4 := compile(req(pruned...))
	if got := paths(a4); len(got) != 1 || got[0] != "messages.4.content.0 prefix-changed" {
		t.Fatalf("pruned: strips %v", got)
	}
	want := bytes.Replace(req(pruned...), []byte(reason("S2")+","), nil, 1)
	if !bytes.Equal(a4.Request, want) {
		t.Fatalf("the rewrite is not the host's bytes minus S2:\n got %s\nwant %s", a4.Request, want)
	}
	// A refusal of S1 bindery could not foresee (a ValidationException
	// naming messages.1.content.0 of what was sent): released, with every
	// later block.
	rel, err := d.client.Release(ctxT(t), &api.ReleaseCall{Conversation: conv, Branch: "b1", CompileID: a3.CompileID, Path: "messages.1.content.0"})
	if err != nil || rel.Released != 2 {
		t.Fatalf("release: %+v %v", rel, err)
	}
	a5 := compile(req(h...))
	if got := paths(a5); len(got) != 2 || got[0] != "messages.1.content.0 released" || got[1] != "messages.4.content.0 released" {
		t.Fatalf("after the release: strips %v", got)
	}
	if n := d.dbCount(`SELECT count(*) FROM compiles WHERE conversation = ?`, conv); n != 5 {
		t.Fatalf("%d compile rows, want 5", n)
	}

	// The CLI accepts a whole Converse response, its drops read from
	// additionalModelResponseFields: on another branch (no releases yet)
	// S1 is kept, Bedrock reports it dropped, the accept releases it.
	b2, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Branch: "b2", Request: req(h...), Return: api.ReturnPlan})
	if err != nil || b2.ThinkingKept != 2 {
		t.Fatalf("branch b2: %+v %v", b2, err)
	}
	resp := filepath.Join(d.dir, "converse-response.json")
	full := `{"output":{"message":` + assistant(reason("S3"), `{"text":"done"}`) + `},"stopReason":"end_turn",` +
		`"additionalModelResponseFields":{"input_transformations":[{"type":"thinking_dropped","path":"messages.1.content.0","reason":"prefix_binding_mismatch"}]}}`
	if err := os.WriteFile(resp, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.runCLI(ctxT(t), "accept", "--compile", b2.CompileID, "--reply", resp, "--json")
	var acc api.AcceptAnswer
	if code != 0 || json.Unmarshal([]byte(out), &acc) != nil || !acc.Accepted || acc.Stamped != 1 || acc.Released != 1 {
		t.Fatalf("accept of a Converse response: %d %s %s", code, out, errOut)
	}
	// The daemon reads them itself: the same response through the API,
	// with no input_transformations listed apart, on a third branch.
	b3, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: conv, Branch: "b3", Request: req(h...), Return: api.ReturnPlan})
	if err != nil || b3.ThinkingKept != 2 {
		t.Fatalf("branch b3: %+v %v", b3, err)
	}
	a, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: b3.CompileID, Reply: json.RawMessage(full)})
	if err != nil || !a.Accepted || a.Released != 1 {
		t.Fatalf("API accept of a whole Converse response: %+v %v", a, err)
	}
}
