import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { BinderyBridge } from "../src/bridge.js";
import { defaultSettings, type BinderySettings } from "../src/settings.js";
import { FakeCtx, samplePayload, sampleReply, uiReporter } from "./helpers.js";
import { json, StubDaemon } from "./stub-daemon.js";

function settingsFor(socketPath: string, over: Partial<BinderySettings> = {}): BinderySettings {
  return { ...defaultSettings({}, "/h"), socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000, ...over };
}

const BOUND_400 =
  '400 messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".';

test("compile sends session, leaf, file and payload; the answer's plan applied to pi's payload is what pi sends", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const stripped = samplePayload();
  stripped.messages[1].content.shift();
  d.handler = (call, res) =>
    call.path === "/v1/compile"
      ? json(res, 200, { compileId: "c1", engaged: true, thinkingStripped: 1, strips: [{ path: "messages.1.content.0", reason: "prefix-changed" }], request: stripped })
      : json(res, 200, { accepted: true });
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const payload = samplePayload();
  const out = await b.beforeProviderRequest(payload, ctx);
  assert.deepEqual(out, stripped);
  assert.deepEqual(d.calls[0].body, {
    conversation: "sess-1",
    branch: "leaf-1",
    sessionFile: "/tmp/sessions/s.jsonl",
    request: payload,
    return: "plan",
  });
  assert.equal(ctx.status, "bindery ✓ thinking kept 0 · stripped 1");

  await b.messageEnd(sampleReply(), ctx);
  assert.equal(d.calls[1].path, "/v1/accept");
  assert.deepEqual(d.calls[1].body, {
    compileId: "c1",
    reply: {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "t2", signature: "SIG2" },
        { type: "tool_use", id: "toolu_2", name: "bash", input: { command: "pwd" } },
      ],
    },
    usage: { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 30, cache_creation_input_tokens: 40 },
  });
  assert.deepEqual(b.counters, { compiles: 1, accepts: 1, releases: 0, failures: 0, warms: 0, unmapped: 0 });
  assert.equal(ctx.notes.length, 0);
});

test("a later compile names the deepest earlier compiled leaf on its path as parent", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  ctx.leaf = "u1";
  ctx.branchPath = ["u1"];
  await b.beforeProviderRequest(samplePayload(), ctx);
  ctx.leaf = "t1";
  ctx.branchPath = ["u1", "a1", "t1"];
  await b.beforeProviderRequest(samplePayload(), ctx);
  // /tree back to u1 and a sibling prompt u2: its parent is u1, not t1 (not on its path).
  ctx.leaf = "u2";
  ctx.branchPath = ["u1", "a1", "u2"];
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.deepEqual(
    d.calls.map((c) => c.body.parent),
    [undefined, { conversation: "sess-1", branch: "u1" }, { conversation: "sess-1", branch: "u1" }],
  );
});

test("a non-Anthropic payload is not sent to bindery", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  assert.equal(await b.beforeProviderRequest({ model: "gpt", input: [] }, new FakeCtx()), undefined);
  assert.equal(d.calls.length, 0);
});

test("each accept goes to the compile that answered it; user and toolResult message_end are ignored", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.equal(b.messageEnd({ role: "user", content: "x" }, ctx), undefined);
  assert.equal(b.messageEnd({ role: "toolResult", content: [] }, ctx), undefined);
  await b.messageEnd(sampleReply(), ctx);
  // A second assistant message_end with no compile in between (e.g. a compaction summary) is not accepted twice.
  assert.equal(b.messageEnd(sampleReply(), ctx), undefined);
  assert.deepEqual(d.paths(), ["/v1/compile", "/v1/accept"]);
  // A reply from another model than the compiled request is not attributed to it.
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.equal(b.messageEnd(sampleReply({ model: "other-model" }), ctx), undefined);
  // An aborted reply is never replayed by pi: nothing to accept.
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.equal(b.messageEnd(sampleReply({ stopReason: "aborted" }), ctx), undefined);
  assert.deepEqual(d.paths(), ["/v1/compile", "/v1/accept", "/v1/compile", "/v1/compile"]);
});

