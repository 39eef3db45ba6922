import { BinderyClient, BinderyError, JsonText } from "./client.js";
import type { PiAssistantMessage, PiContext, PiModel } from "./pi-types.js";
import type { BinderySettings } from "./settings.js";
import { toCompiledPath, transformationsToCompiled, type SentShape } from "./sent-request.js";
import { countThinking, isThinking, parseBindingRefusal, stripAllThinking, thinkingKeyAt, toWireReply, toWireUsage, transformationsFromDiagnostics } from "./wire.js";
import {
  CONVERSE_API,
  applyConversePlan,
  converseKeyAt,
  converseRequest,
  countConverseThinking,
  asksTransformations,
  isBedrockClaude,
  isConverseBody,
  stripAllConverseThinking,
  toConverseReply,
  withTransformationsPointer,
} from "./converse.js";
import type { Hash } from "node:crypto";
import { applyPlan, compileBaseMemo, messagesJson, messagesText, sharedDigest, type CompileBaseMemo, type MessagesText } from "./plan.js";

export const STATUS_KEY = "bindery";
/** customType of the session entry that remembers drop_block for a session across pi runs. */
export const ENTRY_TYPE = "bindery-drop-block";
export const DROP_BLOCK_BETA = "thinking-binding-controls-2026-08-01";

/** bindery's compile answer (api.md), the fields this extension reads. */
export interface CompileAnswer {
  compileId?: string;
  /** false: not a body bindery binds (nothing recorded; no base for the next compile). */
  bound?: boolean;
  engaged?: boolean;
  thinkingStripped?: number;
  strips?: { path: string; reason: string; tokens?: number }[];
  droppedMessages?: string[];
  request?: unknown;
}

/** The compile whose answer pi sent, waiting for its response. */
interface Pending {
  compileId: string;
  conversation: string;
  branch: string | undefined;
  model: string | undefined;
  /** The request as it went to the provider (after bindery's strips), for release paths and tool names. */
  sent: Record<string, unknown>;
  /** Set when the request carried the beta that makes the response report drops. */
  transformations?: Deferred<unknown[] | undefined>;
  /** The body pi actually sent for this compile, last seen by the fetch wrapper (a thread continue is trimmed). */
  shape?: SentShape;
  /** The request is Bedrock Converse (pi's bedrock-converse-stream): the reply is accepted in Converse's shape. */
  converse?: boolean;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
}
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** How long an accept waits for input_transformations read from the response stream. */
const TRANSFORMATIONS_WAIT_MS = 1000;

/** How often a daemon that stopped answering is asked again, and how long one ask waits. */
export const PROBE_INTERVAL_MS = 1000;
const PROBE_TIMEOUT_MS = 1000;

/** Per-session counters shown in the footer. */
interface SessionState {
  id: string;
  /** The last compile bindery answered in this session, for sending the next by reference. */
  base?: CompileBaseMemo;
  /** Signatures of blocks bindery stripped this session (distinct). */
  stripped: Set<string>;
  /** Thinking blocks replayed in the last request. */
  kept: number;
  /** Set after the provider refused a block, when dropBlock is on and the route accepts it. */
  dropBlock: boolean;
  /** Leaf ids this session compiled at, to name a new leaf's parent branch. */
  compiledLeaves: Set<string>;
}

export interface Counters {
  compiles: number;
  accepts: number;
  releases: number;
  failures: number;
  /** Cache-warming requests compiled as dry runs (recorded nothing, never accepted). */
  warms: number;
  /** Paths from a trimmed thread request that could not be placed in the compiled request. */
  unmapped: number;
}

/** Where this extension talks to pi's UI; a function so tests can capture it. */
export interface Reporter {
  notify(ctx: PiContext, message: string, type: "info" | "warning" | "error"): void;
}

