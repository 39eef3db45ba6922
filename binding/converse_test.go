package binding

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Converse bodies (converse.go) go through the same parser, decision,
// rewrite and accept as Messages bodies. The builders mirror pi 1.6's
// bedrock-converse-stream payload: system and tools each end with a
// cachePoint, and the last user message gets one appended every request.

func cu(text string) string {
	return `{"role":"user","content":[{"text":` + q(text) + `}]}`
}

// cuCached is cu with pi's trailing cachePoint (the last user message).
func cuCached(text string) string {
	return `{"role":"user","content":[{"text":` + q(text) + `},{"cachePoint":{"type":"default"}}]}`
}
func ca(blocks ...string) string {
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}
func crt(sig string) string {
	return `{"reasoningContent":{"reasoningText":{"text":"think ` + sig + `","signature":` + q(sig) + `}}}`
}
func crd(data string) string { return `{"reasoningContent":{"redactedContent":` + q(data) + `}}` }
func ctx(text string) string { return `{"text":` + q(text) + `}` }
func ctu(id string) string {
	return `{"toolUse":{"toolUseId":` + q(id) + `,"name":"read","input":{"path":"a.go"}}}`
}
func ctr(id, text string) string {
	return `{"role":"user","content":[{"toolResult":{"toolUseId":` + q(id) + `,"content":[{"text":` + q(text) + `}],"status":"success"}}]}`
}

const cpoint = `{"cachePoint":{"type":"default"}}`

const bedrockOpus55 = "us.anthropic.claude-opus-5-5"

// cbody is pi's Converse payload: modelId first, system and tools with their
// cachePoint, toolChoice, inferenceConfig and pi's block_binding.
func cbody(model, system, choice string, msgs []string) []byte {
	return []byte(`{"modelId":` + q(model) + `,"messages":[` + strings.Join(msgs, ",") + `],` +
		`"system":[{"text":` + q(system) + `},` + cpoint + `],` +
		`"inferenceConfig":{"maxTokens":128000},` +
		`"toolConfig":{"tools":[{"toolSpec":{"name":"read","description":"Read a file","inputSchema":{"json":{"type":"object","properties":{"path":{"type":"string"}}}}}},` + cpoint + `],"toolChoice":{"` + choice + `":{}}},` +
		`"additionalModelRequestFields":{"thinking":{"type":"adaptive","display":"summarized","block_binding":{"prefix_mismatch_behavior":"drop_block"}},"output_config":{"effort":"high"},"anthropic_beta":["thinking-binding-controls-2026-08-01"]}}`)
}

// withCache puts pi's trailing cachePoint on the last message (a user one).
func withCache(msgs []string) []string {
	out := append([]string(nil), msgs...)
	last := out[len(out)-1]
	out[len(out)-1] = strings.TrimSuffix(last, "]}") + "," + cpoint + "]}"
	return out
}

func (s *sim) cround(system string, msgs []string, reply string) *Compiled {
	s.t.Helper()
	c, sent := s.compile(cbody(bedrockOpus55, system, "auto", withCache(msgs)))
	s.mint(sent, reply)
	if _, err := s.accept(c.ID, reply); err != nil {
		s.t.Fatal(err)
	}
	return c
}