test("daemon down (no socket): payload unchanged, failures counted, reported once, footer says so", async () => {
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor("/nonexistent/dir/bindery.sock"), uiReporter);
  for (let i = 0; i < 3; i++) assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.equal(b.messageEnd(sampleReply(), ctx), undefined); // no compile id: no accept
  assert.equal(b.counters.failures, 3);
  assert.equal(ctx.notes.length, 1);
  // In the user's words: not a raw errno; what pi does; how to start bindery; the footer
  // where pi has one (issue 32).
  assert.match(ctx.notes[0].message, /^bindery: compile failed: bindery is not running \(nothing answers on \/nonexistent\/dir\/bindery.sock\); pi's requests go out unchanged, as without bindery\. Start it with `bindery service install` \(at every login\) or `bindery serve`/);
  assert.match(ctx.notes[0].message, /the footer shows/);
  assert.doesNotMatch(ctx.notes[0].message, /ENOENT/);
  assert.match(ctx.status!, /^bindery down/);
  // pi -p has no footer: the notice does not point to one.
  const printCtx = new FakeCtx();
  printCtx.hasUI = false;
  const lines: string[] = [];
  const p = new BinderyBridge(settingsFor("/nonexistent/dir/bindery.sock"), { notify: (_c, m) => void lines.push(m) });
  await p.beforeProviderRequest(samplePayload(), printCtx);
  assert.equal(lines.length, 1);
  assert.match(lines[0], /bindery service install/);
  assert.doesNotMatch(lines[0], /footer/);
});

test("a frozen daemon costs one deadline: later requests go straight on, a probe notices it is back", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = () => {}; // frozen (SIGSTOP): accepts connections, never answers
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath, { compileTimeoutMs: 400 }), uiReporter);
  t.after(() => b.stopProbe());
  const compiles = () => d.calls.filter((c) => c.path === "/v1/compile").length;
  let start = Date.now();
  assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.ok(Date.now() - start >= 400, "the first request waits out the deadline");
  assert.match(ctx.notes[0].message, /did not answer in time.*without waiting for it, until it answers again/);
  start = Date.now();
  for (let i = 0; i < 3; i++) assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.ok(Date.now() - start < 200, `the next three requests went straight on (${Date.now() - start} ms)`);
  assert.equal(compiles(), 1, "no compile was sent to the frozen daemon");
  assert.equal(ctx.notes.length, 1, "reported once");
  // The daemon thaws: the background probe hears it, and the next request compiles.
  d.handler = (await import("./stub-daemon.js")).defaultHandler;
  const deadline = Date.now() + 10_000;
  while (d.calls.filter((c) => c.path === "/v1/health").length === 0 || compiles() < 2) {
    assert.ok(Date.now() < deadline, `no compile after the daemon answered again: ${d.paths().join(" ")}`);
    await new Promise((r) => setTimeout(r, 100));
    await b.beforeProviderRequest(samplePayload(), ctx);
  }
  assert.match(ctx.status!, /^bindery ✓/);
  assert.deepEqual(ctx.notes.map((n) => n.type), ["warning", "info"]);
});

test("daemon slow: the compile deadline passes, payload unchanged", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = () => {}; // never answers
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath, { compileTimeoutMs: 100 }), uiReporter);
  assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.equal(b.counters.failures, 1);
  assert.match(b.lastError()!, /no answer within 100 ms/);
});

test("the user aborts while bindery is slow: the wait ends at once, not counted as a failure", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = () => {}; // never answers
  const ctx = new FakeCtx();
  const ac = new AbortController();
  ctx.signal = ac.signal;
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter); // 10 s deadline
  const out = b.beforeProviderRequest(samplePayload(), ctx);
  while (d.calls.length === 0) await new Promise((r) => setImmediate(r));
  ac.abort();
  assert.equal(await out, undefined);
  assert.equal(b.counters.failures, 0);
  assert.equal(ctx.notes.length, 0);
});

