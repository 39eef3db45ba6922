import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { installDropBlockHeader, onInputTransformations } from "../src/beta-header.js";

test("the drop_block beta rides only on Messages requests that carry block_binding", async (t) => {
  const seen: { url: string; beta: string | undefined }[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? "", beta: req.headers["anthropic-beta"] as string | undefined });
    req.resume();
    req.on("end", () => res.end("{}"));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  installDropBlockHeader();
  installDropBlockHeader(); // idempotent: one wrapper
  const withBinding = JSON.stringify({ thinking: { type: "enabled", block_binding: { prefix_mismatch_behavior: "drop_block" } } });
  await fetch(`${base}/v1/messages`, { method: "POST", body: withBinding, headers: { "anthropic-beta": "interleaved-thinking-2025-05-14" } });
  await fetch(`${base}/v1/messages?beta=true`, { method: "POST", body: withBinding });
  await fetch(`${base}/v1/messages`, { method: "POST", body: withBinding, headers: { "anthropic-beta": "thinking-binding-controls-2026-08-01" } });
  await fetch(`${base}/v1/messages`, { method: "POST", body: JSON.stringify({ thinking: { type: "enabled" } }), headers: { "anthropic-beta": "x" } });
  await fetch(`${base}/v1/other`, { method: "POST", body: withBinding });
  assert.deepEqual(seen, [
    { url: "/v1/messages", beta: "interleaved-thinking-2025-05-14,thinking-binding-controls-2026-08-01" },
    { url: "/v1/messages?beta=true", beta: "thinking-binding-controls-2026-08-01" },
    { url: "/v1/messages", beta: "thinking-binding-controls-2026-08-01" },
    { url: "/v1/messages", beta: "x" },
    { url: "/v1/other", beta: undefined },
  ]);
});

test("input_transformations are read from a copy of the stream; pi's copy is byte for byte the same", async (t) => {
  const dropped = [{ type: "thinking_dropped", path: "messages.1.content.0", reason: "prefix_binding_mismatch" }];
  const later = [{ type: "thinking_dropped", path: "messages.3.content.0", reason: "model_binding_mismatch" }];
  const sse =
    `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { id: "m", input_transformations: dropped, usage: {} } })}\n\n` +
    `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n` +
    `event: message_delta\ndata: ${JSON.stringify({ type: "message_delta", delta: { stop_reason: "end_turn" }, input_transformations: later, usage: {} })}\n\n` +
    `event: message_stop\ndata: {"type":"message_stop"}\n\n`;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      // in small pieces, splitting events across chunks
      for (let i = 0; i < sse.length; i += 7) res.write(sse.slice(i, i + 7));
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const got: unknown[][] = [];
  const arrived = new Promise<void>((r) => onInputTransformations((x) => (got.push(x), r())));
  installDropBlockHeader();
  const body = JSON.stringify({ thinking: { type: "enabled", block_binding: { prefix_mismatch_behavior: "drop_block" } } });
  const res = await fetch(`${base}/v1/messages`, { method: "POST", body });
  assert.equal(await res.text(), sse);
  await arrived;
  // After a server-side fallback the final message_delta's array is the one that counts.
  assert.deepEqual(got, [later]);
  // An untagged request is not read.
  await (await fetch(`${base}/v1/messages`, { method: "POST", body: "{}" })).text();
  assert.equal(got.length, 1);
});
