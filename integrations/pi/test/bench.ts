/**
 * `npm run bench`: what a compile adds to each pi request, against the real bindery, for
 * pi-shaped payloads of growing size, next to the simplest baseline in the same run (the
 * JSON.stringify + JSON.parse round trip of the same payload, which any socket client pays).
 * Not a test: prints medians. Needs BINDERY_BIN or a Go toolchain.
 */
import { BinderyBridge } from "../src/bridge.js";
import { defaultSettings } from "../src/settings.js";
import { BinderyProcess, resolveBindery, tempRoot } from "./e2e-support.js";
import { FakeCtx, uiReporter } from "./helpers.js";

function payload(turns: number) {
  const messages: any[] = [{ role: "user", content: [{ type: "text", text: "start" }] }];
  for (let i = 0; i < turns; i++) {
    messages.push({
      role: "assistant",
      content: [
        { type: "thinking", thinking: `reasoning ${i} `.repeat(40), signature: `SIG${i}-${"x".repeat(400)}` },
        { type: "tool_use", id: `toolu_${i}`, name: "bash", input: { command: `cat file${i}.go` } },
      ],
    });
    messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${i}`, content: `package main // ${i}\n`.repeat(60), is_error: false }] });
  }
  return { model: "claude-fable-5-2", max_tokens: 32000, stream: true, system: [{ type: "text", text: "You are pi." }], thinking: { type: "enabled", budget_tokens: 16384 }, messages };
}

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const r = await resolveBindery();
if (!("bin" in r)) {
  console.log(`bench skipped: ${"skip" in r ? r.skip : r.error}`);
  process.exit(0);
}
const d = new BinderyProcess(r.bin, tempRoot());
await d.start();
try {
  const bridge = new BinderyBridge({ ...defaultSettings({}, "/h"), socketPath: d.socketPath, compileTimeoutMs: 60_000 }, uiReporter);
  console.log("turns  bytes      compile(ms)  json round trip(ms)");
  for (const turns of [10, 100, 1000]) {
    const p = payload(turns);
    const bytes = JSON.stringify(p).length;
    const ctx = new FakeCtx();
    ctx.sessionId = `bench-${turns}`;
    const compile: number[] = [];
    const base: number[] = [];
    for (let i = 0; i < 15; i++) {
      let t0 = performance.now();
      const out = await bridge.beforeProviderRequest(p, ctx);
      compile.push(performance.now() - t0);
      if (!out) throw new Error(`compile failed: ${bridge.lastError()}`);
      t0 = performance.now();
      JSON.parse(JSON.stringify(p));
      base.push(performance.now() - t0);
    }
    console.log(`${String(turns).padEnd(6)} ${String(bytes).padEnd(10)} ${median(compile).toFixed(2).padEnd(12)} ${median(base).toFixed(2)}`);
  }
} finally {
  await d.stop();
}
