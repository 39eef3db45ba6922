// The fake provider is the tests' judge: these pin that it refuses what the documented
// rules refuse (preserved-thinking.md sections 1-2 and 8), so a passing e2e test means something.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BETA, judge, reply } from "./fake-anthropic.js";

const H = {};
/** A conversation of `turns` pure-append rounds, each reply minted by the fake itself. */
function conversation(turns: number, prompt = "go") {
  const body: any = {
    model: "claude-fable-5-2",
    system: [{ type: "text", text: "sys", cache_control: { type: "ephemeral" } }],
    tools: [{ name: "bash", input_schema: { type: "object" } }],
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages: [{ role: "user", content: [{ type: "text", text: `${prompt} tools:${turns}` }] }],
  };
  for (let i = 0; i < turns; i++) {
    const j = judge(body, H);
    assert.equal(j.verdict.status, 200, j.verdict.error);
    const r = reply(body, j.lastRead, j.verdict);
    body.messages.push({ role: "assistant", content: r.blocks });
    const tu = r.blocks.find((b) => b.type === "tool_use")!;
    body.messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: `out ${i}` }] });
  }
  return body;
}
const clone = (b: any) => structuredClone(b);

test("pure append, key order, cache_control moves: accepted, every block read", () => {
  const body = conversation(3);
  const j = judge(body, H);
  assert.equal(j.verdict.status, 200);
  assert.equal(j.verdict.thinkingRead, 3);
  const moved = clone(body);
  delete moved.system[0].cache_control;
  moved.messages[2].content[0].cache_control = { type: "ephemeral" };
  moved.messages[0] = { content: moved.messages[0].content, role: "user" };
  assert.equal(judge(moved, H).verdict.status, 200);
});

test("a changed system prompt, tool or earlier tool result: 400 at the first block after it", () => {
  const body = conversation(3);
  const sys = clone(body);
  sys.system[0].text = "sys v2";
  assert.match(judge(sys, H).verdict.error!, /^messages\.1\.content\.0: .*bound to a different conversation.*requires the `thinking-binding-controls-2026-08-01` value/);
  const tools = clone(body);
  tools.tools[0].description = "one more sentence";
  assert.equal(judge(tools, H).verdict.refusal, "prefix");
  const tr = clone(body);
  tr.messages[4].content[0].content = "[pruned]";
  assert.match(judge(tr, H).verdict.error!, /^messages\.5\.content\.0: /);
});

test("an edit after a block leaves it valid; removing the oldest blocks is fine; a gap is not", () => {
  const body = conversation(3);
  const late = clone(body);
  late.messages[4].content[0].content = "[pruned]";
  late.messages[5].content.shift(); // the block after the edit removed; those in messages 1 and 3 precede it
  assert.equal(judge(late, H).verdict.status, 200);
  const last = clone(body);
  last.messages[6].content[0].content = "[pruned]"; // after every block
  assert.equal(judge(last, H).verdict.status, 200);
  const oldest = clone(body);
  oldest.messages[1].content.shift();
  assert.equal(judge(oldest, H).verdict.status, 200);
  const gap = clone(body);
  gap.messages[3].content.shift();
  assert.equal(judge(gap, H).verdict.refusal, "prefix");
  const endRemoved = clone(body);
  endRemoved.messages[5].content.shift();
  assert.equal(judge(endRemoved, H).verdict.status, 200);
});

test("latest assistant message: all of its thinking or none", () => {
  const body: any = conversation(0, "double");
  body.messages[0].content[0].text = "double tools:1";
  const j = judge(body, H);
  const r = reply(body, j.lastRead, j.verdict);
  body.messages.push({ role: "assistant", content: r.blocks });
  assert.equal(judge(body, H).verdict.status, 200);
  const partial = clone(body);
  partial.messages[1].content.splice(1, 1);
  assert.equal(judge(partial, H).verdict.refusal, "latest");
  const none = clone(body);
  none.messages[1].content = none.messages[1].content.filter((b: any) => b.type !== "thinking");
  assert.equal(judge(none, H).verdict.status, 200);
});

test("a tampered signature or thinking text is a bad-signature 400, even under drop_block", () => {
  const body = conversation(2);
  const sig = clone(body);
  sig.messages[1].content[0].signature = sig.messages[1].content[0].signature.slice(0, -2) + "AA";
  assert.equal(judge(sig, H).verdict.refusal, "signature");
  const text = clone(body);
  text.messages[1].content[0].thinking += " edited";
  text.thinking.block_binding = { prefix_mismatch_behavior: "drop_block" };
  const j = judge(text, { "anthropic-beta": BETA });
  assert.equal(j.verdict.refusal, "signature");
  assert.doesNotMatch(j.verdict.error!, /different conversation/);
});

test("block_binding needs the beta; drop_block drops the failing block and every later one", () => {
  const body = conversation(3);
  body.system[0].text = "changed";
  body.thinking.block_binding = { prefix_mismatch_behavior: "drop_block" };
  assert.equal(judge(body, H).verdict.refusal, "beta");
  const j = judge(body, { "anthropic-beta": `interleaved-thinking-2025-05-14,${BETA}` });
  assert.equal(j.verdict.status, 200);
  assert.deepEqual(
    j.verdict.transformations.map((x) => x.path),
    ["messages.1.content.0", "messages.3.content.0", "messages.5.content.0"],
  );
  assert.equal(j.verdict.thinkingRead, 0);
  const err = clone(body);
  err.thinking.block_binding = { prefix_mismatch_behavior: "error" };
  const e = judge(err, { "anthropic-beta": BETA });
  assert.equal(e.verdict.refusal, "prefix");
  assert.doesNotMatch(e.verdict.error!, /requires the/);
});