export const piReporter: Reporter = {
  notify(ctx, message, type) {
    // In print mode pi has no UI; stderr keeps stdout (the answer) clean.
    if (ctx.hasUI) ctx.ui.notify(message, type);
    else process.stderr.write(`${message}\n`);
  },
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The extension's logic, free of pi's registration so tests can drive it with pi's event
 * shapes: compile at before_provider_request, accept or release at the assistant's
 * message_end. Every bindery failure is caught here: pi's request goes out unchanged
 * (failOpen) or with all thinking removed (failOpen: false), never blocked.
 */
export class BinderyBridge {
  readonly client: BinderyClient;
  readonly counters: Counters = { compiles: 0, accepts: 0, releases: 0, failures: 0, warms: 0, unmapped: 0 };
  private pending: Pending | undefined;
  /** The in-flight request's wait for input_transformations (outlives `pending` into the accept). */
  private expecting: Deferred<unknown[] | undefined> | undefined;
  private session: SessionState | undefined;
  private connected: boolean | undefined;
  private failureReported = false;
  private lastFailure: string | undefined;
  /** Background accept/release calls, so tests and shutdown can wait for them. */
  private inflight = new Set<Promise<unknown>>();
  /**
   * Set when a compile ran out of time (a frozen daemon, a wedged one before its watchdog
   * restarts it): waiting out the deadline again on every request would add it to each
   * one, so requests go straight on, as if bindery were down, while `probe` asks
   * /v1/health in the background until the daemon answers again.
   */
  private unresponsive = false;
  private probeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    readonly settings: BinderySettings,
    private readonly reporter: Reporter = piReporter,
    /**
     * Called when a session turns drop_block on (index.ts installs the beta header and
     * records it in the session with pi.appendEntry, so a resumed session keeps it).
     */
    private readonly onDropBlock: (persist: boolean) => void = () => {},
  ) {
    this.client = new BinderyClient(settings.socketPath);
  }

  /** Waits for background accepts and releases (tests, session shutdown). */
  async settle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    p.finally(() => this.inflight.delete(p)).catch(() => {});
    return p;
  }

  private sessionFor(ctx: PiContext): SessionState {
    const id = ctx.sessionManager.getSessionId();
    if (!this.session || this.session.id !== id) {
      this.session = { id, stripped: new Set(), kept: 0, dropBlock: false, compiledLeaves: new Set() };
      this.pending = undefined;
      if (this.settings.dropBlock && recordedDropBlock(ctx)) {
        this.session.dropBlock = true;
        this.onDropBlock(false);
      }
    }
    return this.session;
  }

  /** The footer line. */
  statusLine(): string {
    const s = this.session;
    if (!this.settings.enabled) return "bindery off";
    if (this.connected === false) return `bindery down · requests sent unchanged${this.counters.failures ? ` (${this.counters.failures} failed)` : ""}`;
    if (this.connected === undefined) return "bindery …";
    return `bindery ✓ thinking kept ${s?.kept ?? 0} · stripped ${s?.stripped.size ?? 0}${s?.dropBlock ? " · drop_block" : ""}`;
  }

  private showStatus(ctx: PiContext): void {
    try {
      ctx.ui.setStatus(STATUS_KEY, this.statusLine());
    } catch {
      // a UI that cannot show status must not break the request
    }
  }

  private fail(ctx: PiContext, what: string, err: unknown): void {
    this.counters.failures++;
    const msg = err instanceof Error ? err.message : String(err);
    this.lastFailure = msg;
    if (!(err instanceof BinderyError) || err.kind !== "http") this.connected = false;
    if (err instanceof BinderyError && err.kind === "timeout") this.startProbe();
    if (!this.failureReported) {
      this.failureReported = true;
      this.reporter.notify(ctx, this.failureNotice(ctx, what, err, msg), "warning");
    }
    this.showStatus(ctx);
  }

  /**
   * The one notice of a failure, in the user's words: what happened (not a raw errno),
   * what pi does meanwhile, and how to start bindery; the footer only where pi has one
   * (not in pi -p).
   */
  private failureNotice(ctx: PiContext, what: string, err: unknown, msg: string): string {
    const fallback = this.settings.failOpen
      ? "pi's requests go out unchanged, as without bindery"
      : "pi's requests go out with earlier thinking removed (failOpen: false)";
    const start = "Start it with `bindery service install` (at every login) or `bindery serve`";
    let text: string;
    if (err instanceof BinderyError && err.kind === "down") {
      text = `bindery: ${what} failed: bindery is not running (nothing answers on ${this.client.socketPath}); ${fallback}. ${start}; pi uses it again once it answers.`;
    } else if (err instanceof BinderyError && err.kind === "timeout") {
      text = `bindery: ${what} failed: bindery did not answer in time (${msg}); ${fallback}, without waiting for it, until it answers again.`;
    } else {
      text = `bindery: ${what} failed (${msg}); ${fallback}.`;
    }
    return ctx.hasUI ? `${text} Reported once; the footer shows bindery's state.` : `${text} Reported once.`;
  }

  /** Asks /v1/health every PROBE_INTERVAL_MS until the daemon answers, off pi's path. */
  private startProbe(): void {
    this.unresponsive = true;
    if (this.probeTimer) return;
    const tick = async () => {
      let answered = true;
      try {
        await this.client.call("GET", "/v1/health", undefined, PROBE_TIMEOUT_MS);
      } catch (err) {
        // Any HTTP answer, an error status included, is a daemon that answers again.
        answered = err instanceof BinderyError && err.kind === "http";
      }
      if (answered) {
        this.unresponsive = false;
        this.probeTimer = undefined;
        return;
      }
      this.schedule(tick);
    };
    this.schedule(tick);
  }

  private schedule(tick: () => Promise<void>): void {
    this.probeTimer = setTimeout(() => void tick(), PROBE_INTERVAL_MS);
    // The probe must not keep pi -p alive after its answer.
    this.probeTimer.unref?.();
  }

  /** Stops the background probe (session shutdown, tests). */
  stopProbe(): void {
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }

  private succeeded(ctx: PiContext): void {
    if (this.connected === false && this.failureReported) {
      this.reporter.notify(ctx, "bindery: connected again.", "info");
      this.failureReported = false;
    }
    this.connected = true;
  }

  lastError(): string | undefined {
    return this.lastFailure;
  }

  /**
   * before_provider_request: `payload` is pi's final provider params (after every `context`
   * handler, convertToLlm, cache markers and the before_provider_request handlers loaded
   * earlier). Returns the payload to send.
   */
  async beforeProviderRequest(payload: unknown, ctx: PiContext): Promise<unknown> {
    if (!this.settings.enabled) return undefined;
    // Only Anthropic Messages and Bedrock Converse bodies are compiled: bindery would record
    // a compile for a body it cannot read (OpenAI chat). Gate on pi's model api, and on the
    // body's shape for a host that names none.
    const api = ctx.model?.api;
    if (api !== undefined && api !== "anthropic-messages" && api !== CONVERSE_API) return undefined;
    if (!isObject(payload) || !Array.isArray(payload.messages)) return undefined;
    const converse = api === CONVERSE_API || (api === undefined && isConverseBody(payload));
    // On Bedrock only Claude's bodies: other models' reasoning carries no signature and
    // is not bindery's to judge.
    if (converse && (!isConverseBody(payload) || !isBedrockClaude(ctx.model, payload))) return undefined;
    if (this.unresponsive) {
      // The last compile ran out of time and the probe has not heard from bindery since:
      // this request does not wait for it again.
      const session = this.sessionFor(ctx);
      session.base = undefined;
      return this.failedCompile(ctx, session, payload, converse, new BinderyError("timeout", "bindery has not answered since a compile ran out of time"));
    }
    if (isCacheWarming(payload)) return this.warm(payload, ctx, converse);
    const session = this.sessionFor(ctx);
    this.pending = undefined;
    this.expecting = undefined;
    const conversation = session.id;
    const branch = ctx.sessionManager.getLeafId() ?? undefined;
    const sessionFile = ctx.sessionManager.getSessionFile();
    const parent = parentBranch(ctx, session, branch);
    // What bindery reads (on Bedrock the AWS JSON of pi's payload), and its messages as the
    // call will carry them, for compiling this turn and the next by reference.
    const request = (converse ? converseRequest(payload) : payload) as Record<string, unknown> & { messages: unknown[] };
    const base = session.base;
    const { text, shared } = messagesText(request.messages, base);
    const call = { conversation, branch, sessionFile, parent, return: "plan" };
    let answer: CompileAnswer | undefined;
    let hash: Hash | undefined;
    try {
      if (base && shared > 0) {
        // By reference: only the messages after those the last compile sent, the shared
        // ones proven by their digest. A base bindery no longer holds, or one it finds
        // different, is answered with a full compile, at once.
        const d = sharedDigest(base, text, shared);
        try {
          answer = await this.compile(compileCall({ ...call, base: { compileId: base.compileId, messages: shared, digest: d.digest } }, request, text, shared), ctx);
          hash = d.hash;
        } catch (err) {
          if (!(err instanceof BinderyError && err.kind === "http" && (err.code === "base_unknown" || err.code === "base_mismatch"))) throw err;
          session.base = undefined;
        }
      }
      answer ??= await this.compile(compileCall(call, request, text), ctx);
    } catch (err) {
      // The user aborted the turn: pi drops the request; nothing failed.
      if (err instanceof BinderyError && err.kind === "aborted") return undefined;
      session.base = undefined;
      return this.failedCompile(ctx, session, payload, converse, err);
    }
    let sent: Record<string, unknown>;
    try {
      sent = converse ? conversePlanned(payload, answer) : messagesPlanned(payload, answer);
    } catch (err) {
      session.base = undefined;
      return this.failedCompile(ctx, session, payload, converse, new BinderyError("protocol", `bindery /v1/compile: ${err instanceof Error ? err.message : String(err)}`));
    }
    session.base = answer.bound === true && typeof answer.compileId === "string" ? compileBaseMemo(answer.compileId, text, hash, shared) : undefined;
    this.counters.compiles++;
    if (branch) session.compiledLeaves.add(branch);
    this.succeeded(ctx);
    const strips: { path?: unknown }[] = Array.isArray(answer.strips) ? answer.strips : [];
    for (const s of strips) {
      const key = typeof s?.path === "string" ? (converse ? converseKeyAt(payload, s.path) : thinkingKeyAt(payload, s.path)) : undefined;
      if (key !== undefined) session.stripped.add(key);
    }
    const tagged = session.dropBlock && this.routeAcceptsDropBlock(ctx.model);
    const planned = sent;
    if (tagged) sent = withDropBlock(sent);
    session.kept = converse ? countConverseThinking(sent) : countThinking(sent);
    if (typeof answer.compileId === "string" && answer.compileId !== "") {
      const model = String((converse ? payload.modelId : payload.model) ?? "");
      this.pending = { compileId: answer.compileId, conversation, branch, model, sent, converse };
      // Drops are reported when the request asked for them: on Anthropic's API with the
      // drop_block this extension added, on Bedrock with the pointer converse.ts adds.
      const asked = converse ? asksTransformations(sent) : tagged && sent !== planned;
      if (asked) this.pending.transformations = this.expecting = deferred();
    }
    this.showStatus(ctx);
    return sent;
  }

  /** POST /v1/compile for a plan; an answer without one is a protocol failure. */
  private async compile(call: Record<string, unknown> | JsonText, ctx: PiContext): Promise<CompileAnswer> {
    const answer = await this.client.call<CompileAnswer>("POST", "/v1/compile", call, this.settings.compileTimeoutMs, ctx.signal);
    if (!isObject(answer) || typeof answer.compileId !== "string" || !Array.isArray(answer.strips)) {
      throw new BinderyError("protocol", "bindery /v1/compile: answer carries no plan");
    }
    return answer;
  }

  /** A compile that failed: pi's payload goes out unchanged (failOpen) or without thinking. */
  private failedCompile(ctx: PiContext, session: SessionState, payload: Record<string, unknown>, converse: boolean, err: unknown): unknown {
    this.fail(ctx, "compile", err);
    const out = this.settings.failOpen ? payload : converse ? stripAllConverseThinking(payload as Record<string, unknown> & { messages: unknown[] }) : stripAllThinking(payload);
    session.kept = converse ? countConverseThinking(out) : countThinking(out);
    this.showStatus(ctx);
    return out === payload ? undefined : out;
  }

  /**
   * A cache-warming re-send (pi 1.6: the last request again with max_tokens 1, through this
   * same hook, never followed by message_end). It must reach the provider with the same
   * thinking the real request had, or it warms a different prefix, so it is compiled; but
   * as a dry run, which records nothing: it neither evicts a real compile nor becomes the
   * branch's request, and the pending compile (a real request whose reply is still
   * streaming) stays the one the next accept goes to.
   */
  private async warm(payload: Record<string, unknown>, ctx: PiContext, converse: boolean): Promise<unknown> {
    const session = this.sessionFor(ctx);
    const branch = ctx.sessionManager.getLeafId() ?? undefined;
    try {
      const request = converse ? converseRequest(payload) : payload;
      const answer = await this.client.call<CompileAnswer>(
        "POST",
        "/v1/compile",
        { conversation: session.id, branch, sessionFile: ctx.sessionManager.getSessionFile(), parent: parentBranch(ctx, session, branch), request, dryRun: true, return: "request" },
        this.settings.compileTimeoutMs,
        ctx.signal,
      );
      if (!isObject(answer) || !isObject(answer.request) || !Array.isArray((answer.request as { messages?: unknown }).messages)) {
        throw new BinderyError("protocol", "bindery /v1/compile (dry run): answer carries no rewritten request");
      }
      let out = converse ? conversePlanned(payload, answer) : (answer.request as Record<string, unknown>);
      this.counters.warms++;
      this.succeeded(ctx);
      if (session.dropBlock && this.routeAcceptsDropBlock(ctx.model)) out = withDropBlock(out);
      return out;
    } catch (err) {
      if (err instanceof BinderyError && err.kind === "aborted") return undefined;
      this.fail(ctx, "compile", err);
      const out = this.settings.failOpen ? payload : converse ? stripAllConverseThinking(payload as Record<string, unknown> & { messages: unknown[] }) : stripAllThinking(payload);
      return out === payload ? undefined : out;
    }
  }

  /**
   * The shape of a body pi is sending (from the fetch wrapper). It belongs to the pending
   * compile unless its max_tokens differs (a cache-warming re-send of the same messages);
   * a later send for the same compile (pi replaying a refused thread continue as a create)
   * replaces an earlier one: the last body sent is the one the response answers.
   */
  receiveSent(shape: SentShape): void {
    const p = this.pending;
    if (!p) return;
    const want = typeof p.sent.max_tokens === "number" ? p.sent.max_tokens : undefined;
    if (shape.maxTokens !== undefined && want !== undefined && shape.maxTokens !== want) return;
    p.shape = shape;
  }

  /**
   * message_end: for the assistant message answering the pending compile, accept it (a
   * reply) or release the refused block (a prefix-binding 400). Runs before pi appends the
   * message to the session file. The accept runs in the background: pi's loop never waits
   * on bindery after the response.
   */
  messageEnd(message: unknown, ctx: PiContext): Promise<void> | undefined {
    if (!this.settings.enabled) return undefined;
    const m = message as PiAssistantMessage;
    if (!isObject(m) || m.role !== "assistant") return undefined;
    const pending = this.pending;
    this.pending = undefined;
    const session = this.sessionFor(ctx);
    if (!pending || pending.conversation !== session.id) return undefined;
    if (m.model && pending.model && m.model !== pending.model) return undefined; // not the request we compiled
    if (m.stopReason === "error") {
      const refusal = parseBindingRefusal(m.errorMessage);
      if (!refusal) return undefined;
      const mapped = toCompiledPath(refusal.path, pending.shape, pending.sent);
      if ("unmapped" in mapped) {
        this.counters.unmapped++;
        this.reporter.notify(ctx, `bindery: the provider refused a thinking block in a trimmed thread request, but it could not be placed in the full request (${mapped.unmapped}); nothing released.`, "warning");
        return undefined;
      }
      return this.track(this.release(pending, mapped.path, ctx, session));
    }
    if (m.stopReason === "aborted") return undefined; // never replayed by pi; nothing to stamp
    return this.track(this.accept(pending, m, ctx));
  }

  /**
   * The response's input_transformations (read from the stream by the fetch wrapper) for
   * the request in flight. Paths index the request as sent; bindery maps them back.
   */
  receiveTransformations(transformations: unknown[]): void {
    this.expecting?.resolve(transformations);
    this.expecting = undefined;
  }

  private async accept(pending: Pending, m: PiAssistantMessage, ctx: PiContext): Promise<void> {
    let inputTransformations = transformationsFromDiagnostics(m);
    if (!inputTransformations && pending.transformations) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      inputTransformations = await Promise.race([
        pending.transformations.promise,
        new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), TRANSFORMATIONS_WAIT_MS))),
      ]);
      clearTimeout(timer);
    }
    if (inputTransformations) {
      // Paths in a trimmed thread request count from its first message: move them to the compiled request.
      inputTransformations = transformationsToCompiled(inputTransformations, pending.shape, pending.sent, () => this.counters.unmapped++);
    }
    try {
      await this.client.call(
        "POST",
        "/v1/accept",
        { compileId: pending.compileId, reply: pending.converse ? toConverseReply(m) : toWireReply(m, pending.sent), usage: toWireUsage(m.usage), inputTransformations },
        this.settings.callTimeoutMs,
      );
      this.counters.accepts++;
      this.succeeded(ctx);
    } catch (err) {
      this.fail(ctx, "accept", err);
    }
  }

  private async release(pending: Pending, path: string, ctx: PiContext, session: SessionState): Promise<void> {
    let released: number | undefined;
    try {
      const a = await this.client.call<{ released?: number }>(
        "POST",
        "/v1/release",
        { conversation: pending.conversation, branch: pending.branch, compileId: pending.compileId, path },
        this.settings.callTimeoutMs,
      );
      released = a?.released;
      this.counters.releases++;
      this.succeeded(ctx);
    } catch (err) {
      this.fail(ctx, "release", err);
      return;
    }
    let extra = "";
    if (this.settings.dropBlock && this.routeAcceptsDropBlock(ctx.model) && !session.dropBlock) {
      session.dropBlock = true;
      this.onDropBlock(true);
      extra = ' From now on this session sends prefix_mismatch_behavior "drop_block".';
    }
    this.reporter.notify(
      ctx,
      `bindery: the provider refused the thinking block at ${path}; bindery released it and every later one${
        released !== undefined ? ` (${released})` : ""
      }. Send your message again: the next request goes through clean.${extra}`,
      "warning",
    );
    this.showStatus(ctx);
  }

  /** drop_block is sent only where the field is known to be accepted: Anthropic's own API. */
  routeAcceptsDropBlock(model: PiModel | undefined): boolean {
    if (!model || model.api !== "anthropic-messages") return false;
    let host: string;
    try {
      host = new URL(model.baseUrl ?? "https://api.anthropic.com").hostname;
    } catch {
      return false;
    }
    return host === "api.anthropic.com" || this.settings.dropBlockHosts.includes(host);
  }

  sessionStart(ctx: PiContext): void {
    this.sessionFor(ctx);
    this.showStatus(ctx);
  }
}

