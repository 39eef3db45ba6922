import { test } from "node:test";
import assert from "node:assert/strict";
import { BinderyBridge } from "../src/bridge.js";
import { defaultSettings, type BinderySettings } from "../src/settings.js";
import {
  applyConversePlan,
  converseJson,
  converseKeyAt,
  converseTransformations,
  stripAllConverseThinking,
  toConverseReply,
  withTransformationsPointer,
} from "../src/converse.js";
import { FakeCtx, uiReporter } from "./helpers.js";
import { json, StubDaemon } from "./stub-daemon.js";

function settingsFor(socketPath: string, over: Partial<BinderySettings> = {}): BinderySettings {
  return { ...defaultSettings(), socketPath, ...over };
}

const REDACTED = new Uint8Array([1, 2, 3, 250, 251]);

/** pi 1.6's ConverseStreamCommand input for a Claude model that binds (bedrock-converse-stream.js). */
function conversePayload(): Record<string, any> {
  return {
    modelId: "us.anthropic.claude-opus-5-5",
    messages: [
      { role: "user", content: [{ text: "read a.go" }] },
      {
        role: "assistant",
        content: [
          { reasoningContent: { reasoningText: { text: "look", signature: "SIG1" } } },
          { toolUse: { toolUseId: "toolu_1", name: "read", input: { path: "a.go" } } },
        ],
      },
      { role: "user", content: [{ toolResult: { toolUseId: "toolu_1", content: [{ text: "package a" }], status: "success" } }] },
      { role: "assistant", content: [{ reasoningContent: { redactedContent: REDACTED } }] },
      { role: "user", content: [{ text: "go on" }, { image: { format: "png", source: { bytes: new Uint8Array([9, 9]) } } }, { cachePoint: { type: "default" } }] },
    ],
    system: [{ text: "You are pi." }, { cachePoint: { type: "default" } }],
    inferenceConfig: { maxTokens: 128000 },
    toolConfig: { tools: [{ toolSpec: { name: "read", description: "Read", inputSchema: { json: { type: "object" } } } }, { cachePoint: { type: "default" } }] },
    additionalModelRequestFields: {
      thinking: { type: "adaptive", display: "summarized", block_binding: { prefix_mismatch_behavior: "drop_block" } },
      output_config: { effort: "high" },
      anthropic_beta: ["thinking-binding-controls-2026-08-01"],
    },
  };
}

const bedrockModel = { id: "us.anthropic.claude-opus-5-5", api: "bedrock-converse-stream", provider: "amazon-bedrock", baseUrl: "https://bedrock-runtime.us-east-1.amazonaws.com" };

test("the payload goes to bindery as AWS's JSON writes it: bytes as base64", () => {
  const v = JSON.parse(converseJson(conversePayload()));
  assert.equal(v.messages[3].content[0].reasoningContent.redactedContent, Buffer.from(REDACTED).toString("base64"));
  assert.equal(v.messages[4].content[1].image.source.bytes, "CQk=");
  assert.equal(converseKeyAt(conversePayload(), "messages.3.content.0"), Buffer.from(REDACTED).toString("base64"));
  assert.equal(converseKeyAt(conversePayload(), "messages.1.content.0"), "SIG1");
  assert.equal(converseKeyAt(conversePayload(), "messages.1.content.1"), undefined);
});

test("bindery's plan is applied to pi's own object: exactly the named blocks and messages go, bytes stay bytes", () => {
  const p = conversePayload();
  const out = applyConversePlan(p as any, [{ path: "messages.1.content.0" }, { path: "messages.3.content.0" }], ["messages.3"]) as any;
  assert.equal(out.messages.length, 4);
  assert.deepEqual(out.messages[1].content, [p.messages[1].content[1]]);
  assert.equal(out.messages[3], p.messages[4]);
  assert.ok(out.messages[3].content[1].image.source.bytes instanceof Uint8Array);
  assert.equal(p.messages[1].content.length, 2, "pi's payload is not modified");
  assert.equal(applyConversePlan(p as any, [], []), p);
  assert.throws(() => applyConversePlan(p as any, [{ path: "messages.1.content.1" }], []), /not a reasoning block/);
  assert.throws(() => applyConversePlan(p as any, [], ["messages.9"]), /not in the request/);
  // fail closed: every reasoning block out, a message of markers only dropped
  const closed = stripAllConverseThinking(p as any) as any;
  assert.equal(closed.messages.length, 4);
  assert.deepEqual(closed.messages[1].content, [p.messages[1].content[1]]);
});

test("the drops are asked for only where the model reports them (the binding beta)", () => {
  const p = conversePayload();
  assert.deepEqual(withTransformationsPointer(p).additionalModelResponseFieldPaths, ["/input_transformations"]);
  const q = { ...p, additionalModelResponseFieldPaths: ["/stop_sequence"] };
  assert.deepEqual(withTransformationsPointer(q).additionalModelResponseFieldPaths, ["/stop_sequence", "/input_transformations"]);
  const noBeta = { ...p, additionalModelRequestFields: { thinking: { type: "adaptive" } } };
  assert.equal(withTransformationsPointer(noBeta), noBeta);
  const t = [{ type: "thinking_dropped", path: "messages.1.content.0", reason: "prefix_binding_mismatch" }];
  assert.deepEqual(converseTransformations({ messageStop: { stopReason: "end_turn", additionalModelResponseFields: { input_transformations: t } } }), t);
  assert.equal(converseTransformations({ contentBlockDelta: {} }), undefined);
});

