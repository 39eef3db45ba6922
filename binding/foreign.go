package binding

// What counts as an Anthropic Messages body. Hosts reach /v1/compile with
// the bodies of other APIs too (pi's Bedrock route sends Converse, its
// OpenRouter batch models OpenAI chat), and both carry a "messages" array.
// bindery compiles a body only when nothing in it says it is another API's;
// anything else passes back untouched and unrecorded (Request.Bound false,
// Request.NotMessages the reason). A body is not a Messages body when:
//
//   - a top-level member is one only Bedrock Converse defines (modelId,
//     inferenceConfig, toolConfig, additionalModelRequestFields, ...) or
//     one only OpenAI chat completions defines (max_completion_tokens,
//     stream_options, response_format, reasoning_effort, ...);
//   - a message is not an object, its role is not user, assistant or
//     system, its content is neither a string nor an array, or it has a
//     member only OpenAI chat messages have (tool_calls, tool_call_id,
//     reasoning_details, ...);
//   - a content block is not an object with a string type (Converse's
//     blocks are {text}, {toolUse}, {reasoningContent}: keyed, untyped).
//
// The provider refuses every one of these in a Messages request, so the
// rule never passes through a body it would accept; members it does not
// name (a new Messages field) keep a body a Messages body, which is the
// side where bindery still protects the thinking.

// foreignTopKey names the API a top-level member belongs to, "" when it
// may be a Messages member.
func foreignTopKey(key []byte) string {
	switch string(key) {
	case "modelId", "inferenceConfig", "toolConfig", "additionalModelRequestFields",
		"additionalModelResponseFieldPaths", "guardrailConfig", "promptVariables", "performanceConfig", "requestMetadata":
		return "a Bedrock Converse member (" + string(key) + ")"
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