/**
 * The deepest earlier compiled leaf on the path to `branch`, as api.md's `parent`: bindery
 * learns pi's tree from the session file, but the newest entries may not be ingested yet,
 * and an ephemeral session (pi --no-session) has no file at all. pi's in-memory tree
 * knows; passing it lets releases and engagement follow the branch either way.
 */
function parentBranch(ctx: PiContext, session: SessionState, branch: string | undefined): { conversation: string; branch: string } | undefined {
  if (session.compiledLeaves.size === 0) return undefined;
  let path: { id: string }[];
  try {
    path = ctx.sessionManager.getBranch?.() ?? [];
  } catch {
    return undefined;
  }
  for (let i = path.length - 1; i >= 0; i--) {
    const id = path[i]?.id;
    if (id !== branch && session.compiledLeaves.has(id)) return { conversation: session.id, branch: id };
  }
  return undefined;
}

/** Whether this session's file records that drop_block was turned on (an earlier pi run). */
function recordedDropBlock(ctx: PiContext): boolean {
  try {
    const entries = ctx.sessionManager.getEntries?.() ?? [];
    return entries.some((e) => e.type === "custom" && e.customType === ENTRY_TYPE && (e.data as { dropBlock?: unknown })?.dropBlock === true);
  } catch {
    return false;
  }
}