test("daemon answers an error, or garbage: payload unchanged, counted", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  d.handler = (_c, res) => json(res, 500, { error: { code: "internal", message: "boom" } });
  assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.match(b.lastError()!, /500 internal boom/);
  d.handler = (_c, res) => {
    res.writeHead(200);
    res.end("<html>");
  };
  assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  d.handler = (_c, res) => json(res, 200, { compileId: "x" }); // no request in the answer
  assert.equal(await b.beforeProviderRequest(samplePayload(), ctx), undefined);
  assert.equal(b.counters.failures, 3);
  assert.equal(ctx.notes.length, 1);
});

test("failOpen false: bindery unreachable sends the payload with every thinking block removed", async () => {
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor("/nonexistent/bindery.sock", { failOpen: false }), uiReporter);
  const out = (await b.beforeProviderRequest(samplePayload(), ctx)) as any;
  assert.ok(out);
  assert.equal(out.messages[1].content.length, 1);
  assert.equal(out.messages[1].content[0].type, "tool_use");
  assert.match(ctx.notes[0].message, /earlier thinking removed/);
});

test("bindery back after a failure: reported as connected again", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  d.handler = (_c, res) => {
    res.writeHead(200);
    res.end("not json"); // a daemon answering garbage counts as not connected
  };
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.match(ctx.status!, /^bindery down/);
  d.handler = (await import("./stub-daemon.js")).defaultHandler;
  assert.ok(await b.beforeProviderRequest(samplePayload(), ctx));
  assert.deepEqual(ctx.notes.map((n) => n.type), ["warning", "info"]);
  assert.match(ctx.status!, /^bindery ✓/);
});

test("a prefix-binding 400 releases the named block on the compile's branch and tells the user once", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  ctx.leaf = "leaf-7";
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  await b.messageEnd({ role: "assistant", content: [], model: "claude-fable-5-2", stopReason: "error", errorMessage: BOUND_400 }, ctx);
  const release = d.calls.find((c) => c.path === "/v1/release")!;
  assert.ok(release, "release was called");
  assert.equal(release.body.conversation, "sess-1");
  assert.equal(release.body.branch, "leaf-7");
  assert.equal(release.body.path, "messages.1.content.0");
  assert.match(release.body.compileId, /^cleaf-7-/);
  assert.equal(ctx.notes.length, 1);
  assert.match(ctx.notes[0].message, /refused the thinking block at messages\.1\.content\.0.*released it and every later one \(2\).*next request goes through clean/);
  assert.doesNotMatch(ctx.notes[0].message, /drop_block/); // setting off by default
  // The next compile carries no block_binding (dropBlock is off).
  const next = (await b.beforeProviderRequest(samplePayload(), ctx)) as any;
  assert.equal(next.thinking.block_binding, undefined);
});

test("other errors release nothing: a bad signature, an overload", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.equal(b.messageEnd({ role: "assistant", content: [], stopReason: "error", errorMessage: "400 messages.1.content.0: Invalid `signature` in `thinking` block." }, ctx), undefined);
  await b.beforeProviderRequest(samplePayload(), ctx);
  assert.equal(b.messageEnd({ role: "assistant", content: [], stopReason: "error", errorMessage: "529 overloaded_error" }, ctx), undefined);
  assert.deepEqual(d.paths(), ["/v1/compile", "/v1/compile"]);
});