func TestConverseParsed(t *testing.T) {
	b := cbody(bedrockOpus55, "sys", "auto", []string{cu("read a.go"), ca(crt("S1"), ctu("t1")), ctr("t1", "package a"), ca(crd("UkVE"), ctx("done")), cuCached("next")})
	r, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Bound || !r.Converse || r.NotMessages != "" || r.Model != bedrockOpus55 || len(r.Messages) != 5 {
		t.Fatalf("bound %v converse %v why %q model %q messages %d", r.Bound, r.Converse, r.NotMessages, r.Model, len(r.Messages))
	}
	kinds := func(m Message) (out []BlockKind) {
		for _, b := range m.Blocks {
			out = append(out, b.Kind)
		}
		return out
	}
	want := [][]BlockKind{{KindOther}, {KindThinking, KindOther}, {KindOther}, {KindRedacted, KindOther}, {KindOther, KindMarker}}
	for i, m := range r.Messages {
		if got := kinds(m); !equalKinds(got, want[i]) {
			t.Fatalf("message %d kinds %v, want %v", i, got, want[i])
		}
	}
	if th := r.Messages[1].Blocks[0]; !th.Signed || th.Key != key("S1") {
		t.Fatalf("reasoningText not keyed by its signature: %+v", th)
	}
	if rd := r.Messages[3].Blocks[0]; !rd.Signed || rd.Key != key("UkVE") {
		t.Fatalf("redactedContent not keyed by its base64 text: %+v", rd)
	}
	// A marker is not stepped: the last message's chain is as without it.
	r2, _ := ParseRequest(cbody(bedrockOpus55, "sys", "auto", []string{cu("read a.go"), ca(crt("S1"), ctu("t1")), ctr("t1", "package a"), ca(crd("UkVE"), ctx("done")), cu("next")}))
	if r.Messages[4].End != r2.Messages[4].End || r.Seed != r2.Seed {
		t.Fatal("a cachePoint block changed the chain")
	}
	// toolChoice is outside the seed; a tool's description is in it.
	r3, _ := ParseRequest(cbody(bedrockOpus55, "sys", "any", []string{cu("x")}))
	r4, _ := ParseRequest(cbody(bedrockOpus55, "sys", "auto", []string{cu("x")}))
	r5, _ := ParseRequest([]byte(strings.Replace(string(cbody(bedrockOpus55, "sys", "auto", []string{cu("x")})), "Read a file", "Read one file", 1)))
	if r3.Seed != r4.Seed || r4.Seed == r5.Seed {
		t.Fatal("toolChoice in the seed, or a tool description not")
	}
}