/**
 * Adds `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` when the request
 * enables thinking (the field is accepted with type "enabled" and "adaptive") and says
 * nothing about it yet.
 */
export function withDropBlock(request: Record<string, unknown>): Record<string, unknown> {
  const thinking = request.thinking;
  if (!isObject(thinking) || (thinking.type !== "enabled" && thinking.type !== "adaptive")) return request;
  const binding = isObject(thinking.block_binding) ? thinking.block_binding : {};
  // pi 1.6 sets block_binding itself on models that bind; its choice stands.
  if (binding.prefix_mismatch_behavior !== undefined) return request;
  const out: Record<string, unknown> = { ...request, thinking: { ...thinking, block_binding: { ...binding, prefix_mismatch_behavior: "drop_block" } } };
  // pi 1.x sends its payload's `betas` as the anthropic-beta header: the beta rides there.
  if (Array.isArray(request.betas) && !request.betas.includes(DROP_BLOCK_BETA)) out.betas = [...request.betas, DROP_BLOCK_BETA];
  return out;
}

/**
 * pi 1.6's cache warming re-sends the last request with a one-token cap
 * (`getCacheWarmingRequestOptions`: maxTokens 1); no real turn asks for one token.
 */
export function isCacheWarming(payload: Record<string, unknown>): boolean {
  if (payload.max_tokens === 1) return true;
  const ic = payload.inferenceConfig; // Bedrock Converse
  return isObject(ic) && ic.maxTokens === 1;
}