test("dropBlock on: after a refusal, the session's requests carry drop_block on a direct Anthropic route", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  let installs = 0;
  const b = new BinderyBridge(settingsFor(d.socketPath, { dropBlock: true }), uiReporter, () => installs++);
  const first = (await b.beforeProviderRequest(samplePayload(), ctx)) as any;
  assert.equal(first.thinking.block_binding, undefined, "not before any refusal");
  await b.messageEnd({ role: "assistant", content: [], stopReason: "error", errorMessage: BOUND_400 }, ctx);
  assert.equal(installs, 1);
  assert.match(ctx.notes[0].message, /drop_block/);
  const next = (await b.beforeProviderRequest(samplePayload(), ctx)) as any;
  assert.deepEqual(next.thinking.block_binding, { prefix_mismatch_behavior: "drop_block" });
  assert.match(ctx.status!, /drop_block/);
  // A new session starts clean.
  ctx.sessionId = "sess-2";
  const other = (await b.beforeProviderRequest(samplePayload(), ctx)) as any;
  assert.equal(other.thinking.block_binding, undefined);
});

test("drop_block is remembered in the session: persisted when turned on, restored on resume", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const persisted: boolean[] = [];
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath, { dropBlock: true }), uiReporter, (p) => persisted.push(p));
  await b.beforeProviderRequest(samplePayload(), ctx);
  await b.messageEnd({ role: "assistant", content: [], stopReason: "error", errorMessage: BOUND_400 }, ctx);
  assert.deepEqual(persisted, [true]);
  // A later pi run resumes the session: the entry pi.appendEntry wrote is in the file.
  const resumed = new FakeCtx();
  resumed.entries = [{ type: "custom", customType: "bindery-drop-block", data: { dropBlock: true } }];
  const b2 = new BinderyBridge(settingsFor(d.socketPath, { dropBlock: true }), uiReporter, (p) => persisted.push(p));
  const out = (await b2.beforeProviderRequest(samplePayload(), resumed)) as any;
  assert.deepEqual(out.thinking.block_binding, { prefix_mismatch_behavior: "drop_block" });
  assert.deepEqual(persisted, [true, false]); // header installed, nothing appended twice
  // With the setting turned off since, the record is ignored.
  const b3 = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const off = (await b3.beforeProviderRequest(samplePayload(), resumed)) as any;
  assert.equal(off.thinking.block_binding, undefined);
});

async function plain0(socketPath: string, dropped: unknown[]) {
  const b = new BinderyBridge(settingsFor(socketPath), uiReporter);
  const ctx = new FakeCtx();
  await b.beforeProviderRequest(samplePayload(), ctx);
  await b.messageEnd(sampleReply({ diagnostics: [{ type: "anthropic_input_transformations", timestamp: 1, details: { transformations: dropped } }] }), ctx);
}

test("drop_block requests pass the response's input_transformations to the accept", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  ctx.entries = [{ type: "custom", customType: "bindery-drop-block", data: { dropBlock: true } }];
  const b = new BinderyBridge(settingsFor(d.socketPath, { dropBlock: true }), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  const dropped = [{ type: "thinking_dropped", path: "messages.1.content.0", reason: "prefix_binding_mismatch" }];
  b.receiveTransformations(dropped); // the fetch wrapper read them while pi streamed
  await b.messageEnd(sampleReply(), ctx);
  assert.deepEqual(d.calls.at(-1)!.body.inputTransformations, dropped);
  // pi 1.x reports them itself, on the message: taken from there.
  await plain0(d.socketPath, dropped);
  assert.deepEqual(d.calls.at(-1)!.body.inputTransformations, dropped);
  // Without drop_block there is no beta, so nothing is awaited or sent.
  const plain = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await plain.beforeProviderRequest(samplePayload(), new FakeCtx());
  await plain.messageEnd(sampleReply(), new FakeCtx());
  assert.equal(d.calls.at(-1)!.body.inputTransformations, undefined);
});

