package binding

// What counts as another API's body. Hosts reach /v1/compile with the
// bodies of several APIs, all carrying a "messages" array: Anthropic
// Messages, Bedrock Converse (pi's amazon-bedrock route; read by the same
// parser into the same Request, see converse.go) and OpenAI chat (pi's
// OpenRouter batch models). bindery compiles a Messages or a Converse body;
// anything else passes back untouched and unrecorded (Request.Bound false,
// Request.NotMessages the reason). A body is another API's when:
//
//   - a top-level member is one only OpenAI chat completions defines
//     (max_completion_tokens, stream_options, response_format,
//     reasoning_effort, ...);
//   - a message is not an object, or has a member only OpenAI chat messages
//     have (tool_calls, tool_call_id, reasoning_details, ...);
//   - read as Messages: a message's role is not user, assistant or system,
//     or its content is neither a string nor an array;
//   - read as Converse (a top-level member only Converse defines, or
//     content blocks without a type and nothing else foreign): a message's
//     role is not user or assistant, its content is not an array, or a
//     content block is not an object of exactly one member.
//
// The provider refuses every one of these, so the rule never passes through
// a body it would accept; members it does not name (a new Messages field)
// keep a body compiled, which is the side where bindery still protects the
// thinking.

// foreignTopKey names the API a top-level member belongs to, "" when it
// may be a Messages or a Converse member.
func foreignTopKey(key []byte) string {
	switch string(key) {
	case "max_completion_tokens", "stream_options", "response_format", "reasoning_effort", "frequency_penalty",
		"presence_penalty", "logit_bias", "logprobs", "top_logprobs", "n", "parallel_tool_calls", "functions",
		"function_call", "modalities", "prediction", "reasoning":
		return "an OpenAI chat member (" + string(key) + ")"
	}
	return ""
}

// foreignMessageKey: a member only OpenAI chat messages have.
func foreignMessageKey(key []byte) bool {
	switch string(key) {
	case "tool_calls", "tool_call_id", "function_call", "reasoning_details", "reasoning_content", "refusal", "name", "audio":
		return true
	}
	return false
}

// notMessages records the first reason the body is another API's.
func (p *Parser) notMessages(why string) {
	p.msgForeign = true
	if p.foreign == "" {
		p.foreign = why
	}
}
