/**
 * A fake Anthropic Messages API for tests, judging thinking blocks by the rules in
 * shared/research/preserved-thinking.md (sections 1-2, 8), as an enforced account on a
 * binding model (Fable 5.2: a prefix mismatch is a 400 unless the request says drop_block):
 *
 * - Each signature it mints binds the block to its prefix: a digest of `system`, the
 *   non-deferred `tools` and every message before the block (values, not bytes: key order
 *   ignored, `cache_control` markers ignored, thinking blocks excluded), the block's own
 *   text, the thinking block the model read just before it, and the response it came from.
 *   The signature is HMAC-protected: a changed signature or thinking text is a bad-signature
 *   400 in every mode.
 * - A block whose prefix changed, or whose predecessor is not the block kept just before it
 *   (a gap, a reorder, a re-insertion), fails: 400 naming `messages.N.content.M` of the
 *   first failing block, or with drop_block, that block and every later one dropped and
 *   reported in `input_transformations`.
 * - The latest assistant message's thinking run must be all of what the model emitted, or none.
 * - `thinking.block_binding` without the `thinking-binding-controls-2026-08-01` beta is a 400.
 *
 * - Message threads (beta `message-threads-2026-08-12`, the provider's "Message threads" page):
 *   `thread: {type: "create"}` stores the conversation (system, tools, the messages as the
 *   model read them, and the reply) under the response id; `thread: {type: "continue",
 *   previous_message_id}` sends only the messages since, without system and tools. The fake
 *   judges the RECONSTRUCTED conversation, and names paths (in a 400 and in
 *   input_transformations) counting from the start of the messages actually sent. A thread
 *   expires 5 minutes after its last request (`expiryMs`, against the injectable `now()`);
 *   each reply can be continued once; a continue it cannot serve is a 404 with
 *   `error.details.error_code` (`thread_not_found`, `thread_already_continued`), which pi
 *   answers by replaying the request with `create`.
 * - A request with `max_tokens: 1` (pi's cache warming) gets one text token and
 *   `stop_reason: "max_tokens"`, no thinking.
 *
 * Replies are scripted by the last user text: `tools:K` runs K tool rounds (bash echo)
 * before the final text, `double` emits two thinking blocks per reply, `redacted` makes the
 * first one redacted_thinking. Every reply's final text says how many thinking blocks it read.
 */
import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export const BETA = "thinking-binding-controls-2026-08-01";
export const THREADS_BETA = "message-threads-2026-08-12";
const KEY = "fake-anthropic-signing-key";

type Json = any;
type Block = { type: string; [k: string]: Json | undefined };
type Message = { role: string; content: string | Block[]; [k: string]: Json | undefined };

interface Sig {
  r: string; // response id
  i: number; // index of the block among the response's thinking blocks
  n: number; // thinking blocks in that response
  p: string; // prefix digest
  q: string; // digest of the predecessor block's signature, "" if none
  m: string; // minting model
  t: string; // digest of the thinking text
}

export interface Verdict {
  status: number;
  /** The 400's message, when status is 400. */
  error?: string;
  /** Kind of refusal: prefix (bound to a different conversation), signature, latest, beta. */
  refusal?: "prefix" | "signature" | "latest" | "beta";
  thinkingSent: number;
  /** Blocks the model read (sent minus dropped). */
  thinkingRead: number;
  transformations: { type: string; path: string; reason: string }[];
  /**
   * The most blocks any choice among the sent ones could have had read: walking them in
   * order, keeping each block whose prefix holds and whose predecessor is the last kept.
   * What a perfect replayer achieves with the blocks the host had.
   */
  maxReadable: number;
}

export interface Recorded {
  body: any;
  headers: Record<string, string | string[] | undefined>;
  verdict: Verdict;
  /** Signatures of every thinking block in the request, in order. */
  signatures: string[];
  /** Signatures the reply minted. */
  minted: string[];
  /** The request's `thread` field, if any. */
  thread?: { type: string; previous_message_id?: string };
  /** Messages of the conversation the continue built on (0 without a continue). */
  offset: number;
  /** The conversation judged: the body, or for a continue the thread's stored one plus the body. */
  full: any;
  /** Signatures of every thinking block in the reconstructed conversation, in order. */
  fullSignatures: string[];
  /** A cache-warming request (max_tokens 1). */
  warm: boolean;
  /** The response id (message id) of a reply. */
  responseId?: string;
  /** The reply's stop_reason and its text, when it ended the turn. */
  stopReason?: string;
  finalText?: string;
}

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const short = (s: string) => sha(s).slice(0, 24);