/**
 * A compile's call, written from the messages' text already made for the next turn's
 * reference (messagesText): pi's messages are stringified once a turn, not twice. The
 * request carries its messages from `from` on (a compile by reference: those after the
 * shared ones); they go last, bindery reads members by name.
 */
export function compileCall(call: Record<string, unknown>, request: Record<string, unknown>, text: MessagesText, from = 0): JsonText {
  const rest = JSON.stringify({ ...request, messages: undefined });
  const json = from === 0 ? messagesJson(text) : `[${text.parts.slice(from).join(",")}]`;
  const req = rest.length > 2 ? `${rest.slice(0, -1)},"messages":${json}}` : `{"messages":${json}}`;
  return new JsonText(`${JSON.stringify(call).slice(0, -1)},"request":${req}}`);
}

/** The Messages payload to send: bindery's plan (strips, emptied messages) applied to pi's own object. */
function messagesPlanned(payload: Record<string, unknown>, answer: CompileAnswer): Record<string, unknown> {
  const strips = Array.isArray(answer.strips) ? answer.strips : [];
  const dropped = Array.isArray(answer.droppedMessages) ? answer.droppedMessages : [];
  return applyPlan(payload as Record<string, unknown> & { messages: unknown[] }, strips, dropped, isThinking);
}

/**
 * The Converse payload to send: bindery's plan (strips, emptied messages) applied to pi's own
 * object (converse.ts says why not the rewritten JSON), asking Bedrock for the drops.
 */
function conversePlanned(payload: Record<string, unknown>, answer: CompileAnswer): Record<string, unknown> {
  const strips = Array.isArray(answer.strips) ? answer.strips : [];
  const dropped = Array.isArray(answer.droppedMessages) ? answer.droppedMessages : [];
  return withTransformationsPointer(applyConversePlan(payload as Record<string, unknown> & { messages: unknown[] }, strips, dropped));
}