func equalKinds(a, b []BlockKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The read does not depend on member order: a body whose Converse members
// come after its messages is read again as Converse and gives the same
// digests; one whose members come first is read once.
func TestConverseMemberOrder(t *testing.T) {
	msgs := `[{"role":"user","content":[{"text":"q"}]},{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t","signature":"S"}}},{"text":"a"}]}]`
	first := `{"modelId":"m","system":[{"text":"s"}],"messages":` + msgs + `,"toolConfig":{"tools":[{"toolSpec":{"name":"x"}}]}}`
	late := `{"system":[{"text":"s"}],"messages":` + msgs + `,"toolConfig":{"toolChoice":{"auto":{}},"tools":[{"toolSpec":{"name":"x"}},{"cachePoint":{"type":"default"}}]},"modelId":"m"}`
	a, err := ParseRequest([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseRequest([]byte(late))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Converse || !b.Converse || a.Seed != b.Seed || a.Messages[1].End != b.Messages[1].End || b.Messages[1].Blocks[0].Kind != KindThinking {
		t.Fatalf("member order changed the read: %v %v", a.Converse, b.Converse)
	}
	// A Messages body and a Converse body never share a seed.
	m, _ := ParseRequest([]byte(`{"messages":[]}`))
	c, _ := ParseRequest([]byte(`{"modelId":"m","messages":[]}`))
	if m.Seed == c.Seed {
		t.Fatal("a Converse seed equals a Messages seed")
	}
}

func TestConversePureAppendAndMovingCachePoint(t *testing.T) {
	s := newSim(t)
	h := []string{cu("read a.go")}
	r1 := ca(crt("S1"), ctu("t1"))
	s.cround("sys", h, r1)
	h = append(h, r1, ctr("t1", "package a"))
	r2 := ca(crt("S2"), ctx("a2"))
	c := s.cround("sys", h, r2) // the cachePoint moved from message 0 to message 2
	expectStrips(t, c)
	h = append(h, r2, cu("u3"))
	// toolChoice changed too: outside the prefix.
	c, sent := s.compile(cbody(bedrockOpus55, "sys", "any", withCache(h)))
	expectStrips(t, c)
	if len(c.Kept) != 2 || c.Kept[0] != key("S1") || c.Kept[1] != key("S2") {
		t.Fatalf("kept %v", c.Kept)
	}
	if string(sent) != string(cbody(bedrockOpus55, "sys", "any", withCache(h))) {
		t.Fatal("nothing stripped, yet the bytes changed")
	}
}

// A pruner rewrites an old tool result: the blocks after it are stripped
// (and released), the block before it kept; the bytes sent are the host's
// with exactly those blocks cut, and the provider (the sim's judge, over
// the Converse digests) accepts every block sent.
func TestConversePrunerRewrite(t *testing.T) {
	s := newSim(t)
	h := []string{cu("read a.go")}
	r1 := ca(crt("S1"), ctu("t1"))
	s.cround("sys", h, r1)
	h = append(h, r1, ctr("t1", "package a // a long file"))
	r2 := ca(crt("S2"), ctu("t2"))
	s.cround("sys", h, r2)
	h = append(h, r2, ctr("t2", "package b"))
	r3 := ca(crt("S3"), ctx("done"))
	s.cround("sys", h, r3)
	h = append(h, r3, cu("u4"))

	pruned := append([]string(nil), h...)
	pruned[2] = ctr("t1", "[pruned]")
	in := cbody(bedrockOpus55, "sys", "auto", withCache(pruned))
	c, sent := s.compile(in)
	expectStrips(t, c, "messages.3.content.0 prefix-changed", "messages.5.content.0 prefix-changed")
	if len(c.Dropped) != 0 {
		t.Fatalf("dropped %v", c.Dropped)
	}
	want := strings.Replace(string(in), crt("S2")+",", "", 1)
	want = strings.Replace(want, crt("S3")+",", "", 1)
	if string(sent) != want {
		t.Fatalf("rewrite is not the host's bytes minus the stripped blocks:\n got %s\nwant %s", sent, want)
	}
	// Accepted: the strips are releases; the next request keeps S1 and
	// the reply's block, strips nothing new.
	r4 := ca(crt("S4"), ctx("a4"))
	s.mint(sent, r4)
	out, err := s.accept(c.ID, r4)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Releases) != 2 || len(out.Stamps) != 1 || out.Stamps[0].Key != key("S4") {
		t.Fatalf("releases %v stamps %v", out.Releases, out.Stamps)
	}
	h2 := append(pruned, r4, cu("u5"))
	c, _ = s.compile(cbody(bedrockOpus55, "sys", "auto", withCache(h2)))
	expectStrips(t, c, "messages.3.content.0 released", "messages.5.content.0 released")
	if len(c.Kept) != 2 || c.Kept[0] != key("S1") || c.Kept[1] != key("S4") {
		t.Fatalf("kept %v", c.Kept)
	}
}

func TestConverseSystemChangedForOneTurn(t *testing.T) {
	s := newSim(t)
	h := []string{cu("u1")}
	r1 := ca(crt("S1"), ctx("a1"))
	s.cround("sys", h, r1)
	h = append(h, r1, cu("u2"))
	c, _ := s.compile(cbody(bedrockOpus55, "sys + heartbeat", "auto", withCache(h)))
	expectStrips(t, c, "messages.1.content.0 seed-changed")
	c, _ = s.compile(cbody(bedrockOpus55, "sys", "auto", withCache(h)))
	expectStrips(t, c)
}

// A message the strip leaves holding only a cachePoint is empty: it is
// dropped, marker and all. Markers are never stripped.
func TestConverseMessageOfMarkersDropped(t *testing.T) {
	s := newSim(t)
	h := []string{cu("u1")}
	r1 := ca(crt("S1"), ctx("a1"))
	s.cround("sys", h, r1)
	// A block bindery never saw minted, alone with a marker in its message.
	h = append(h, r1, cu("u2"), ca(crt("X9"), cpoint), cu("u3"))
	in := cbody(bedrockOpus55, "sys", "auto", h)
	c, sent := s.compile(in)
	expectStrips(t, c, "messages.3.content.0 no-stamp")
	if len(c.Dropped) != 1 || c.Dropped[0] != 3 {
		t.Fatalf("dropped %v", c.Dropped)
	}
	want := strings.Replace(string(in), ","+ca(crt("X9"), cpoint), "", 1)
	if string(sent) != want {
		t.Fatalf("\n got %s\nwant %s", sent, want)
	}
}

// Positions as sent count no cachePoint (the provider's own request has
// none: converse.go): an input_transformation naming the block after a
// marker finds it, and a refusal's path releases it.
func TestConverseSentPositionsSkipMarkers(t *testing.T) {
	s := newSim(t)
	h := []string{cu("u1")}
	r1 := ca(crt("S1"), ctu("t1"), cpoint, crt("S2"), ctx("a1"))
	c1, sent := s.compile(cbody(bedrockOpus55, "sys", "auto", withCache(h)))
	s.mint(sent, r1)
	if _, err := s.accept(c1.ID, r1); err != nil {
		t.Fatal(err)
	}
	h = append(h, r1, cu("u2"))
	c, _ := s.compile(cbody(bedrockOpus55, "sys", "auto", withCache(h)))
	expectStrips(t, c)
	rec := s.recs[c.ID]
	kb, ok := rec.ThinkingAt(Pos{1, 2})
	if !ok || kb.Key != key("S2") || kb.Orig != (Pos{1, 3}) {
		t.Fatalf("sent messages.1.content.2 is %+v %v, want S2 at messages.1.content.3", kb, ok)
	}
	out, err := s.accept(c.ID, ca(ctx("a2")), InputTransformation{Type: TransformDropped, Path: "messages.1.content.2", Reason: ReasonPrefixMismatch})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Releases) != 1 || out.Releases[0].Key != key("S2") || out.Releases[0].Path != "messages.1.content.3" {
		t.Fatalf("releases %+v", out.Releases)
	}
}

// A reply in Converse shape (the message, or a whole Converse response)
// digests as the same blocks do when a request replays them.
func TestConverseReply(t *testing.T) {
	msg := ca(crt("S1"), ctx("hello"), ctu("t1"))
	full := `{"output":{"message":` + msg + `},"stopReason":"tool_use","usage":{"inputTokens":1},"additionalModelResponseFields":{"input_transformations":[]}}`
	req, err := ParseRequest(cbody(bedrockOpus55, "s", "auto", []string{cu("q"), msg}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{msg, full} {
		m, err := ParseReply([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		want := req.Messages[1]
		if m.Frame != want.Frame || len(m.Blocks) != 3 || m.Blocks[0].Kind != KindThinking || m.Blocks[0].Key != key("S1") ||
			m.Blocks[1].Digest != want.Blocks[1].Digest || m.Blocks[2].Digest != want.Blocks[2].Digest {
			t.Fatalf("reply %s does not digest as its replay", r)
		}
	}
	for _, bad := range []string{
		`{"output":{"message":{"role":"user","content":[{"text":"x"}]}}}`,
		`{"output":{"message":{"role":"assistant","content":[{"text":"x","toolUse":{}}]}}}`,
	} {
		if _, err := ParseReply([]byte(bad)); err == nil {
			t.Fatalf("%s: no error", bad)
		}
	}
}

func TestInputTransformationsOf(t *testing.T) {
	entry := `[{"type":"thinking_dropped","path":"messages.1.content.0","reason":"prefix_binding_mismatch"}]`
	for _, tc := range []struct {
		name, resp string
		ok         bool
	}{
		{"messages response", `{"type":"message","input_transformations":` + entry + `}`, true},
		{"message_start", `{"type":"message_start","message":{"input_transformations":` + entry + `}}`, true},
		{"converse response", `{"output":{"message":{}},"additionalModelResponseFields":{"input_transformations":` + entry + `}}`, true},
		{"messageStop event", `{"stopReason":"end_turn","additionalModelResponseFields":{"input_transformations":` + entry + `}}`, true},
		{"wrapped messageStop event", `{"messageStop":{"stopReason":"end_turn","additionalModelResponseFields":{"input_transformations":` + entry + `}}}`, true},
		{"none (no beta)", `{"output":{"message":{}},"additionalModelResponseFields":{"stop_sequence":null}}`, false},
	} {
		trs, ok, err := InputTransformationsOf([]byte(tc.resp))
		if err != nil || ok != tc.ok || (ok && (len(trs) != 1 || trs[0].Reason != ReasonPrefixMismatch)) {
			t.Fatalf("%s: %v %v %v", tc.name, trs, ok, err)
		}
	}
	if _, _, err := InputTransformationsOf([]byte(`{"additionalModelResponseFields":{"input_transformations":"x"}}`)); err == nil {
		t.Fatal("a malformed entry list: no error")
	}
}

// Every Claude model pi 1.6's Bedrock catalog lists (testdata, copied from
// @earendil-works/pi-ai 1.6.0 providers/data/amazon-bedrock.json), with its
// cross-region prefixes, and the ARNs of a foundation model and of a
// system-defined inference profile, resolve to the row of the Claude API id.
func TestBedrockModelIDs(t *testing.T) {
	f, err := os.Open("testdata/bedrock-claude-ids.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab := DefaultModelTable()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id := strings.TrimSpace(sc.Text())
		if id == "" || strings.HasPrefix(id, "#") {
			continue
		}
		n++
		norm := NormalizeModel(id)
		if strings.ContainsAny(norm, ".:/") || !strings.HasPrefix(norm, "claude-") {
			t.Errorf("%s normalizes to %q", id, norm)
		}
		if !tab.Known(id) {
			t.Errorf("%s (%s) is not in the model table", id, norm)
		}
		if tab.Binds(id) != tab.Binds(norm) || !tab.Reads(id, norm) || !tab.Reads(norm, id) {
			t.Errorf("%s and %s are not the same row", id, norm)
		}
		if onClaudeAPI(id) {
			t.Errorf("%s is taken for the Claude API", id)
		}
	}
	if n != 86 {
		t.Fatalf("%d ids, want pi 1.6's 86", n)
	}
	for id, want := range map[string]string{
		"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-4-5-20251101-v1:0":                  "claude-opus-4-5",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-fable-5-1":               "claude-fable-5-1",
		"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/global.anthropic.claude-sonnet-5-5":          "claude-sonnet-5-5",
		"arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:inference-profile/us-gov.anthropic.claude-opus-5-5": "claude-opus-5-5",
		"apac.anthropic.claude-sonnet-4-20250514-v1:0":                                                         "claude-sonnet-4",
	} {
		if got := NormalizeModel(id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
		if !tab.Known(id) {
			t.Errorf("%s unknown", id)
		}
	}
	// An application inference profile names no model: unknown, so it binds.
	app := "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5"
	if tab.Known(app) || !tab.Binds(app) {
		t.Fatalf("%s: known %v binds %v", app, tab.Known(app), tab.Binds(app))
	}
	// Fable 5.1 reads Opus 5.5 on the Claude API only: not on Bedrock.
	if tab.Reads("us.anthropic.claude-fable-5-1", "claude-opus-5-5") || !tab.Reads("claude-fable-5-1", "us.anthropic.claude-opus-5-5") {
		t.Fatal("the Claude-API-only read holds on Bedrock, or not on the Claude API")
	}
}

// converseAndMessages builds the same conversation twice, as a Converse body
// (pi's Bedrock shape) and as a Messages body: n tool rounds, each a
// reasoning block, a tool call and a ~2 KB tool result.
func converseAndMessages(n int) (conv, msgs []byte) {
	out := strings.Repeat("package a // some file content with \"quotes\" and\ttabs\n", 40)
	var c, m []string
	c, m = append(c, cu("start")), append(m, u("start"))
	for i := range n {
		id, sig := fmt.Sprintf("t%d", i), fmt.Sprintf("SIG%06d", i)
		c = append(c, ca(crt(sig), ctu(id)), ctr(id, out))
		m = append(m, a(th(sig), tu(id)), tr(id, out))
	}
	return cbody(bedrockOpus55, "sys", "auto", withCache(c)), body(opus55, "sys", m)
}

// BenchmarkParseConverse compares reading a Converse body with reading the
// same conversation as Messages, and with json.Valid over the Converse
// bytes, in the same run (go test -bench ParseConverse ./binding).
func BenchmarkParseConverse(b *testing.B) {
	conv, msgs := converseAndMessages(250)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(conv)))
		loopCPU(b, func() {
			if !json.Valid(conv) {
				b.Fatal("invalid")
			}
		})
	})
	for _, tc := range []struct {
		name string
		body []byte
	}{{"Messages", msgs}, {"Converse", conv}} {
		for _, memo := range []bool{false, true} {
			name := tc.name
			if memo {
				// The steady state: every message but the new ones seen before.
				name += "+memo"
			}
			b.Run(name, func(b *testing.B) {
				var p Parser
				if memo {
					p.Memo = &Memo{}
					if _, err := p.Parse(tc.body); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(len(tc.body)))
				b.ReportAllocs()
				loopCPU(b, func() {
					if r, err := p.Parse(tc.body); err != nil || !r.Bound {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// A ConverseStream response's events assemble into the reply a request
// replays (the same digests), and carry the drops on messageStop.
func TestConverseStreamReply(t *testing.T) {
	events := `[{"messageStart":{"role":"assistant"}},
		{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"think "}}}},
		{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"S1"}}}},
		{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"S"}}}},
		{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"1"}}}},
		{"contentBlockStop":{"contentBlockIndex":0}},
		{"contentBlockDelta":{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":"AQI="}}}},
		{"contentBlockDelta":{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":"Aw=="}}}},
		{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"text":"hel"}}},
		{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"text":"lo"}}},
		{"contentBlockStart":{"contentBlockIndex":3,"start":{"toolUse":{"toolUseId":"t1","name":"read"}}}},
		{"contentBlockDelta":{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{\"path\":"}}}},
		{"contentBlockDelta":{"contentBlockIndex":3,"delta":{"toolUse":{"input":"\"a.go\"}"}}}},
		{"contentBlockStart":{"contentBlockIndex":4,"start":{"toolUse":{"toolUseId":"t2","name":"ls"}}}},
		{"messageStop":{"stopReason":"tool_use","additionalModelResponseFields":{"input_transformations":[{"type":"thinking_dropped","path":"messages.1.content.0","reason":"prefix_binding_mismatch"}]}}},
		{"metadata":{"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}}]`
	m, err := ParseReply([]byte(events))
	if err != nil {
		t.Fatal(err)
	}
	replay := ca(crt("S1"), crd("AQID"), ctx("hello"), ctu("t1"), `{"toolUse":{"toolUseId":"t2","name":"ls","input":{}}}`)
	req, err := ParseRequest(cbody(bedrockOpus55, "s", "auto", []string{cu("q"), replay}))
	if err != nil {
		t.Fatal(err)
	}
	want := req.Messages[1]
	if len(m.Blocks) != len(want.Blocks) || m.Frame != want.Frame {
		t.Fatalf("%d blocks, want %d", len(m.Blocks), len(want.Blocks))
	}
	for j := range m.Blocks {
		g, w := m.Blocks[j], want.Blocks[j]
		if g.Kind != w.Kind || g.Key != w.Key || g.Digest != w.Digest {
			t.Fatalf("block %d: %+v, want %+v", j, g, w)
		}
	}
	trs, ok, err := InputTransformationsOf([]byte(events))
	if err != nil || !ok || len(trs) != 1 || trs[0].Path != "messages.1.content.0" {
		t.Fatalf("%v %v %v", trs, ok, err)
	}
	for _, bad := range []string{
		`[{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"text":"a"}}},{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"b"}}}}]`,
		`[{"contentBlockStart":{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t","name":"n"}}}},{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{"}}}}]`,
		`[{"contentBlockDelta":{"contentBlockIndex":-1,"delta":{"text":"a"}}}]`,
		`[{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"not base64!"}}}}]`,
	} {
		if _, err := ParseReply([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// The Memo serves Converse reads too, and never serves one shape's read of
// some bytes to the other: the same message is other blocks in each.
func TestConverseMemo(t *testing.T) {
	msg := `{"role":"assistant","content":[{"type":"thinking"},{"type":"text","text":"long enough to be remembered by the memo"}]}`
	bodies := [][]byte{
		[]byte(`{"model":"m","messages":[` + msg + `]}`),
		[]byte(`{"modelId":"m","messages":[` + msg + `]}`),
		[]byte(`{"model":"m","messages":[` + msg + `]}`),
		cbody(bedrockOpus55, "s", "auto", []string{cu("q"), ca(crt("S1"), ctu("t1")), ctr("t1", strings.Repeat("x", 100)), cuCached("next")}),
		cbody(bedrockOpus55, "s", "auto", []string{cu("q"), ca(crt("S1"), ctu("t1")), ctr("t1", strings.Repeat("x", 100)), cu("next"), ca(crt("S2"), ctx("a")), cuCached("more")}),
	}
	memo := &Memo{}
	p := Parser{Memo: memo}
	for i, b := range bodies {
		got, err := p.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ParseRequest(b)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("body %d: the memo's read differs from a fresh one", i)
		}
	}
	r1, _ := ParseRequest(bodies[0])
	r2, _ := ParseRequest(bodies[1])
	if r1.Messages[0].Blocks[0].Kind != KindThinking || r2.Messages[0].Blocks[0].Kind != KindOther {
		t.Fatal("the two shapes read the message alike: the test shows nothing")
	}
	if hits, _ := memo.Stats(); hits < 3 {
		t.Fatalf("%d memo hits: Converse messages are not remembered", hits)
	}
}