/** JSON with keys sorted: the provider compares values, not bytes. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

const isThinking = (b: Block) => b?.type === "thinking" || b?.type === "redacted_thinking";

function unmark(b: Block): Block {
  const { cache_control: _c, ...rest } = b;
  if (rest.type === "tool_result" && Array.isArray(rest.content)) {
    rest.content = (rest.content as Block[]).map((x) => (x && typeof x === "object" ? unmark(x) : x)) as Json;
  }
  return rest as Block;
}

function normMessage(m: Message, upTo?: number): unknown {
  const { content, ...rest } = m;
  if (typeof content === "string") return { ...rest, content };
  if (!Array.isArray(content)) return { ...rest };
  const blocks = (upTo === undefined ? content : content.slice(0, upTo)).filter((b) => !isThinking(b)).map(unmark);
  return { ...rest, content: blocks };
}

function seedOf(body: any): unknown {
  const system = Array.isArray(body.system) ? body.system.map(unmark) : body.system ?? null;
  const tools = Array.isArray(body.tools) ? body.tools.filter((t: any) => !t.defer_loading).map(unmark) : [];
  return { system, tools };
}

/** Digest of everything before content index `m` of message `n` (m = content length for "after all"). */
function prefixDigest(body: any, messages: Message[], n: number, m: number): string {
  const before = messages.slice(0, n).map((x) => normMessage(x));
  const cur = normMessage(messages[n], m);
  return short(canonical({ seed: seedOf(body), before, cur }));
}

function encodeSig(s: Sig): string {
  const payload = Buffer.from(JSON.stringify(s)).toString("base64url");
  const mac = createHmac("sha256", KEY).update(payload).digest("base64url");
  return `${payload}.${mac}`;
}

function decodeSig(sig: unknown): Sig | undefined {
  if (typeof sig !== "string") return undefined;
  const [payload, mac] = sig.split(".");
  if (!payload || !mac) return undefined;
  if (createHmac("sha256", KEY).update(payload).digest("base64url") !== mac) return undefined;
  try {
    return JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Sig;
  } catch {
    return undefined;
  }
}

const sigOf = (b: Block) => (b.type === "thinking" ? b.signature : b.data) as string;
const textOf = (b: Block) => (b.type === "thinking" ? String(b.thinking ?? "") : "");

const BOUND = (path: string, beta: boolean) =>
  `${path}: Invalid \`signature\` in \`thinking\` block. The block is bound to a different conversation. Remove the block, or set \`thinking.block_binding.prefix_mismatch_behavior\` to "drop_block".` +
  (beta ? "" : ` That setting requires the \`${BETA}\` value in the \`anthropic-beta\` header.`);

interface Judged {
  verdict: Verdict;
  /** Signature of the last block the model read, for the reply's predecessor. */
  lastRead: string | undefined;
}

/**
 * Judges `body` (for a continue, the reconstructed conversation); paths are reported
 * counting from message `offset` (the first message the request actually sent).
 */