test("dropBlock is never sent on routes that may refuse the field", () => {
  const b = new BinderyBridge(settingsFor("/x", { dropBlock: true, dropBlockHosts: ["proxy.local"] }), uiReporter);
  assert.equal(b.routeAcceptsDropBlock({ id: "m", api: "anthropic-messages", baseUrl: "https://api.anthropic.com" }), true);
  assert.equal(b.routeAcceptsDropBlock({ id: "m", api: "anthropic-messages", baseUrl: "http://proxy.local:8080/v1" }), true);
  assert.equal(b.routeAcceptsDropBlock({ id: "m", api: "anthropic-messages", baseUrl: "https://openrouter.ai/api" }), false);
  assert.equal(b.routeAcceptsDropBlock({ id: "m", api: "bedrock-converse-stream", baseUrl: "https://api.anthropic.com" }), false);
  assert.equal(b.routeAcceptsDropBlock(undefined), false);
});

test("footer counts distinct stripped blocks per session and the blocks kept in the last request", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  d.handler = (call, res) => {
    if (call.path !== "/v1/compile") return json(res, 200, {});
    const req = structuredClone(call.body.request);
    req.messages[1].content.shift();
    json(res, 200, { compileId: "c", strips: [{ path: "messages.1.content.0", reason: "released" }], request: req });
  };
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const p = samplePayload();
  p.messages.push({ role: "assistant", content: [{ type: "thinking", thinking: "k", signature: "KEEP" }, { type: "text", text: "ok" }] });
  await b.beforeProviderRequest(p, ctx);
  await b.beforeProviderRequest(p, ctx); // the same block stripped again counts once
  assert.equal(ctx.status, "bindery ✓ thinking kept 1 · stripped 1");
});

test("disabled: no calls, payload untouched", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const b = new BinderyBridge(settingsFor(d.socketPath, { enabled: false }), uiReporter);
  assert.equal(await b.beforeProviderRequest(samplePayload(), new FakeCtx()), undefined);
  assert.equal(b.messageEnd(sampleReply(), new FakeCtx()), undefined);
  assert.equal(d.calls.length, 0);
});

test("accept failure after a good compile is counted and never thrown into pi", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  d.handler = (_c, res) => json(res, 404, { error: { code: "unknown_compile", message: "forgotten" } });
  await b.messageEnd(sampleReply(), ctx);
  assert.equal(b.counters.failures, 1);
  assert.match(b.lastError()!, /404 unknown_compile forgotten/);
});

test("only Anthropic Messages and Claude's Bedrock Converse bodies are compiled: another api passes untouched, with no call", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  // Bedrock, but not Claude: its reasoning carries no signature (converse.test.ts has Claude's).
  ctx.model = { id: "amazon.nova-2-lite-v1:0", api: "bedrock-converse-stream", provider: "amazon-bedrock" };
  assert.equal(await b.beforeProviderRequest({ modelId: "amazon.nova-2-lite-v1:0", messages: [{ role: "user", content: [{ text: "hi" }] }] }, ctx), undefined);
  // The Bedrock api with a body that is not Converse's.
  ctx.model = { id: "anthropic.claude-opus-5", api: "bedrock-converse-stream", provider: "amazon-bedrock" };
  assert.equal(await b.beforeProviderRequest({ model: "x", messages: [{ role: "user", content: "hi" }] }, ctx), undefined);
  ctx.model = { id: "gpt", api: "openai-completions", provider: "openai" };
  assert.equal(await b.beforeProviderRequest({ model: "gpt", messages: [{ role: "user", content: "hi" }] }, ctx), undefined);
  assert.deepEqual(d.paths(), []);
  assert.equal(b.counters.compiles, 0);
});

