package binding

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The golden vectors pin the canonical encoding, the framing and the chain
// forever: stamps are durable, so a digest computed today must be computed
// identically by every later build. If any vector in
// testdata/canon/vectors.json changes, FramingVersion MUST be bumped (and the
// vectors regenerated with `go test ./binding -run TestGoldenVectors
// -update`), so that new digests can never match stamps recorded under the
// old encoding.
var update = flag.Bool("update", false, "rewrite testdata/canon/vectors.json")

type goldenInput struct {
	name string
	body string
	// Relations the vector must satisfy with earlier vectors.
	sameChain, otherChain []string
	sameSeed, otherSeed   []string
}

var goldenInputs = []goldenInput{
	{name: "basic", body: `{"model":"claude-opus-5-5","system":"Be brief.","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"text","text":"Hello."}]}]}`},
	{name: "basic_reordered_whitespace", body: "{ \"messages\" : [ { \"content\" : \"Hi\" , \"role\" : \"user\" } ,\n\t{ \"content\" : [ { \"text\" : \"Hello.\" , \"type\" : \"text\" } ] , \"role\" : \"assistant\" } ] ,\r\n \"system\" : \"Be brief.\" , \"model\" : \"claude-opus-5-5\" }",
		sameChain: []string{"basic"}, sameSeed: []string{"basic"}},
	{name: "basic_u_escapes", body: `{"model":"claude-opus-5-5","system":"Be brief\u002E","messages":[{"role":"us\u0065r","content":"\u0048i"},{"role":"assistant","content":[{"type":"text","text":"Hello\u002e"}]}]}`,
		sameChain: []string{"basic"}, sameSeed: []string{"basic"}},
	{name: "whitespace_inside_string", body: `{"model":"claude-opus-5-5","system":"Be brief. ","messages":[{"role":"user","content":"Hi "},{"role":"assistant","content":[{"type":"text","text":"Hello."}]}]}`,
		otherChain: []string{"basic"}, otherSeed: []string{"basic"}},
	{name: "string_content_vs_one_text_block", body: `{"model":"claude-opus-5-5","system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":[{"type":"text","text":"Hello."}]}]}`,
		otherChain: []string{"basic"}, sameSeed: []string{"basic"}},
	{name: "numbers", body: `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{"a":1,"b":1.0,"c":1e2,"d":-0.5E-3,"e":100}}]}]}`},
	{name: "numbers_1_as_1.0", body: `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{"a":1.0,"b":1.0,"c":1e2,"d":-0.5E-3,"e":100}}]}]}`,
		otherChain: []string{"numbers"}},
	{name: "numbers_1e2_as_100", body: `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"n","input":{"a":1,"b":1.0,"c":100,"d":-0.5E-3,"e":100}}]}]}`,
		otherChain: []string{"numbers", "numbers_1_as_1.0"}},
	{name: "cache_control_markers", body: `{"cache_control":{"type":"ephemeral"},"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"t","input_schema":{"type":"object","properties":{"cache_control":{"type":"string"}}},"cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"T","cache_control":{"type":"ephemeral"}},{"type":"tool_result","tool_use_id":"t0","content":[{"type":"text","text":"R","cache_control":{"type":"ephemeral"}}],"cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"t","input":{"cache_control":"data"}}]}]}`},
	{name: "cache_control_markers_removed", body: `{"system":[{"type":"text","text":"S"}],` +
		`"tools":[{"name":"t","input_schema":{"type":"object","properties":{"cache_control":{"type":"string"}}}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"T"},{"type":"tool_result","tool_use_id":"t0","content":[{"type":"text","text":"R"}]}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"t","input":{"cache_control":"data"}}]}]}`,
		sameChain: []string{"cache_control_markers"}, sameSeed: []string{"cache_control_markers"}},
	// Two levels below a content block, cache_control is data again.
	{name: "cache_control_deep_is_data", body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"R","cache_control":{"type":"ephemeral"}}]}]}]}]}`},
	{name: "cache_control_deep_removed", body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t0","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"R"}]}]}]}]}`,
		otherChain: []string{"cache_control_deep_is_data"}},
	{name: "cache_control_data_removed", body: `{"system":[{"type":"text","text":"S"}],` +
		`"tools":[{"name":"t","input_schema":{"type":"object","properties":{}}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"T"},{"type":"tool_result","tool_use_id":"t0","content":[{"type":"text","text":"R"}]}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"t","input":{}}]}]}`,
		otherChain: []string{"cache_control_markers"}, otherSeed: []string{"cache_control_markers"}},
	{name: "unicode_line_separators_and_non_bmp_keys", body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"a\u2028b\u2029c <&> \/"},` +
		`{"type":"tool_use","id":"u","name":"k","input":{"😀":1,"｡":2,"\ud83d\ude01":3,"é":4,"z":5,"\u0000":6,"lone":"\udc00\ud800x"}}]}]}`},
	{name: "thinking_outside_chain", body: `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"U0lHMQ=="},{"type":"text","text":"A"},{"type":"redacted_thinking","data":"UkVE"},{"type":"tool_use","id":"t","name":"x","input":{}}]}]}`},
	{name: "thinking_removed", body: `{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"tool_use","id":"t","name":"x","input":{}}]}]}`,
		sameChain: []string{"thinking_outside_chain"}},
	{name: "compaction_restart", body: `{"messages":[{"role":"user","content":"old history"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"compaction","content":"summary","signature":"Q09NUA=="},{"type":"text","text":"after"}]},{"role":"user","content":"next"}]}`},
	{name: "compaction_other_history", body: `{"messages":[{"role":"user","content":"different"},{"role":"user","content":"history"},{"role":"assistant","content":[{"type":"compaction","content":"summary","signature":"Q09NUA=="},{"type":"text","text":"after"}]},{"role":"user","content":"next"}]}`,
		sameChain: []string{"compaction_restart"}},
	{name: "deferred_tools", body: `{"system":"S","tools":[{"name":"a","input_schema":{}},{"name":"later","defer_loading":true,"input_schema":{"type":"object"}}],"messages":[]}`},
	{name: "deferred_tools_absent", body: `{"system":"S","tools":[{"name":"a","input_schema":{}}],"messages":[]}`,
		sameSeed: []string{"deferred_tools"}},
	{name: "message_fields", body: `{"messages":[{"role":"user","content":[],"clear_at":2,"output_config":{"effort":"low"},"x-unknown":null},{"role":"system","content":"turn-scoped"}]}`},

	// Bedrock Converse (converse.go): the same framing and chain over the
	// Converse values; cachePoint blocks are markers; the seed is
	// system + toolConfig.tools under its own kind.
	{name: "converse_basic", body: `{"modelId":"us.anthropic.claude-opus-5-5","system":[{"text":"S"},{"cachePoint":{"type":"default"}}],` +
		`"toolConfig":{"tools":[{"toolSpec":{"name":"read","inputSchema":{"json":{"type":"object"}}}},{"cachePoint":{"type":"default"}}],"toolChoice":{"auto":{}}},` +
		`"messages":[{"role":"user","content":[{"text":"Q"}]},` +
		`{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hmm","signature":"U0lHMQ=="}}},{"toolUse":{"toolUseId":"t1","name":"read","input":{"path":"a.go","n":1.0}}},{"reasoningContent":{"redactedContent":"UkVE"}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"R"},{"json":{"cache_control":"data"}}],"status":"success"}},{"cachePoint":{"type":"default"}}]}],` +
		`"inferenceConfig":{"maxTokens":1024},"additionalModelRequestFields":{"thinking":{"type":"adaptive"}}}`},
	{name: "converse_reordered_markers_moved", body: "{ \"messages\" : [ { \"content\" : [ { \"text\" : \"\\u0051\" }, {\"cachePoint\":{\"type\":\"default\"}} ] , \"role\" : \"user\" } ,\n" +
		`{"content":[{"reasoningContent":{"reasoningText":{"signature":"U0lHMQ==","text":"hmm"}}},{"toolUse":{"input":{"n":1.0,"path":"a.go"},"name":"read","toolUseId":"t1"}},{"reasoningContent":{"redactedContent":"UkVE"}}],"role":"assistant"},` +
		`{"content":[{"toolResult":{"content":[{"text":"R"},{"json":{"cache_control":"data"}}],"status":"success","toolUseId":"t1"}}],"role":"user"}],` +
		`"toolConfig":{"toolChoice":{"any":{}},"tools":[{"cachePoint":{"type":"default"}},{"toolSpec":{"inputSchema":{"json":{"type":"object"}},"name":"read"}}]},"system":[{"text":"S"}],"modelId":"us.anthropic.claude-opus-5-5"}`,
		sameChain: []string{"converse_basic"}, sameSeed: []string{"converse_basic"}},
	{name: "converse_thinking_removed", body: `{"modelId":"m","system":[{"text":"S"}],"toolConfig":{"tools":[{"toolSpec":{"name":"read","inputSchema":{"json":{"type":"object"}}}}]},` +
		`"messages":[{"role":"user","content":[{"text":"Q"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"read","input":{"path":"a.go","n":1.0}}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"R"},{"json":{"cache_control":"data"}}],"status":"success"}}]}]}`,
		sameChain: []string{"converse_basic"}, sameSeed: []string{"converse_basic"}},
	{name: "converse_cache_control_is_data", body: `{"modelId":"m","system":[{"text":"S"}],"toolConfig":{"tools":[{"toolSpec":{"name":"read","inputSchema":{"json":{"type":"object"}}}}]},` +
		`"messages":[{"role":"user","content":[{"text":"Q"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"read","input":{"path":"a.go","n":1.0}}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"R"},{"json":{}}],"status":"success"}}]}]}`,
		otherChain: []string{"converse_basic"}, sameSeed: []string{"converse_basic"}},
	{name: "converse_tool_result_edited", body: `{"modelId":"m","system":[{"text":"S"}],"toolConfig":{"tools":[{"toolSpec":{"name":"read","inputSchema":{"json":{"type":"object"}}}}]},` +
		`"messages":[{"role":"user","content":[{"text":"Q"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"read","input":{"path":"a.go","n":1.0}}}]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"[pruned]"},{"json":{"cache_control":"data"}}],"status":"success"}}]}]}`,
		otherChain: []string{"converse_basic"}, sameSeed: []string{"converse_basic"}},
	{name: "converse_tool_edited", body: `{"modelId":"m","system":[{"text":"S"}],"toolConfig":{"tools":[{"toolSpec":{"name":"read","description":"d","inputSchema":{"json":{"type":"object"}}}}]},"messages":[]}`,
		otherSeed: []string{"converse_basic"}},
	{name: "converse_no_system_no_tools", body: `{"modelId":"m","messages":[]}`},
	{name: "messages_no_system_no_tools", body: `{"model":"m","messages":[]}`,
		otherSeed: []string{"converse_no_system_no_tools"}},
	{name: "converse_string_system_and_empty_tools", body: `{"modelId":"m","system":"S","toolConfig":{"tools":[]},"messages":[]}`,
		otherSeed: []string{"converse_no_system_no_tools", "converse_basic"}},
	{name: "converse_native_fields_outside_the_prefix", body: `{"modelId":"m","additionalModelRequestFields":{"thinking":{"type":"adaptive"},"anthropic_beta":["b"],"output_config":{"effort":"low"}},"messages":[]}`,
		sameSeed: []string{"converse_no_system_no_tools"}},
	{name: "converse_native_tools", body: `{"modelId":"m","additionalModelRequestFields":{"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1024}],"anthropic_beta":["computer-use-2025-01-24"]},"messages":[]}`,
		otherSeed: []string{"converse_no_system_no_tools"}},
	{name: "converse_native_tools_reordered", body: `{"additionalModelRequestFields":{"anthropic_beta":["computer-use-2025-01-24"],"tools":[{"display_width_px":1024,"name":"computer","type":"computer_20250124"}]},"messages":[],"modelId":"m"}`,
		sameSeed: []string{"converse_native_tools"}},
}

type goldenFrame struct {
	Kind      byte   `json:"kind"` // 1 message, 2 block, 3 system, 4 tools
	Canonical string `json:"canonical"`
}

type goldenVector struct {
	Name   string        `json:"name"`
	Body   string        `json:"body"`
	Frames []goldenFrame `json:"frames"`
	Seed   string        `json:"seed"`
	Ends   []string      `json:"ends"`   // chain after each message
	Chains [][]string    `json:"chains"` // chain(b) of each block
}

func computeGolden(t *testing.T, in goldenInput) goldenVector {
	t.Helper()
	v := goldenVector{Name: in.name, Body: in.body, Frames: []goldenFrame{}, Ends: []string{}, Chains: [][]string{}}
	p := Parser{trace: func(kind byte, canon []byte) {
		if kind == 0 {
			v.Frames = v.Frames[:0]
			return
		}
		v.Frames = append(v.Frames, goldenFrame{kind, string(canon)})
	}}
	r, err := p.Parse([]byte(in.body))
	if err != nil {
		t.Fatalf("%s: %v", in.name, err)
	}
	v.Seed = hex.EncodeToString(r.Seed[:])
	for _, m := range r.Messages {
		v.Ends = append(v.Ends, hex.EncodeToString(m.End[:]))
		cs := []string{}
		for _, b := range m.Blocks {
			cs = append(cs, hex.EncodeToString(b.Chain[:]))
		}
		v.Chains = append(v.Chains, cs)
	}
	return v
}

func TestGoldenVectors(t *testing.T) {
	path := filepath.Join("testdata", "canon", "vectors.json")
	var got []goldenVector
	byName := map[string]goldenVector{}
	for _, in := range goldenInputs {
		v := computeGolden(t, in)
		got = append(got, v)
		byName[in.name] = v
		last := func(v goldenVector) string {
			if len(v.Ends) == 0 {
				return ""
			}
			return v.Ends[len(v.Ends)-1]
		}
		for _, o := range in.sameChain {
			if last(v) != last(byName[o]) {
				t.Errorf("%s: chain differs from %s", in.name, o)
			}
		}
		for _, o := range in.otherChain {
			if last(v) == last(byName[o]) {
				t.Errorf("%s: chain equals %s", in.name, o)
			}
		}
		for _, o := range in.sameSeed {
			if v.Seed != byName[o].Seed {
				t.Errorf("%s: seed differs from %s", in.name, o)
			}
		}
		for _, o := range in.otherSeed {
			if v.Seed == byName[o].Seed {
				t.Errorf("%s: seed equals %s", in.name, o)
			}
		}
	}
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []goldenVector
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%d vectors on file, %d computed (bump FramingVersion if the encoding changed)", len(want), len(got))
	}
	for i := range got {
		g, w := got[i], want[i]
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("vector %s changed: the canonical encoding moved; FramingVersion must be bumped\n got %s\nwant %s", w.Name, gj, wj)
		}
	}
}