export function judge(body: any, headers: Record<string, string | string[] | undefined>, offset = 0): Judged {
  const at = (n: number, m: number) => `messages.${n - offset}.content.${m}`;
  const betaHeader = String(headers["anthropic-beta"] ?? "").split(",").map((s) => s.trim());
  const hasBeta = betaHeader.includes(BETA);
  const messages: Message[] = Array.isArray(body?.messages) ? body.messages : [];
  const blocks: { n: number; m: number; b: Block }[] = [];
  messages.forEach((msg, n) => {
    if (Array.isArray(msg.content)) msg.content.forEach((b, m) => isThinking(b) && blocks.push({ n, m, b }));
  });
  const base = { thinkingSent: blocks.length, thinkingRead: 0, transformations: [] as Verdict["transformations"], maxReadable: 0 };
  const refuse = (refusal: Verdict["refusal"], error: string): Judged => ({
    verdict: { ...base, status: 400, error, refusal },
    lastRead: undefined,
  });

  const binding = body?.thinking?.block_binding;
  if (binding !== undefined && !hasBeta) return refuse("beta", "thinking.block_binding: Extra inputs are not permitted");
  const mode: string = binding?.prefix_mismatch_behavior ?? "error";

  const sigs: Sig[] = [];
  for (const { n, m, b } of blocks) {
    const s = decodeSig(sigOf(b));
    if (!s || (b.type === "thinking" && s.t !== short(textOf(b)))) {
      return refuse("signature", `${at(n, m)}: Invalid \`signature\` in \`thinking\` block.`);
    }
    sigs.push(s);
  }

  // The latest assistant message's run: all of what the model emitted, in order, or nothing.
  let latest = -1;
  messages.forEach((msg, n) => msg.role === "assistant" && (latest = n));
  const inLatest = blocks.map((x, k) => ({ ...x, s: sigs[k] })).filter((x) => x.n === latest);
  if (inLatest.length > 0) {
    const r = inLatest[0].s.r;
    const whole = inLatest.length === inLatest[0].s.n && inLatest.every((x, k) => x.s.r === r && x.s.i === k);
    if (!whole) {
      return refuse(
        "latest",
        `${at(latest, inLatest[0].m)}: thinking or redacted_thinking blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response.`,
      );
    }
  }

  // The provider's maximum: skip a failing block instead of stopping at it.
  let best: string | undefined;
  for (let k = 0; k < blocks.length; k++) {
    const { n, m, b } = blocks[k];
    if (sigs[k].p === prefixDigest(body, messages, n, m) && (best === undefined || sigs[k].q === short(best))) {
      best = sigOf(b);
      base.maxReadable++;
    }
  }

  let prev: string | undefined;
  let read = 0;
  for (let k = 0; k < blocks.length; k++) {
    const { n, m, b } = blocks[k];
    const s = sigs[k];
    const prefixOk = s.p === prefixDigest(body, messages, n, m);
    const runOk = prev === undefined || s.q === short(prev);
    if (prefixOk && runOk) {
      prev = sigOf(b);
      read++;
      continue;
    }
    if (mode !== "drop_block") return refuse("prefix", BOUND(at(n, m), hasBeta));
    for (let j = k; j < blocks.length; j++) {
      base.transformations.push({ type: "thinking_dropped", path: at(blocks[j].n, blocks[j].m), reason: "prefix_binding_mismatch" });
    }
    break;
  }
  return { verdict: { ...base, status: 200, thinkingRead: read }, lastRead: prev };
}

function lastUserText(messages: Message[]): { index: number; text: string } {
  for (let n = messages.length - 1; n >= 0; n--) {
    const msg = messages[n];
    if (msg.role !== "user") continue;
    if (typeof msg.content === "string") return { index: n, text: msg.content };
    const t = msg.content.filter((b) => b.type === "text").map((b) => String(b.text));
    if (t.length > 0) return { index: n, text: t.join("\n") };
  }
  return { index: -1, text: "" };
}

interface ReplyPlan {
  blocks: Block[];
  stopReason: string;
}

let responseCounter = 0;

/** Scripted reply to a judged request; mints the signatures binding its thinking. */
export function reply(body: any, lastRead: string | undefined, verdict: Verdict): ReplyPlan {
  const messages: Message[] = body.messages;
  const { index, text } = lastUserText(messages);
  const rounds = Number(/tools:(\d+)/.exec(text)?.[1] ?? 0);
  let done = 0;
  for (let n = index + 1; n < messages.length; n++) {
    const c = messages[n].content;
    if (messages[n].role === "user" && Array.isArray(c)) done += c.filter((b) => b.type === "tool_result").length;
  }
  const id = `msg_fake_${++responseCounter}`;
  const count = /\bdouble\b/.test(text) ? 2 : 1;
  const redacted = /\bredacted\b/.test(text);
  const finalBlock: Block =
    done < rounds
      ? { type: "tool_use", id: `toolu_fake_${responseCounter}`, name: "bash", input: { command: `echo round-${done + 1}` } }
      : { type: "text", text: `done: read ${verdict.thinkingRead} of ${verdict.thinkingSent} thinking blocks` };
  const out: Block[] = [];
  let prev = lastRead;
  const replyMsg: Message = { role: "assistant", content: out };
  const all = [...messages, replyMsg];
  for (let i = 0; i < count; i++) {
    const isRedacted = redacted && i === 0;
    const thinking = isRedacted ? "" : `thinking ${id} #${i} about: ${text.slice(0, 40)}`;
    const s: Sig = {
      r: id,
      i,
      n: count,
      p: prefixDigest(body, all, all.length - 1, out.length),
      q: prev === undefined ? "" : short(prev),
      m: String(body.model),
      t: short(thinking),
    };
    const sig = encodeSig(s);
    out.push(isRedacted ? { type: "redacted_thinking", data: sig } : { type: "thinking", thinking, signature: sig });
    prev = sig;
  }
  out.push(finalBlock);
  return { blocks: out, stopReason: finalBlock.type === "tool_use" ? "tool_use" : "end_turn" };
}

