/**
 * Cases real pi cannot reach in print mode, driven by a harness that fires pi's events in
 * pi's order and shapes (session_start, before_provider_request with pi's payload,
 * message_end with pi's AssistantMessage) through the extension's bridge, against the real
 * bindery and the fake Anthropic server:
 * - /tree: moving the leaf back within one session file and growing a sibling branch, then
 *   returning to the first branch (interactive only; print mode can only --fork);
 * - a lost accept (pi killed between the response and the accept): bindery must attribute
 *   the reply by its prefix;
 * - the footer line and notices pi's interactive UI would show;
 * - a 400 and a drop named in a trimmed thread continue (pi 1.6's message threads), where
 *   the trimmed list holds thinking: pi continues from an older reply than the last (as it
 *   does when the last reply came from a create it could not record, e.g. one a fallback
 *   model answered) and an extension loaded after pi-bindery edited a message in the tail.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BinderyBridge } from "../src/bridge.js";
import { defaultSettings } from "../src/settings.js";
import { FakeAnthropic, THREADS_BETA, BETA } from "./fake-anthropic.js";
import { sentShape } from "../src/sent-request.js";
import { BinderyProcess, binderyForTests, tempRoot } from "./e2e-support.js";
import { FakeCtx, uiReporter } from "./helpers.js";

const { bin, skip, error } = await binderyForTests("harness");

type Block = Record<string, any>;
interface Entry {
  id: string;
  parent: string | null;
  wire: { role: string; content: Block[] };
}

/** Parses the fake's SSE answer into the wire reply and pi's AssistantMessage for it. */
async function callProvider(baseUrl: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${baseUrl}/v1/messages`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });
  const text = await res.text();
  if (res.status !== 200) {
    return { status: res.status, pi: { role: "assistant", content: [], model: (body as any).model, stopReason: "error", errorMessage: `${res.status} ${JSON.parse(text).error.message}` } };
  }
  const blocks: Block[] = [];
  let stop = "";
  let transformations: unknown[] | undefined;
  for (const chunk of text.split("\n\n")) {
    const data = chunk.split("\n").find((l) => l.startsWith("data: "));
    if (!data) continue;
    const ev = JSON.parse(data.slice(6));
    if (ev.type === "content_block_start") blocks[ev.index] = { ...ev.content_block };
    if (ev.type === "content_block_delta") {
      const b = blocks[ev.index];
      if (ev.delta.type === "thinking_delta") b.thinking += ev.delta.thinking;
      if (ev.delta.type === "signature_delta") b.signature += ev.delta.signature;
      if (ev.delta.type === "text_delta") b.text += ev.delta.text;
      if (ev.delta.type === "input_json_delta") b.input = JSON.parse(ev.delta.partial_json);
    }
    if (ev.type === "message_delta") stop = ev.delta.stop_reason;
    if (ev.type === "message_start" && Array.isArray(ev.message.input_transformations)) transformations = ev.message.input_transformations;
  }
  // pi's shape, as pi-ai's Anthropic provider builds it from these events.
  const piContent = blocks.map((b) =>
    b.type === "thinking"
      ? { type: "thinking", thinking: b.thinking, thinkingSignature: b.signature }
      : b.type === "redacted_thinking"
        ? { type: "thinking", thinking: "[Reasoning redacted]", thinkingSignature: b.data, redacted: true }
        : b.type === "tool_use"
          ? { type: "toolCall", id: b.id, name: b.name, arguments: b.input }
          : { type: "text", text: b.text },
  );
  return {
    status: 200,
    wire: { role: "assistant", content: blocks },
    pi: {
      role: "assistant",
      content: piContent,
      model: (body as any).model,
      stopReason: stop === "tool_use" ? "toolUse" : "stop",
      usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0 },
      // pi 1.x records non-empty input_transformations as a diagnostic on the message.
      ...(transformations?.length ? { diagnostics: [{ type: "anthropic_input_transformations", details: { transformations } }] } : {}),
    },
  };
}

/** A pi-like host: a session tree of wire messages, a leaf, and pi's request loop. */
class Host {
  entries = new Map<string, Entry>();
  leaf: string | null = null;
  n = 0;
  ctx = new FakeCtx();
  /** When set, message_end is not delivered (pi died before the accept). */
  dropAccept = false;
  constructor(
    readonly bridge: BinderyBridge,
    readonly baseUrl: string,
  ) {
    this.ctx.sessionId = `harness-${Math.random().toString(36).slice(2)}`;
    this.ctx.file = undefined; // no session file: bindery works from the requests alone
    this.ctx.leaf = null;
    bridge.sessionStart(this.ctx);
  }

  private append(wire: Entry["wire"]): void {
    const id = `e${++this.n}`;
    this.entries.set(id, { id, parent: this.leaf, wire });
    this.setLeaf(id);
  }

  /** Moves the leaf (an append, or /tree) and pi's getBranch() with it. */
  setLeaf(id: string | null): void {
    this.leaf = id;
    this.ctx.leaf = id;
    this.ctx.branchPath = this.path().map((e) => e.id);
  }

  path(): Entry[] {
    const out: Entry[] = [];
    for (let id = this.leaf; id; id = this.entries.get(id)!.parent) out.unshift(this.entries.get(id)!);
    return out;
  }

  /** pi's payload: system and tools first, the branch's messages, a cache marker on the last user block. */
  payload(): Record<string, any> {
    const messages = structuredClone(this.path().map((e) => e.wire));
    const last = messages.at(-1)!;
    last.content.at(-1)!.cache_control = { type: "ephemeral" };
    return {
      model: "claude-fable-5-2",
      max_tokens: 32000,
      stream: true,
      system: [{ type: "text", text: "You are pi (harness).", cache_control: { type: "ephemeral" } }],
      tools: [{ name: "bash", description: "run a command", input_schema: { type: "object", properties: { command: { type: "string" } } } }],
      thinking: { type: "enabled", budget_tokens: 16384 },
      messages,
    };
  }

  /** One prompt: user message, then requests until the model stops calling tools. */
  async prompt(text: string): Promise<number[]> {
    this.append({ role: "user", content: [{ type: "text", text }] });
    const statuses: number[] = [];
    for (;;) {
      const payload = this.payload();
      const sent = (await this.bridge.beforeProviderRequest(payload, this.ctx)) ?? payload;
      const r = await callProvider(this.baseUrl, sent);
      statuses.push(r.status);
      if (!this.dropAccept) await this.bridge.messageEnd(r.pi, this.ctx);
      if (r.status !== 200) return statuses;
      this.append(r.wire as Entry["wire"]);
      const tu = r.wire!.content.find((b) => b.type === "tool_use");
      if (!tu) return statuses;
      this.append({ role: "user", content: [{ type: "tool_result", tool_use_id: tu.id, content: `ran ${tu.input.command}`, is_error: false }] });
    }
  }
}

describe("harness: pi's events in pi's order, real bindery, fake Anthropic", { skip }, () => {
  let fake: FakeAnthropic;
  let d: BinderyProcess;
  let bridge: BinderyBridge;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeAnthropic();
    await fake.start();
    d = new BinderyProcess(bin, tempRoot());
    await d.start();
    bridge = new BinderyBridge({ ...defaultSettings({}, "/h"), socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000 }, uiReporter);
  });
  after(async () => {
    await d?.stop();
    await fake?.stop();
  });

  test("/tree: a sibling branch in the same session keeps the shared thinking; the first branch keeps its own", async () => {
    const h = new Host(bridge, fake.baseUrl);
    const from = fake.requests.length;
    await h.prompt("shared tools:1");
    const forkPoint = h.leaf;
    const shared = fake.requests.slice(from).flatMap((r) => r.minted);
    await h.prompt("branch A tools:1");
    const leafA = h.leaf;
    const aReqs = fake.requests.slice(from);
    const mintedA = aReqs.flatMap((r) => r.minted);
    // /tree back to the end of the shared turn; the next prompt grows a sibling.
    h.setLeaf(forkPoint);
    const mB = fake.requests.length;
    await h.prompt("branch B tools:1");
    const bReqs = fake.requests.slice(mB);
    assert.deepEqual(bReqs[0].signatures, shared, "the sibling replays the shared thinking");
    const mintedB = bReqs.flatMap((r) => r.minted);
    // Back to branch A.
    h.setLeaf(leafA);
    const mA2 = fake.requests.length;
    await h.prompt("A again");
    const last = fake.requests[mA2];
    assert.deepEqual(last.signatures, mintedA, "branch A replays its own thinking");
    for (const s of mintedB) assert.ok(!last.signatures.includes(s));
    assert.deepEqual(fake.requests.slice(from).filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), []);
    assert.match(h.ctx.status!, /^bindery ✓ thinking kept \d+ · stripped 0$/);
  });

  // binding.md: a reply whose accept never arrived is stamped by attribution by prefix from
  // the remembered compile it answered. Without a session file (pi --no-session, as this
  // harness) the next compile is at a new leaf naming the old one as `parent`: bindery looks
  // for that compile on the parent branch.
  test("a lost accept without a session file: the reply is attributed by its prefix", async () => {
    const h = new Host(bridge, fake.baseUrl);
    const from = fake.requests.length;
    await h.prompt("one tools:1");
    h.dropAccept = true;
    await h.prompt("two");
    h.dropAccept = false;
    await h.prompt("three");
    const reqs = fake.requests.slice(from);
    assert.deepEqual(reqs.filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), []);
    const all = reqs.slice(0, -1).flatMap((r) => r.minted);
    assert.deepEqual(reqs.at(-1)!.signatures, all, "replies whose accept never came are still replayed");
  });

  test("the interactive footer and notices: a refusal, the release, the clean retry", async () => {
    const h = new Host(bridge, fake.baseUrl);
    await h.prompt("one tools:1");
    // Another extension edits the first message after bindery compiled (loaded after it).
    const orig = h.bridge.beforeProviderRequest.bind(h.bridge);
    h.bridge.beforeProviderRequest = async (p: unknown, ctx) => {
      const out: any = (await orig(p, ctx)) ?? p;
      const edited = structuredClone(out);
      edited.messages[0].content[0].text += " [edited after bindery]";
      return edited;
    };
    try {
      const st = await h.prompt("two");
      assert.deepEqual(st, [400]);
      assert.equal(h.ctx.notes.length, 1);
      assert.match(h.ctx.notes[0].message, /refused the thinking block at messages\.1\.content\.0.*next request goes through clean/);
      // pi drops the error message from what it sends; the user sends again.
      const again = await h.prompt("two, again");
      assert.ok(again.every((s) => s === 200), `clean after the release: ${again}`);
      assert.match(h.ctx.status!, /^bindery ✓ thinking kept \d+ · stripped [1-9]/);
    } finally {
      h.bridge.beforeProviderRequest = orig;
    }
  });

  for (const mode of ["error", "drop_block"] as const) {
    test(`thread continue: a ${mode === "error" ? "400" : "drop"} named in the trimmed list lands on the compiled request's block`, async () => {
      const h = new Host(bridge, fake.baseUrl);
      const headers = { "anthropic-beta": `${THREADS_BETA},${BETA}` };
      const withMode = (p: Record<string, any>) =>
        mode === "drop_block" ? { ...p, thinking: { ...p.thinking, block_binding: { prefix_mismatch_behavior: "drop_block" } } } : p;
      // Sends like pi-ai: the payload hook on the full request, then the body trimmed to a
      // continue (system, tools and the first `keep` messages left out); the fetch wrapper
      // hands the body's shape to the bridge.
      const send = async (thread: { create: true } | { continueFrom: string; keep: number }, edit?: (full: any) => void) => {
        const payload = withMode(h.payload());
        const out: any = structuredClone((await h.bridge.beforeProviderRequest(payload, h.ctx)) ?? payload);
        edit?.(out); // an extension loaded after pi-bindery
        let body: any;
        if ("create" in thread) body = { ...out, thread: { type: "create" } };
        else {
          const { system: _s, tools: _t, ...rest } = out;
          body = { ...rest, messages: out.messages.slice(thread.keep), thread: { type: "continue", previous_message_id: thread.continueFrom } };
        }
        const text = JSON.stringify(body);
        h.bridge.receiveSent(sentShape(text));
        const r = await callProvider(h.baseUrl, body, headers);
        await h.bridge.messageEnd(r.pi, h.ctx);
        return { r, rec: fake.requests.at(-1)!, full: out };
      };
      const appendReply = (r: Awaited<ReturnType<typeof send>>["r"]) => (h as any).append(r.wire);
      (h as any).append({ role: "user", content: [{ type: "text", text: "one tools:1" }] });
      const a = await send({ create: true });
      assert.equal(a.r.status, 200);
      const t1 = a.rec.minted[0];
      const threadA = a.rec.responseId!;
      appendReply(a.r);
      const tu = a.r.wire!.content.find((b: any) => b.type === "tool_use");
      (h as any).append({ role: "user", content: [{ type: "tool_result", tool_use_id: tu!.id, content: "ran it", is_error: false }] });
      const b = await send({ create: true });
      assert.equal(b.r.status, 200);
      const t2 = b.rec.minted[0];
      appendReply(b.r);
      (h as any).append({ role: "user", content: [{ type: "text", text: "three" }] });
      // Continue thread A (it holds [user, reply A]): the trimmed list is [tool_result, reply B, user].
      // The tail edit makes reply B's block stale; reply A's block (kept by the thread) is not.
      // The extension edits that tool result in every request from now on.
      const edit = (full: any) => void (full.messages[2].content[0].content = "ran it [edited after bindery]");
      const c = await send({ continueFrom: threadA, keep: 2 }, edit);
      assert.equal(c.rec.offset, 2);
      assert.deepEqual(c.rec.signatures, [t2], "the trimmed list carries reply B's block");
      if (mode === "error") {
        assert.equal(c.r.status, 400);
        assert.match(c.rec.verdict.error!, /^messages\.1\.content\.0: .*bound to a different conversation/, "the provider counts from the trimmed list");
      } else {
        assert.equal(c.r.status, 200);
        assert.deepEqual(c.rec.verdict.transformations.map((x) => x.path), ["messages.1.content.0"]);
        appendReply(c.r);
        (h as any).append({ role: "user", content: [{ type: "text", text: "four" }] });
      }
      await h.bridge.settle();
      // The next full request: bindery released reply B's block (messages.3.content.0 of the
      // compiled request), not reply A's (messages.1.content.0, what the unmapped path names).
      const next = await send({ create: true }, edit);
      assert.equal(next.r.status, 200, JSON.stringify(next.rec.verdict));
      assert.ok(next.rec.signatures.includes(t1), "reply A's block is still replayed");
      assert.ok(!next.rec.signatures.includes(t2), "reply B's block, the one the provider named, is released");
      assert.deepEqual(next.rec.verdict.transformations, []);
      assert.equal(h.bridge.counters.unmapped, 0);
    });
  }
});
