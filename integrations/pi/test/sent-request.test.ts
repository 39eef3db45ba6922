import { test } from "node:test";
import assert from "node:assert/strict";
import { sentShape, toCompiledPath, transformationsToCompiled } from "../src/sent-request.js";
import { samplePayload } from "./helpers.js";

/** The compiled request and pi's thread continue of it: the first `keep` messages left out, no system, no tools. */
function continued(full: Record<string, any>, keep: number): string {
  const { system: _s, tools: _t, ...rest } = full;
  return JSON.stringify({ ...rest, messages: full.messages.slice(keep), thread: { type: "continue", previous_message_id: "msg_1" } });
}

function longer(): Record<string, any> {
  const p = samplePayload();
  p.messages.push(
    { role: "assistant", content: [{ type: "thinking", thinking: "t2", signature: "SIG2" }, { type: "tool_use", id: "toolu_2", name: "bash", input: {} }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "c" }] },
  );
  return p;
}

test("sentShape: a plain body is the compiled request (only max_tokens read); a continue is parsed", () => {
  const full = longer();
  const plain = sentShape(JSON.stringify(full));
  assert.equal(plain.continued, false);
  assert.equal(plain.maxTokens, 32000);
  assert.equal(sentShape(JSON.stringify({ ...full, max_tokens: 1 })).maxTokens, 1);
  const c = sentShape(continued(full, 3));
  assert.equal(c.continued, true);
  assert.equal(c.messages, 2);
  assert.deepEqual([...c.signatures], [["messages.0.content.0", "SIG2"]]);
  // Text that merely mentions a continue is not one.
  const mention = sentShape(JSON.stringify({ ...full, messages: [{ role: "user", content: '"thread":{"type":"continue"' }] }));
  assert.equal(mention.continued, false);
  assert.equal(sentShape('{"thread":{"type":"continue" broken').continued, false);
});

test("toCompiledPath: a path in a trimmed continue lands on the same block of the compiled request", () => {
  const full = longer();
  const shape = sentShape(continued(full, 3));
  assert.deepEqual(toCompiledPath("messages.0.content.0", shape, full), { path: "messages.3.content.0" });
  // Without a continue the body sent is the compiled request.
  assert.deepEqual(toCompiledPath("messages.1.content.0", sentShape(JSON.stringify(full)), full), { path: "messages.1.content.0" });
  assert.deepEqual(toCompiledPath("messages.1.content.0", undefined, full), { path: "messages.1.content.0" });
  // The offset would land elsewhere: the signature finds the block.
  const moved = longer();
  moved.messages.splice(1, 0, { role: "user", content: "extra" });
  assert.deepEqual(toCompiledPath("messages.0.content.0", shape, moved), { path: "messages.4.content.0" });
  // Not a thinking block in the body sent, or a block the compiled request lacks: never a guess.
  assert.ok("unmapped" in toCompiledPath("messages.1.content.0", shape, full));
  const other = sentShape(continued(longer(), 3).replace("SIG2", "SIGX"));
  assert.match((toCompiledPath("messages.0.content.0", other, full) as { unmapped: string }).unmapped, /not in the compiled request/);
  assert.ok("unmapped" in toCompiledPath("system.0", shape, full));
  assert.ok("unmapped" in toCompiledPath("messages.0.content.0", { ...shape, messages: 99 }, full));
});

test("transformationsToCompiled moves every path and leaves out what cannot be placed", () => {
  const full = longer();
  const shape = sentShape(continued(full, 3));
  const why: string[] = [];
  const out = transformationsToCompiled(
    [
      { type: "thinking_dropped", path: "messages.0.content.0", reason: "prefix_binding_mismatch" },
      { type: "thinking_dropped", path: "messages.1.content.0", reason: "prefix_binding_mismatch" },
      { type: "future_kind" },
    ],
    shape,
    full,
    (w) => why.push(w),
  );
  assert.deepEqual(out, [{ type: "thinking_dropped", path: "messages.3.content.0", reason: "prefix_binding_mismatch" }, { type: "future_kind" }]);
  assert.equal(why.length, 1);
  const same = [{ path: "messages.0.content.0" }];
  assert.equal(transformationsToCompiled(same, undefined, full, () => {}), same);
});