function sse(res: ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

/** A thread as the provider stores it: the conversation as the model read it, and its reply. */
interface StoredThread {
  system: unknown;
  tools: unknown;
  model: string;
  /** Messages the model read (dropped thinking removed), then the reply. */
  messages: Message[];
  lastAt: number;
  continued: boolean;
}

const sigsIn = (messages: Message[] | undefined) => {
  const out: string[] = [];
  for (const m of messages ?? []) if (Array.isArray(m.content)) for (const b of m.content) if (isThinking(b)) out.push(sigOf(b));
  return out;
};

export class FakeAnthropic {
  readonly requests: Recorded[] = [];
  private server: Server | undefined;
  private readonly threads = new Map<string, StoredThread>();
  baseUrl = "";
  /** The provider's clock (tests move it to expire threads). */
  now: () => number = () => Date.now();
  /** A thread expires this long after its last request. */
  expiryMs = 5 * 60_000;
  /**
   * Called before a reply is sent; the reply waits for the promise it returns (a test
   * holding a reply until pi's cache warming fires, by a condition, not a sleep).
   */
  hold: ((rec: Recorded) => Promise<void> | undefined) | undefined;
  /** input_tokens each reply reports (default: the body's length / 4); pi's cache-warming economics read it. */
  inputTokens: number | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server!.close(() => r()));
  }

  /** Requests the fake refused for thinking reasons. */
  refusals(): Recorded[] {
    return this.requests.filter((r) => r.verdict.status === 400);
  }

  /** Expires every stored thread (as if 5 minutes passed since each one's last request). */
  expireThreads(): void {
    for (const t of this.threads.values()) t.lastAt = -Infinity;
  }

  private error(res: ServerResponse, status: number, type: string, message: string, code?: string): void {
    res.writeHead(status, { "content-type": "application/json", "request-id": `req_fake_${this.requests.length}` });
    res.end(JSON.stringify({ type: "error", error: { type, message, ...(code ? { details: { error_code: code } } : {}) } }));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => void this.answer(req, res, chunks));
  }

  private async answer(req: IncomingMessage, res: ServerResponse, chunks: Buffer[]): Promise<void> {
    if (req.method !== "POST" || !req.url?.startsWith("/v1/messages")) {
      this.error(res, 404, "not_found_error", `${req.method} ${req.url}`);
      return;
    }
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      this.error(res, 400, "invalid_request_error", "body is not JSON");
      return;
    }
    const betas = String(req.headers["anthropic-beta"] ?? "").split(",").map((x) => x.trim());
    const thread = body?.thread as Recorded["thread"];
    let full = body;
    let offset = 0;
    let stored: StoredThread | undefined;
    if (thread !== undefined) {
      if (!betas.includes(THREADS_BETA)) {
        this.error(res, 400, "invalid_request_error", "thread: Extra inputs are not permitted");
        return;
      }
      if (thread.type === "continue") {
        const id = String(thread.previous_message_id ?? "");
        stored = this.threads.get(id);
        if (!stored || this.now() - stored.lastAt > this.expiryMs) {
          this.recordRejected(body, req, thread);
          this.error(res, 404, "not_found_error", `thread ${id} not found (expired or never created)`, "thread_not_found");
          return;
        }
        if (stored.continued) {
          this.recordRejected(body, req, thread);
          this.error(res, 404, "not_found_error", `message ${id} was already continued`, "thread_already_continued");
          return;
        }
        if (body.system !== undefined || body.tools !== undefined || body.model !== stored.model) {
          this.recordRejected(body, req, thread);
          this.error(res, 400, "invalid_request_error", "a continue keeps the thread's model, system and tools", "thread_fingerprint_mismatch");
          return;
        }
        offset = stored.messages.length;
        full = { ...body, system: stored.system, tools: stored.tools, messages: [...stored.messages, ...(body.messages ?? [])] };
      } else if (thread.type !== "create") {
        this.error(res, 400, "invalid_request_error", `thread.type: unknown value ${JSON.stringify(thread.type)}`);
        return;
      }
    }
    const { verdict, lastRead } = judge(full, req.headers, offset);
    const warm = body.max_tokens === 1;
    const rec: Recorded = {
      body,
      headers: req.headers,
      verdict,
      signatures: sigsIn(body.messages),
      minted: [],
      thread,
      offset,
      full,
      fullSignatures: sigsIn(full.messages),
      warm,
    };
    this.requests.push(rec);
    if (verdict.status !== 200) {
      this.error(res, verdict.status, "invalid_request_error", verdict.error ?? "refused");
      return;
    }
    if (stored) {
      stored.continued = true;
      stored.lastAt = this.now();
    }
    const plan: ReplyPlan = warm ? { blocks: [{ type: "text", text: "." }], stopReason: "max_tokens" } : reply(full, lastRead, verdict);
    rec.minted = plan.blocks.filter(isThinking).map(sigOf);
    rec.stopReason = plan.stopReason;
    if (plan.stopReason === "end_turn") rec.finalText = plan.blocks.filter((b) => b.type === "text").map((b) => String(b.text)).join("");
    const responseId = `msg_${this.requests.length}`;
    rec.responseId = responseId;
    if (thread !== undefined) {
      // The thread holds the conversation as the model read it: dropped blocks are gone.
      const dropped = new Set(verdict.transformations.map((t) => t.path));
      const read = (full.messages as Message[]).map((m, n) =>
        Array.isArray(m.content) ? { ...m, content: m.content.filter((_b, k) => !dropped.has(`messages.${n - offset}.content.${k}`)) } : m,
      );
      this.threads.set(responseId, {
        system: full.system,
        tools: full.tools,
        model: full.model,
        messages: [...read, { role: "assistant", content: plan.blocks }],
        lastAt: this.now(),
        continued: false,
      });
    }
    await this.hold?.(rec);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "request-id": `req_fake_${this.requests.length}` });
    const hasBeta = betas.includes(BETA);
    sse(res, "message_start", {
      type: "message_start",
      message: {
        id: responseId,
        type: "message",
        role: "assistant",
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: this.inputTokens ?? Math.ceil(JSON.stringify(full).length / 4), output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
        ...(hasBeta ? { input_transformations: verdict.transformations } : {}),
      },
    });
    plan.blocks.forEach((b, index) => {
      if (b.type === "thinking") {
        sse(res, "content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } });
        sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: b.thinking } });
        sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: b.signature } });
      } else if (b.type === "redacted_thinking") {
        sse(res, "content_block_start", { type: "content_block_start", index, content_block: { type: "redacted_thinking", data: b.data } });
      } else if (b.type === "text") {
        sse(res, "content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
        sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: b.text } });
      } else if (b.type === "tool_use") {
        sse(res, "content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: b.id, name: b.name, input: {} } });
        sse(res, "content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) } });
      }
      sse(res, "content_block_stop", { type: "content_block_stop", index });
    });
    sse(res, "message_delta", { type: "message_delta", delta: { stop_reason: plan.stopReason, stop_sequence: null }, usage: { output_tokens: 20 } });
    sse(res, "message_stop", { type: "message_stop" });
    res.end();
  }

  /** A request refused before judging (a thread the fake cannot serve): recorded, never replied. */
  private recordRejected(body: any, req: IncomingMessage, thread: Recorded["thread"]): void {
    const verdict: Verdict = { status: 404, thinkingSent: 0, thinkingRead: 0, transformations: [], maxReadable: 0 };
    this.requests.push({ body, headers: req.headers, verdict, signatures: sigsIn(body.messages), minted: [], thread, offset: 0, full: body, fullSignatures: [], warm: false });
  }
}
