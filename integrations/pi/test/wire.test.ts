import { test } from "node:test";
import assert from "node:assert/strict";
import { countThinking, parseBindingRefusal, stripAllThinking, thinkingKeyAt, toWireReply, toWireUsage, transformationsFromDiagnostics } from "../src/wire.js";
import { withDropBlock } from "../src/bridge.js";
import { samplePayload } from "./helpers.js";

test("toWireReply converts pi's blocks the way pi's Anthropic serializer does", () => {
  const reply = toWireReply({
    role: "assistant",
    content: [
      { type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: "REDACTED-DATA", redacted: true },
      { type: "thinking", thinking: "plan", thinkingSignature: "SIG" },
      { type: "text", text: "   " },
      { type: "text", text: "answer" },
      { type: "toolCall", id: "toolu_1", name: "read", arguments: { path: "a.go" } },
      { type: "image", data: "x" },
    ],
  });
  assert.deepEqual(reply, {
    role: "assistant",
    content: [
      { type: "redacted_thinking", data: "REDACTED-DATA" },
      { type: "thinking", thinking: "plan", signature: "SIG" },
      { type: "text", text: "answer" },
      { type: "tool_use", id: "toolu_1", name: "read", input: { path: "a.go" } },
    ],
  });
});

test("toWireReply: unsigned thinking becomes text, signed blank thinking stays a block", () => {
  const reply = toWireReply({
    role: "assistant",
    content: [
      { type: "thinking", thinking: "aborted thought", thinkingSignature: "" },
      { type: "thinking", thinking: "   " },
      { type: "thinking", thinking: "", thinkingSignature: "OMITTED-SIG" },
      { type: "toolCall", id: "toolu_9", name: "bash" },
    ],
  });
  assert.deepEqual(reply.content, [
    { type: "text", text: "aborted thought" },
    // An omitted-display block is real (its signature carries the reasoning): bindery must
    // see it to know the next block's predecessor, even though pi's serializer skips it.
    { type: "thinking", thinking: "", signature: "OMITTED-SIG" },
    { type: "tool_use", id: "toolu_9", name: "bash", input: {} },
  ]);
});

test("toWireReply takes tool names as sent (OAuth re-cases read to Read)", () => {
  const reply = toWireReply(
    { role: "assistant", content: [{ type: "toolCall", id: "t", name: "read", arguments: {} }] },
    { tools: [{ name: "Bash" }, { name: "Read" }] },
  );
  assert.equal(reply.content[0].name, "Read");
  const exact = toWireReply(
    { role: "assistant", content: [{ type: "toolCall", id: "t", name: "mytool", arguments: {} }] },
    { tools: [{ name: "MyTool" }, { name: "mytool" }] },
  );
  assert.equal(exact.content[0].name, "mytool");
});

test("toWireReply drops lone surrogates like pi's sanitizer, keeps pairs", () => {
  const reply = toWireReply({ role: "assistant", content: [{ type: "text", text: "a\uD800b😀" }] });
  assert.equal(reply.content[0].text, "ab😀");
});

test("toWireUsage maps pi's usage to the response's names", () => {
  assert.deepEqual(toWireUsage({ input: 1, output: 2, cacheRead: 3, cacheWrite: 4, totalTokens: 10 }), {
    input_tokens: 1,
    output_tokens: 2,
    cache_read_input_tokens: 3,
    cache_creation_input_tokens: 4,
  });
  assert.equal(toWireUsage(undefined), undefined);
  // pi 1.x: the 1-hour share of the cache write and the thinking tokens, where the response had them.
  assert.deepEqual(toWireUsage({ input: 1, output: 20, cacheRead: 3, cacheWrite: 10, cacheWrite1h: 4, reasoning: 12 }), {
    input_tokens: 1,
    output_tokens: 20,
    cache_read_input_tokens: 3,
    cache_creation_input_tokens: 10,
    cache_creation: { ephemeral_1h_input_tokens: 4, ephemeral_5m_input_tokens: 6 },
    output_tokens_details: { thinking_tokens: 12 },
  });
});

test("parseBindingRefusal reads the path from pi's errorMessage", () => {
  const msg =
    '400 messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header.';
  assert.deepEqual(parseBindingRefusal(msg), { path: "messages.3.content.0" });
  // A bad signature is a different error: nothing to release.
  assert.equal(parseBindingRefusal("400 messages.1.content.0: Invalid `signature` in `thinking` block."), undefined);
  assert.equal(parseBindingRefusal("529 overloaded"), undefined);
  assert.equal(parseBindingRefusal(undefined), undefined);
});

test("countThinking, thinkingKeyAt", () => {
  const p = samplePayload();
  p.messages[1].content.unshift({ type: "redacted_thinking", data: "RD" });
  assert.equal(countThinking(p), 2);
  assert.equal(thinkingKeyAt(p, "messages.1.content.0"), "RD");
  assert.equal(thinkingKeyAt(p, "messages.1.content.1"), "SIG1");
  assert.equal(thinkingKeyAt(p, "messages.1.content.2"), undefined);
  assert.equal(thinkingKeyAt(p, "messages.9.content.0"), undefined);
  assert.equal(thinkingKeyAt(p, "system"), undefined);
  assert.equal(countThinking({ prompt: "x" }), 0);
});

test("stripAllThinking removes every thinking block, drops emptied messages, leaves the input alone", () => {
  const p = samplePayload();
  p.messages.push({ role: "assistant", content: [{ type: "thinking", thinking: "only", signature: "S" }] });
  const before = JSON.stringify(p);
  const out = stripAllThinking(p);
  assert.equal(JSON.stringify(p), before);
  assert.equal(countThinking(out), 0);
  assert.equal(out.messages.length, 3);
  assert.deepEqual(out.messages[1].content, [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }]);
  assert.equal(out.system, p.system);
});

test("withDropBlock sets the field only when thinking is on, keeping the rest", () => {
  const p = samplePayload();
  const out = withDropBlock(p);
  assert.deepEqual(out.thinking, { type: "enabled", budget_tokens: 16384, block_binding: { prefix_mismatch_behavior: "drop_block" } });
  assert.equal(p.thinking.block_binding, undefined);
  const off = { ...p, thinking: undefined };
  assert.equal(withDropBlock(off), off);
  const disabled = { ...p, thinking: { type: "disabled" } };
  assert.equal(withDropBlock(disabled), disabled);
});

test("input_transformations from pi 1.x's assistant diagnostics", () => {
  const t = [{ type: "thinking_dropped", path: "messages.3.content.0", reason: "prefix_binding_mismatch" }];
  assert.deepEqual(
    transformationsFromDiagnostics({ role: "assistant", content: [], diagnostics: [{ type: "other" }, { type: "anthropic_input_transformations", details: { transformations: t } }] }),
    t,
  );
  assert.equal(transformationsFromDiagnostics({ role: "assistant", content: [] }), undefined);
  assert.equal(transformationsFromDiagnostics({ role: "assistant", content: [], diagnostics: [{ type: "anthropic_input_transformations", details: {} }] }), undefined);
});