test("a cache-warming re-send (max_tokens 1) is a dry-run compile: the pending compile keeps the accept", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  let n = 0;
  d.handler = (call, res) => {
    if (call.path !== "/v1/compile") return json(res, 200, { accepted: true });
    const body = call.body as { request: unknown; dryRun?: boolean };
    return json(res, 200, { compileId: body.dryRun ? "d_warm" : `c${++n}`, engaged: true, strips: [], request: body.request });
  };
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const real = samplePayload();
  await b.beforeProviderRequest(real, ctx);
  // The fetch wrapper sees the real body, then (while the reply streams) a warm one.
  b.receiveSent({ continued: false, maxTokens: 32000, messages: -1, signatures: new Map() });
  const warm = { ...samplePayload(), max_tokens: 1 };
  const out = await b.beforeProviderRequest(warm, ctx);
  assert.deepEqual(out, warm);
  assert.equal((d.calls[1].body as { dryRun?: boolean }).dryRun, true);
  b.receiveSent({ continued: true, maxTokens: 1, messages: 1, signatures: new Map() });
  await b.messageEnd(sampleReply(), ctx);
  assert.deepEqual(d.paths(), ["/v1/compile", "/v1/compile", "/v1/accept"]);
  assert.equal((d.calls[2].body as { compileId: string }).compileId, "c1", "the accept goes to the compile whose request was sent");
  assert.equal(b.counters.warms, 1);
  assert.equal(b.counters.compiles, 1);
});

test("the payload hook twice for one reply (strict-tool fallback): the accept goes to the second compile", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  let n = 0;
  d.handler = (call, res) =>
    call.path === "/v1/compile"
      ? json(res, 200, { compileId: `c${++n}`, engaged: true, strips: [], request: (call.body as { request: unknown }).request })
      : json(res, 200, { accepted: true });
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  await b.beforeProviderRequest(samplePayload(), ctx);
  await b.beforeProviderRequest(samplePayload(), ctx);
  await b.messageEnd(sampleReply(), ctx);
  assert.equal((d.calls[2].body as { compileId: string }).compileId, "c2");
});

test("a 400 and a drop named in a trimmed thread continue land on the compiled request's block", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = (call, res) =>
    call.path === "/v1/compile"
      ? json(res, 200, { compileId: "c1", engaged: true, strips: [], request: (call.body as { request: unknown }).request })
      : json(res, 200, { accepted: true, released: 1 });
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const full = samplePayload();
  full.messages.push(
    { role: "assistant", content: [{ type: "thinking", thinking: "t2", signature: "SIG2" }, { type: "text", text: "ok" }] },
    { role: "user", content: [{ type: "text", text: "more" }] },
  );
  const trimmed = { continued: true, maxTokens: 32000, messages: 2, signatures: new Map([["messages.0.content.0", "SIG2"]]) };
  await b.beforeProviderRequest(full, ctx);
  b.receiveSent(trimmed);
  const refused = BOUND_400.replace("messages.1.content.0", "messages.0.content.0");
  await b.messageEnd(sampleReply({ stopReason: "error", errorMessage: refused, content: [] }), ctx);
  assert.equal(d.calls[1].path, "/v1/release");
  assert.equal((d.calls[1].body as { path: string }).path, "messages.3.content.0");

  await b.beforeProviderRequest(full, ctx);
  b.receiveSent(trimmed);
  const diag = [{ type: "anthropic_input_transformations", details: { transformations: [{ type: "thinking_dropped", path: "messages.0.content.0", reason: "prefix_binding_mismatch" }] } }];
  await b.messageEnd(sampleReply({ diagnostics: diag }), ctx);
  assert.equal(d.calls[3].path, "/v1/accept");
  assert.deepEqual((d.calls[3].body as { inputTransformations: unknown }).inputTransformations, [
    { type: "thinking_dropped", path: "messages.3.content.0", reason: "prefix_binding_mismatch" },
  ]);

  // A refusal whose block is not in the compiled request releases nothing, and says so.
  await b.beforeProviderRequest(full, ctx);
  b.receiveSent({ ...trimmed, signatures: new Map([["messages.0.content.0", "OTHER"]]) });
  await b.messageEnd(sampleReply({ stopReason: "error", errorMessage: refused, content: [] }), ctx);
  assert.equal(d.calls.length, 5, "no release call");
  assert.equal(b.counters.unmapped, 1);
  assert.match(ctx.notes.at(-1)!.message, /could not be placed/);
});

