package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/my-pi/bindery/api"
	"github.com/my-pi/bindery/binding/judgetest"
	"github.com/my-pi/bindery/daemon/report"
)

// pi16Body is a request as pi 1.6 sends it for a model with mid-
// conversation effort: adaptive thinking with pi's own drop_block, the
// active effort at the top and as a trailing role "system" message, the
// betas array its SDK turns into the anthropic-beta header.
func pi16Body(t testing.TB, h *host, msgs []any, effort string, maxTokens int) []byte {
	all := append(append([]any{}, msgs...), map[string]any{"role": "system", "content": []any{}, "output_config": map[string]any{"effort": effort}})
	b, err := json.Marshal(map[string]any{"model": h.model, "max_tokens": maxTokens, "stream": true,
		"system": []any{map[string]any{"type": "text", "text": h.system, "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":  h.tools, "messages": all,
		"thinking":      map[string]any{"type": "adaptive", "block_binding": map[string]any{"prefix_mismatch_behavior": "drop_block"}},
		"output_config": map[string]any{"effort": effort},
		"betas":         []string{"thinking-binding-controls-2026-08-01"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func effortMsg(e string) any {
	return map[string]any{"role": "system", "content": []any{}, "output_config": map[string]any{"effort": e}}
}

// assistant16 writes a reply as pi 1.6 stores it: usage with cacheWrite1h
// and reasoning.
func (p *piSession) assistant16(id, parent string, reply json.RawMessage, model string) {
	p.t.Helper()
	p.assistantAt(id, parent, reply, model, p.ts(),
		map[string]any{"input": 10, "output": 40, "cacheRead": 1000, "cacheWrite": 300, "cacheWrite1h": 100, "reasoning": 20, "totalTokens": 1350,
			"cost": map[string]any{"input": 0.00005, "output": 0.001, "cacheRead": 0.0005, "cacheWrite": 0.002, "total": 0.00355}},
		map[string]any{"thinkingLevel": "high"})
}

// A pi 1.6 session through a real daemon, its bodies judged by the
// provider's documented rules with pi's own drop_block on (any drop fails
// the test: bindery must have stripped it first). It has per-turn effort
// system messages (the effort changes between turns), a reply whose accept
// is lost and which lands after a context_edit (bindery attributes it from
// the file, past the edit), a pruner's context_edit of an old tool result
// that the next request honours (the reply after it is stripped as
// prefix-changed, from its file stamp), a cache warm (a dry run; its usage
// entry becomes the leaf), a persisted system message, and a reply
// condensed by a context_edit that keeps its thinking block in place (kept,
// and read by the provider). The report
// shows the warm as its own line and the branch's requests without it.
func TestPi16SessionThroughDaemon(t *testing.T) {
	d := newDaemon(t)
	h := newHost(t)
	h.model = "claude-opus-5-5"
	sid := "0193e6c4-1616-7000-8000-000000000016"
	ps := newPiSession(t, d.agent, sid)
	entries := 0
	waitEntries := func() {
		t.Helper()
		waitFor(t, fmt.Sprintf("the watcher to ingest %d entries", entries), func() (bool, string) {
			s, err := d.client.Session(ctxT(t), sid)
			return err == nil && s.Entries == entries, sessionState(s, err)
		})
	}
	compile := func(branch string, body []byte, dry bool) *api.CompileAnswer {
		t.Helper()
		ans, err := d.client.Compile(ctxT(t), &api.CompileCall{Conversation: sid, Branch: branch, SessionFile: ps.path, Request: body, DryRun: dry})
		if err != nil {
			t.Fatalf("compile at %s: %v", branch, err)
		}
		if !ans.Bound {
			t.Fatalf("compile at %s: a pi 1.6 body not bound: %s", branch, ans.NotMessages)
		}
		return ans
	}
	strips := func(ans *api.CompileAnswer) string {
		var s []string
		for _, x := range ans.Strips {
			s = append(s, x.Path+" "+x.Reason)
		}
		return strings.Join(s, ", ")
	}
	var msgs []any
	asMsg := func(reply json.RawMessage) any {
		var m any
		json.Unmarshal(reply, &m)
		return m
	}
	// answered: the provider answers ans's request, pi writes the reply
	// under parent as aid, and it is accepted.
	answered := func(ans *api.CompileAnswer, aid, parent string, toolUse bool) json.RawMessage {
		t.Helper()
		r := h.send(ans.Request, h.reply(toolUse))
		ps.assistant16(aid, parent, r.Reply, h.model)
		entries++
		if _, err := d.client.Accept(ctxT(t), &api.AcceptCall{CompileID: ans.CompileID, Reply: r.Reply}); err != nil {
			t.Fatalf("accept of %s: %v", aid, err)
		}
		return r.Reply
	}

	// 1. u1, a tool call, accepted.
	ps.user("u1", "", "read a.go")
	entries++
	msgs = append(msgs, map[string]any{"role": "user", "content": "read a.go"}, effortMsg("high"))
	ans := compile("u1", pi16Body(t, h, msgs[:1], "high", 32000), false)
	r1 := answered(ans, "a1", "u1", true)
	msgs = append(msgs, asMsg(r1))

	// 2. the tool result; compiled at it; a context_edit (a pruner
	// shortening the result for later requests) lands while the reply
	// streams, and the reply hangs under it. Its accept is lost.
	toolID := fmt.Sprintf("toolu_%d", h.turn)
	ps.append(map[string]any{"type": "message", "id": "t1", "parentId": "a1", "timestamp": ps.ts(),
		"message": map[string]any{"role": "toolResult", "toolCallId": toolID, "toolName": "read", "content": []any{map[string]any{"type": "text", "text": "package a"}}, "isError": false, "timestamp": 3}})
	entries++
	result := func(text string) any {
		return map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": toolID, "content": text}}}
	}
	msgs = append(msgs, result("package a"), effortMsg("high"))
	ans = compile("t1", pi16Body(t, h, msgs[:len(msgs)-1], "high", 32000), false)
	if ans.ThinkingStripped != 0 {
		t.Fatalf("turn 2 strips: %s", strips(ans))
	}
	r2 := h.send(ans.Request, h.reply(false))
	ps.append(map[string]any{"type": "context_edit", "id": "e1", "parentId": "t1", "timestamp": ps.ts(), "targetId": "t1",
		"replacement": map[string]any{"content": []any{map[string]any{"type": "text", "text": "[pruned]"}}}})
	ps.assistant16("a2", "e1", r2.Reply, h.model)
	entries += 2
	msgs = append(msgs, asMsg(r2.Reply))
	waitEntries()
	waitFor(t, "the reply seen only in the file to be stamped (past the context_edit)", func() (bool, string) {
		st, err := d.client.Conversation(ctxT(t), sid)
		return err == nil && st.Stamps == 2, convState(st, err)
	})

	// 3. a cache warm: the same request with max_tokens 1, compiled as a
	// dry run; pi writes its usage entry under the leaf.
	warm := compile("a2", pi16Body(t, h, msgs, "high", 1), true)
	if res := h.j.Judge(judgetest.Call{Body: warm.Request, Beta: true}); res.Refused() || len(res.Transformations) != 0 {
		t.Fatalf("the warm request: %d %s %+v", res.Status, res.Error, res.Transformations)
	}
	ps.append(map[string]any{"type": "usage", "id": "w1", "parentId": "a2", "timestamp": ps.ts(), "kind": "cache_warm", "provider": "anthropic", "model": h.model,
		"usage": map[string]any{"input": 3, "output": 1, "cacheRead": 1400, "cacheWrite": 0, "cacheWrite1h": 0, "reasoning": 0, "totalTokens": 1404,
			"cost": map[string]any{"input": 0.000015, "output": 0.000025, "cacheRead": 0.00007, "cacheWrite": 0, "total": 0.00011}}})
	entries++

	// 4. u2 under the warm's entry, at a lower effort; the request honours
	// the edit: the tool result reads "[pruned]", so a2's thinking (after
	// it) is stripped as prefix-changed (its stamp came from the file),
	// and a1's (before it) is kept.
	ps.user("u2", "w1", "thanks")
	entries++
	msgs[3] = result("[pruned]")
	msgs = append(msgs, map[string]any{"role": "user", "content": "thanks"})
	ans = compile("u2", pi16Body(t, h, msgs, "low", 32000), false)
	if got := strips(ans); got != "messages.5.content.0 prefix-changed" {
		t.Fatalf("turn 4 strips %q, want a2's thinking as prefix-changed", got)
	}
	r3 := answered(ans, "a3", "u2", false)
	msgs = append(msgs, effortMsg("low"), asMsg(r3))

	// 5. a persisted system message (pi sends it just before the next
	// assistant reply), then u3 and u4: nothing new is stripped.
	ps.append(map[string]any{"type": "message", "id": "s1", "parentId": "a3", "timestamp": ps.ts(),
		"message": map[string]any{"role": "system", "content": "The date is now 2026-11-30.", "timestamp": 4}})
	ps.user("u3", "s1", "go on")
	entries += 2
	msgs = append(msgs, map[string]any{"role": "user", "content": "go on"},
		map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "The date is now 2026-11-30."}}})
	ans = compile("u3", pi16Body(t, h, msgs, "low", 32000), false)
	// The accept of turn 4 released a2's block: it stays out.
	if got := strips(ans); got != "messages.5.content.0 released" {
		t.Fatalf("turn 5 strips %q", got)
	}
	r4 := answered(ans, "a4", "u3", false)
	msgs = append(msgs, effortMsg("low"), asMsg(r4))
	ps.user("u4", "a4", "and now")
	entries++
	msgs = append(msgs, map[string]any{"role": "user", "content": "and now"})
	ans = compile("u4", pi16Body(t, h, msgs, "high", 32000), false)
	if got := strips(ans); got != "messages.5.content.0 released" {
		t.Fatalf("turn 6 strips %q", got)
	}
	r5 := h.send(ans.Request, h.reply(false))
	ps.assistant16("a5", "u4", r5.Reply, h.model)
	entries++
	waitEntries()
	waitFor(t, "the second reply seen only in the file to be stamped", func() (bool, string) {
		st, err := d.client.Conversation(ctxT(t), sid)
		return err == nil && st.Stamps == 5, convState(st, err)
	})

	// 7. an extension condenses that reply (its accept lost too): the edit
	// keeps its thinking block first and replaces its text. The stamp was
	// made from the reply as minted; the block's place is unchanged, so
	// the next request keeps it, and the provider reads it.
	var r5msg map[string]any
	json.Unmarshal(r5.Reply, &r5msg)
	think5 := r5msg["content"].([]any)[0].(map[string]any)
	ps.append(map[string]any{"type": "context_edit", "id": "e2", "parentId": "a5", "timestamp": ps.ts(), "targetId": "a5",
		"replacement": map[string]any{"content": []any{
			map[string]any{"type": "thinking", "thinking": think5["thinking"], "thinkingSignature": think5["signature"]},
			map[string]any{"type": "text", "text": "[condensed]"}}}})
	ps.user("u5", "e2", "last one")
	entries += 2
	msgs = append(msgs, effortMsg("high"), map[string]any{"role": "assistant", "content": []any{think5, map[string]any{"type": "text", "text": "[condensed]"}}},
		map[string]any{"role": "user", "content": "last one"})
	ans = compile("u5", pi16Body(t, h, msgs, "high", 32000), false)
	if got := strips(ans); got != "messages.5.content.0 released" {
		t.Fatalf("turn 7 strips %q: the condensed reply's block must be kept", got)
	}
	h.send(ans.Request, h.reply(false))
	waitEntries()

	det, err := d.client.Session(ctxT(t), sid)
	if err != nil || !det.Engaged || det.Stamps != 5 {
		t.Fatalf("session: engaged %v stamps %d (%v)", det.Engaged, det.Stamps, err)
	}
	out, serr, code := d.runCLI(ctxT(t), "report", "--json", "--session", sid)
	if code != 0 {
		t.Fatalf("report: %d %s", code, serr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	f := rep.Figures
	if f.Requests.Total != 5 || f.Warm.Entries != 1 || f.Warm.Read != 1400 || f.Spend.FromPi != 5 || f.Cycles.Count != 4 {
		t.Fatalf("report: requests %+v warm %+v spend from pi %d cycles %+v", f.Requests, f.Warm, f.Spend.FromPi, f.Cycles)
	}
	if w := f.Warm.Spend.Total; w < 0.000109 || w > 0.000111 {
		t.Fatalf("warm spend %v", w)
	}
	for _, r := range rep.Requests {
		if r.CacheWrite1h != 100 || r.Reasoning != 20 {
			t.Fatalf("request %s: cacheWrite1h %d reasoning %d", r.EntryID, r.CacheWrite1h, r.Reasoning)
		}
	}
}