test("pi's reply in Converse's shape, as pi replays it to Claude on Bedrock", () => {
  const r = toConverseReply({
    role: "assistant",
    content: [
      { type: "thinking", thinking: "t \ud800x", thinkingSignature: "SIG2" },
      { type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: "AQID", redacted: true },
      { type: "thinking", thinking: "  ", thinkingSignature: "SIGBLANK" },
      { type: "thinking", thinking: "unsigned" },
      { type: "text", text: "  " },
      { type: "text", text: "done" },
      { type: "toolCall", id: "toolu_2", name: "read", arguments: { path: "b.go", "": 1, deep: { "": 2, k: [{ "": 3 }] } } },
    ],
  } as any);
  assert.deepEqual(r, {
    role: "assistant",
    content: [
      { reasoningContent: { reasoningText: { text: "t x", signature: "SIG2" } } },
      { reasoningContent: { redactedContent: "AQID" } },
      { text: "unsigned" },
      { text: "done" },
      { toolUse: { toolUseId: "toolu_2", name: "read", input: { path: "b.go", deep: { k: [{}] } } } },
    ],
  });
});

test("a Claude Converse request is compiled, the plan applied, the reply accepted in Converse shape with Bedrock's drops, a ValidationException released", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = (call, res) => {
    if (call.path === "/v1/compile") {
      return json(res, 200, {
        compileId: "c1",
        engaged: true,
        thinkingStripped: 1,
        strips: [{ path: "messages.3.content.0", reason: "prefix-changed" }],
        droppedMessages: ["messages.3"],
        request: call.body.request,
      });
    }
    if (call.path === "/v1/accept") return json(res, 200, { accepted: true });
    return json(res, 200, { released: 1 });
  };
  const ctx = new FakeCtx();
  ctx.model = bedrockModel;
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const payload = conversePayload();
  const sent = (await b.beforeProviderRequest(payload, ctx)) as any;
  const compile = d.calls[0].body;
  assert.equal(compile.request.modelId, "us.anthropic.claude-opus-5-5");
  assert.equal(compile.request.messages[3].content[0].reasoningContent.redactedContent, Buffer.from(REDACTED).toString("base64"));
  assert.equal(sent.messages.length, 4, "the emptied message is dropped");
  assert.equal(sent.messages[1], payload.messages[1]);
  assert.ok(sent.messages[3].content[1].image.source.bytes instanceof Uint8Array);
  assert.deepEqual(sent.additionalModelResponseFieldPaths, ["/input_transformations"]);
  assert.match(ctx.status!, /thinking kept 1 · stripped 1/);

  // The stream's messageStop carries the drops; message_end accepts.
  const drops = [{ type: "thinking_mismatch_allowed", path: "messages.1.content.0", reason: "prefix_binding_mismatch" }];
  b.receiveTransformations(converseTransformations({ messageStop: { stopReason: "tool_use", additionalModelResponseFields: { input_transformations: drops } } })!);
  await b.messageEnd(
    {
      role: "assistant",
      api: "bedrock-converse-stream",
      provider: "amazon-bedrock",
      model: "us.anthropic.claude-opus-5-5",
      content: [
        { type: "thinking", thinking: "t2", thinkingSignature: "SIG2" },
        { type: "toolCall", id: "toolu_2", name: "read", arguments: { path: "b.go" } },
      ],
      usage: { input: 1, output: 2, cacheRead: 3, cacheWrite: 4 },
      stopReason: "toolUse",
    },
    ctx,
  );
  await b.settle();
  const accept = d.calls.find((c) => c.path === "/v1/accept")!.body;
  assert.deepEqual(accept.reply, {
    role: "assistant",
    content: [
      { reasoningContent: { reasoningText: { text: "t2", signature: "SIG2" } } },
      { toolUse: { toolUseId: "toolu_2", name: "read", input: { path: "b.go" } } },
    ],
  });
  assert.deepEqual(accept.inputTransformations, drops);

  // The next request is refused: pi's Bedrock error text carries the provider's message.
  await b.beforeProviderRequest(conversePayload(), ctx);
  await b.messageEnd(
    {
      role: "assistant",
      model: "us.anthropic.claude-opus-5-5",
      content: [],
      stopReason: "error",
      errorMessage:
        'Validation error: messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".',
    },
    ctx,
  );
  await b.settle();
  const release = d.calls.find((c) => c.path === "/v1/release")!.body;
  assert.equal(release.path, "messages.1.content.0");
  assert.equal(release.compileId, "c1");
  assert.match(ctx.notes.at(-1)!.message, /refused the thinking block at messages.1.content.0/);
});

test("a plan that does not fit pi's payload sends pi's payload as is (fail open)", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = (call, res) =>
    json(res, 200, { compileId: "c1", strips: [{ path: "messages.0.content.0", reason: "gap" }], droppedMessages: [], request: call.body.request });
  const ctx = new FakeCtx();
  ctx.model = bedrockModel;
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  assert.equal(await b.beforeProviderRequest(conversePayload(), ctx), undefined);
  assert.equal(b.counters.failures, 1);
  assert.match(b.lastError()!, /not a reasoning block/);
});

test("a Converse cache warm (inferenceConfig.maxTokens 1) is a dry-run compile, its plan applied to pi's object", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = (call, res) =>
    json(res, 200, { compileId: "w1", dryRun: true, strips: [{ path: "messages.1.content.0", reason: "prefix-changed" }], droppedMessages: [], request: call.body.request });
  const ctx = new FakeCtx();
  ctx.model = bedrockModel;
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const warm: Record<string, any> = { ...conversePayload(), inferenceConfig: { maxTokens: 1 } };
  const out = (await b.beforeProviderRequest(warm, ctx)) as any;
  assert.equal(d.calls[0].body.dryRun, true);
  assert.equal(b.counters.warms, 1);
  assert.deepEqual(out.messages[1].content, [warm.messages[1].content[1]]);
  assert.ok(out.messages[3].content[0].reasoningContent.redactedContent instanceof Uint8Array);
});