test("pi's own block_binding is left as pi set it", async () => {
  const { withDropBlock } = await import("../src/bridge.js");
  const r = { thinking: { type: "adaptive", block_binding: { prefix_mismatch_behavior: "error" } } };
  assert.equal(withDropBlock(r), r);
});

/** The payload of the next turn: pi's history, the reply and a tool result, the cache marker moved to the end. */
function nextTurn(prev: Record<string, any>): Record<string, any> {
  const p = structuredClone(prev);
  delete p.messages[p.messages.length - 1].content[0].cache_control;
  p.messages.push(
    { role: "assistant", content: [{ type: "thinking", thinking: "t2", signature: "SIG2" }, { type: "tool_use", id: "toolu_2", name: "bash", input: { command: "pwd" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "/w", is_error: false, cache_control: { type: "ephemeral" } }] },
  );
  return p;
}

function digest(messages: unknown[]): string {
  return createHash("sha256").update(messages.map((m) => JSON.stringify(m)).join(",")).digest("hex");
}

test("the next compile goes by reference: the new messages only, the shared ones by their digest, the plan applied to pi's payload", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  let n = 0;
  d.handler = (call, res) => {
    if (call.path !== "/v1/compile") return json(res, 200, { accepted: true });
    n++;
    // the second compile strips SIG1 (messages.1.content.0), a block of the shared part
    const strips = n === 2 ? [{ path: "messages.1.content.0", reason: "released" }] : [];
    json(res, 200, { compileId: `c_${n}`, bound: true, engaged: true, thinkingStripped: strips.length, strips, droppedMessages: [] });
  };
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const first = samplePayload();
  await b.beforeProviderRequest(first, ctx);
  const second = nextTurn(first);
  const out = (await b.beforeProviderRequest(second, ctx)) as Record<string, any>;
  const call = d.calls[1].body;
  // the last message of the first request lost its cache marker: the shared part is the first two
  assert.deepEqual(call.base, { compileId: "c_1", messages: 2, digest: digest(second.messages.slice(0, 2)) });
  assert.deepEqual(call.request.messages, second.messages.slice(2));
  assert.equal(call.request.model, second.model);
  assert.equal(call.return, "plan");
  const want = structuredClone(second);
  want.messages[1].content.shift();
  assert.deepEqual(out, want);
  assert.equal(second.messages[1].content.length, 2, "pi's own payload is not changed in place");
  assert.deepEqual(b.counters, { compiles: 2, accepts: 0, releases: 0, failures: 0, warms: 0, unmapped: 0 });
  // Turn after turn the digest grows from the last one's hash state: each is still the
  // SHA-256 of every shared message's text, and a non-ASCII character counts as UTF-8.
  let prev = second;
  for (let turn = 3; turn <= 6; turn++) {
    const next = nextTurn(prev);
    if (turn === 5) next.messages[next.messages.length - 1].content[0].content = "héllo ✓ \u2028";
    await b.beforeProviderRequest(next, ctx);
    const c = d.calls[d.calls.length - 1].body;
    assert.equal(c.base.messages, prev.messages.length - 1, `turn ${turn}`);
    assert.equal(c.base.digest, digest(next.messages.slice(0, c.base.messages)), `turn ${turn}: digest`);
    prev = next;
  }
  // An edit far back: the shared part ends before it.
  const edited = nextTurn(prev);
  edited.messages[3].content[1].input.command = "rm -rf /";
  await b.beforeProviderRequest(edited, ctx);
  const c = d.calls[d.calls.length - 1].body;
  assert.equal(c.base.messages, 3);
  assert.equal(c.base.digest, digest(edited.messages.slice(0, 3)));
});

