import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { installDropBlockHeader } from "../src/beta-header.js";

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
