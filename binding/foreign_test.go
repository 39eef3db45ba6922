package binding

import (
	"os"
	"strings"
	"testing"
)

// The Messages-body rule (foreign.go): OpenAI chat bodies as pi builds them
// are not bound; Messages bodies, pi 1.6's included (mid-conversation system
// messages carrying output_config), and Converse bodies (converse.go) are.
// A body that reads as neither passes through with the reason.
func TestNotMessagesBodies(t *testing.T) {
	file := func(name string) string {
		b, err := os.ReadFile("testdata/foreign/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cases := []struct {
		name, body, why string // why "": a Messages body
	}{
		{"bedrock converse (pi's bedrock-converse-stream): compiled", file("converse.json"), ""},
		{"openai chat with tool calls (pi's openai-completions)", file("openai-chat.json"), "a message whose content is neither a string nor an array"},
		{"openai chat, text only", file("openai-chat-plain.json"), "an OpenAI chat member (stream_options)"},
		{"pi 1.6's own bedrock converse payload: compiled", file("pi16-bedrock-converse.json"), ""},
		{"pi 1.6's own openrouter openai chat payload", file("pi16-openrouter-openai-chat.json"), "a message whose content is neither a string nor an array"},
		{"pi 1.6's own anthropic messages payload", file("pi16-anthropic-messages.json"), ""},
		{"converse member after messages: read again as converse", `{"messages":[{"role":"user","content":"hi"}],"inferenceConfig":{"maxTokens":1}}`, "a Converse message whose content is not an array"},
		{"converse member after messages and system", `{"system":[{"text":"s"}],"messages":[{"role":"user","content":[{"text":"hi"}]}],"modelId":"m"}`, ""},
		{"converse with a system role", `{"modelId":"m","messages":[{"role":"system","content":[{"text":"hi"}]}]}`, "a Converse message whose role is not user or assistant"},
		{"converse block of two members", `{"modelId":"m","messages":[{"role":"user","content":[{"text":"hi","image":{}}]}]}`, "a Converse content block with more than one member"},
		{"converse block of no member", `{"modelId":"m","messages":[{"role":"user","content":[{}]}]}`, "a Converse content block without a member"},
		{"converse with an openai member", `{"modelId":"m","stream_options":{},"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "an OpenAI chat member (stream_options)"},
		{"converse typed block", `{"modelId":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, "a Converse content block with more than one member"},
		{"converse blocks without the other members: read as converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, ""},
		{"block that is not an object", `{"messages":[{"role":"user","content":["hi"]}]}`, "a Converse content block that is not an object"},
		{"untyped block beside an openai member", `{"model":"m","messages":[{"role":"user","content":[{"text":"hi"}]}],"logprobs":true}`, "an OpenAI chat member (logprobs)"},
		{"openai tool role", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`, "a message whose role is not user, assistant or system"},
		{"openai developer role", `{"model":"m","messages":[{"role":"developer","content":"x"}]}`, "a message whose role is not user, assistant or system"},
		{"openai message member", `{"model":"m","messages":[{"role":"assistant","content":"x","refusal":null}]}`, "a message member only OpenAI chat messages have"},
		{"message without content", `{"model":"m","messages":[{"role":"user"}]}`, "a message whose content is neither a string nor an array"},
		{"message not an object", `{"model":"m","messages":[1]}`, "a message that is not an object"},

		{"messages", `{"model":"claude-opus-5-5","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"cw=="},{"type":"text","text":"b"}]}]}`, ""},
		{"pi 1.6 effort system messages", `{"model":"claude-opus-5-5","max_tokens":1,"output_config":{"effort":"high"},"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}},` +
			`"messages":[{"role":"user","content":"hi"},{"role":"system","content":[],"output_config":{"effort":"high"}},{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"cw=="},{"type":"text","text":"b"}]},` +
			`{"role":"user","content":[{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}]},{"role":"system","content":[{"type":"text","text":"now"},{"type":"tool_addition","tool":{"type":"tool_reference","name":"x"}}],"output_config":{"effort":"low"}}]}`, ""},
		{"an unknown Messages member keeps it a Messages body", `{"model":"m","thread":{"type":"continue","previous_message_id":"msg_1"},"messages":[{"role":"user","content":"hi","clear_at":"next_user_message"}]}`, ""},
		{"no messages", `{"model":"m","modelId":"x"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, memo := range []bool{false, true} {
				p := Parser{}
				if memo {
					p.Memo = &Memo{}
				}
				for round := 0; round < 2; round++ { // the second parse of a memo may hit
					r, err := p.Parse([]byte(tc.body))
					if err != nil {
						t.Fatal(err)
					}
					hasMessages := strings.Contains(tc.body, `"messages"`)
					if r.NotMessages != tc.why || r.Bound != (hasMessages && tc.why == "") {
						t.Fatalf("memo %v round %d: Bound %v NotMessages %q, want %q", memo, round, r.Bound, r.NotMessages, tc.why)
					}
				}
			}
		})
	}
}

// The rule is about requests: a reply with an untyped block parses as it
// did before the rule (the block is an ordinary one).
func TestParseReplyIgnoresTheRule(t *testing.T) {
	m, err := ParseReply([]byte(`{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"cw=="},{"text":"untyped"}]}`))
	if err != nil || len(m.Blocks) != 2 || m.Blocks[0].Kind != KindThinking || !m.Blocks[0].Signed {
		t.Fatalf("%+v %v", m, err)
	}
}