test("a base bindery does not hold, or finds different: the same turn compiles in full, nothing failed", async (t) => {
  for (const code of ["base_unknown", "base_mismatch"]) {
    const d = await new StubDaemon().start();
    t.after(() => d.stop());
    let n = 0;
    d.handler = (call, res) => {
      if (call.body.base) return json(res, 409, { error: { code, message: "compile in full" } });
      n++;
      json(res, 200, { compileId: `c_${n}`, bound: true, engaged: true, thinkingStripped: 0, strips: [], droppedMessages: [] });
    };
    const ctx = new FakeCtx();
    const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
    const first = samplePayload();
    await b.beforeProviderRequest(first, ctx);
    const second = nextTurn(first);
    const out = await b.beforeProviderRequest(second, ctx);
    assert.deepEqual(out, second, code);
    assert.equal(d.calls.length, 3, `${code}: the full compile follows the refused one`);
    assert.ok(d.calls[1].body.base && !d.calls[2].body.base, code);
    assert.deepEqual(d.calls[2].body.request, second, code);
    assert.equal(b.counters.failures, 0, code);
    assert.equal(ctx.notes.length, 0, code);
  }
});

test("an old message pi changed ends the shared part before it; another error is a failure, not a second try", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  let n = 0;
  d.handler = (call, res) => {
    n++;
    if (n === 3) return json(res, 500, { error: { code: "internal", message: "boom" } });
    json(res, 200, { compileId: `c_${n}`, bound: true, engaged: true, thinkingStripped: 0, strips: [], droppedMessages: [] });
  };
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const first = samplePayload();
  await b.beforeProviderRequest(first, ctx);
  const second = nextTurn(first);
  second.messages[1].content[1].input.command = "ls -la"; // a pruner's edit of the first reply
  await b.beforeProviderRequest(second, ctx);
  assert.equal(d.calls[1].body.base.messages, 1);
  assert.deepEqual(d.calls[1].body.request.messages, second.messages.slice(1));
  const third = nextTurn(second);
  const out = await b.beforeProviderRequest(third, ctx);
  assert.equal(out, undefined, "failOpen: pi's payload as it is");
  assert.equal(d.calls.length, 3);
  assert.equal(b.counters.failures, 1);
});

test("an unbound answer (a body bindery does not bind) is no base", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  d.handler = (call, res) => json(res, 200, { compileId: "u_1", bound: false, engaged: false, thinkingStripped: 0, strips: [], droppedMessages: [] });
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const first = samplePayload();
  await b.beforeProviderRequest(first, ctx);
  await b.beforeProviderRequest(nextTurn(first), ctx);
  assert.equal(d.calls[1].body.base, undefined);
});

test("pi changing an old message in place (the very object it sent last turn) ends the shared part before it", async (t) => {
  const d = await new StubDaemon().start();
  t.after(() => d.stop());
  let n = 0;
  d.handler = (_call, res) => json(res, 200, { compileId: `c_${++n}`, bound: true, engaged: true, thinkingStripped: 0, strips: [], droppedMessages: [] });
  const ctx = new FakeCtx();
  const b = new BinderyBridge(settingsFor(d.socketPath), uiReporter);
  const p = samplePayload();
  await b.beforeProviderRequest(p, ctx);
  // The same objects again, one of them edited where it lies, and a new message added.
  p.messages[1].content[1].input.command = "ls -la";
  p.messages.push({ role: "user", content: [{ type: "text", text: "and now?" }] });
  await b.beforeProviderRequest(p, ctx);
  const c = d.calls[1].body;
  assert.equal(c.base.messages, 1);
  assert.equal(c.base.digest, digest(p.messages.slice(0, 1)));
  assert.deepEqual(c.request.messages, p.messages.slice(1));
  // Unchanged, the same objects are shared whole (a key pi sets to undefined is no change).
  p.messages[1].content[1].cache_control = undefined;
  p.messages.push({ role: "assistant", content: [{ type: "text", text: "done" }] });
  await b.beforeProviderRequest(p, ctx);
  const c3 = d.calls[2].body;
  assert.equal(c3.base.messages, p.messages.length - 1);
  assert.equal(c3.base.digest, digest(p.messages.slice(0, -1)));
  assert.deepEqual(c3.request.messages, p.messages.slice(-1));
});
