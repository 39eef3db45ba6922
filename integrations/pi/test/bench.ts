/**
 * `npm run bench`: what a compile adds to each pi request, against the real bindery, for
 * pi-shaped payloads of growing size, by reference (the extension's way) and in full, next
 * to the simplest baseline in the same run (the JSON.stringify + JSON.parse round trip of
 * the same payload, which any socket client pays).
 * Not a test: prints medians. Needs BINDERY_BIN or a Go toolchain.
 */
import { BinderyBridge } from "../src/bridge.js";
import { defaultSettings } from "../src/settings.js";
import { BinderyProcess, resolveBindery, tempRoot } from "./e2e-support.js";
import { FakeCtx, sampleReply, uiReporter } from "./helpers.js";

function payload(turns: number) {
  const messages: any[] = [{ role: "user", content: [{ type: "text", text: "start" }] }];
  for (let i = 0; i < turns; i++) messages.push(...turn(i));
  return { model: "claude-fable-5-2", max_tokens: 32000, stream: true, system: [{ type: "text", text: "You are pi." }], thinking: { type: "enabled", budget_tokens: 16384 }, messages };
}

/** A reply of turn(): as pi's assistant message. */
function piReply(wire: any): any {
  const [th, tu] = wire.content;
  return sampleReply({
    content: [
      { type: "thinking", thinking: th.thinking, thinkingSignature: th.signature },
      { type: "toolCall", id: tu.id, name: tu.name, arguments: tu.input },
    ],
  });
}

/** One more turn: the model's reply and the tool's result. */
function turn(i: number): any[] {
  return [
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: `reasoning ${i} `.repeat(40), signature: `SIG${i}-${"x".repeat(400)}` },
        { type: "tool_use", id: `toolu_${i}`, name: "bash", input: { command: `cat file${i}.go` } },
      ],
    },
    { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${i}`, content: `package main // ${i}\n`.repeat(60), is_error: false }] },
  ];
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
  // Two sessions grow the same history turn by turn, each turn compiled and accepted (as
  // pi's message_end does, so its thinking is stamped and kept next turn, as in a real
  // session): one by reference to its turn before (the extension's way, every turn after
  // a run's first), one in full (its base cleared each turn, as after base_unknown). Their
  // turns interleave, each next to the baseline measured just before it.
  console.log("turns  bytes      by-ref(ms)  full(ms)  json round trip(ms)  by-ref/json  full/json");
  for (const turns of [10, 100, 400, 1000]) {
    const session = (how: "by-ref" | "full") => {
      const bridge = new BinderyBridge({ ...defaultSettings({}, "/h"), socketPath: d.socketPath, compileTimeoutMs: 60_000 }, uiReporter);
      const ctx = new FakeCtx();
      ctx.sessionId = `bench-${how}-${turns}`;
      let p = payload(0);
      let next = 0;
      return {
        get next() {
          return next;
        },
        get payload() {
          return p;
        },
        async step(growing = false): Promise<number> {
          if (how === "full" && !growing) (bridge as unknown as { session?: { base?: unknown } }).session!.base = undefined;
          const t0 = performance.now();
          const out = await bridge.beforeProviderRequest(p, ctx);
          const ms = performance.now() - t0;
          if (!out) throw new Error(`compile failed: ${bridge.lastError()}`);
          const t = turn(next++);
          await bridge.messageEnd(piReply(t[0]), ctx);
          await bridge.settle();
          p = { ...p, messages: [...p.messages, ...t] };
          return ms;
        },
        close: () => bridge.client.close(),
      };
    };
    const byRefSession = session("by-ref");
    const fullSession = session("full");
    // Both grown to size by reference (cheaper); the full session's measured turns clear its base.
    while (byRefSession.next < turns) {
      await byRefSession.step(true);
      await fullSession.step(true);
    }
    const byRef: number[] = [];
    const full: number[] = [];
    const base: number[] = [];
    const jsonRoundTrip = (p: unknown) => {
      const t0 = performance.now();
      JSON.parse(JSON.stringify(p));
      base.push(performance.now() - t0);
    };
    for (let i = 0; i < 15; i++) {
      jsonRoundTrip(byRefSession.payload);
      byRef.push(await byRefSession.step());
      jsonRoundTrip(fullSession.payload);
      full.push(await fullSession.step());
    }
    const bytes = JSON.stringify(byRefSession.payload).length;
    byRefSession.close();
    fullSession.close();
    const [r, f, j] = [median(byRef), median(full), median(base)];
    console.log(
      `${String(turns).padEnd(6)} ${String(bytes).padEnd(10)} ${r.toFixed(2).padEnd(11)} ${f.toFixed(2).padEnd(9)} ${j.toFixed(2).padEnd(20)} ${(r / j).toFixed(2).padEnd(12)} ${(f / j).toFixed(2)}`,
    );
  }
} finally {
  await d.stop();
}
