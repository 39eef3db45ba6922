import type { PiAssistantMessage, PiUsage } from "./pi-types.js";

/** An Anthropic Messages content block as it travels on the wire. */
export type WireBlock = { type: string; [k: string]: unknown };
export interface WireReply {
  role: "assistant";
  content: WireBlock[];
}

// pi strips lone UTF-16 surrogates before sending text (they are not valid JSON for the
// API); the reply is converted the same way so bindery sees what pi will replay.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
export function dropLoneSurrogates(s: string): string {
  return s.replace(LONE_SURROGATE, "");
}

/**
 * The wire name of a tool pi calls `name`. Under an OAuth token pi re-cases tool names to
 * Claude Code's (read -> Read) on the wire and back on receipt; the request's `tools`
 * list holds the names actually sent, so the reply takes the matching one.
 */
function wireToolName(name: string, sentTools: unknown): string {
  if (!Array.isArray(sentTools)) return name;
  let folded: string | undefined;
  for (const t of sentTools) {
    const n = (t as { name?: unknown })?.name;
    if (typeof n !== "string") continue;
    if (n === name) return name;
    if (folded === undefined && n.toLowerCase() === name.toLowerCase()) folded = n;
  }
  return folded ?? name;
}

/**
 * Converts pi's assistant message to the provider's wire shape the way pi's Anthropic
 * serializer replays it: redacted thinking -> redacted_thinking{data}; thinking with a
 * signature -> thinking{thinking, signature}; thinking without one -> text; blank thinking
 * text is skipped unless it is signed (an omitted-display block is a real block);
 * blank text skipped; toolCall -> tool_use{id, name, input}. Unknown block types are left out.
 */
export function toWireReply(message: PiAssistantMessage, sentRequest?: { tools?: unknown }): WireReply {
  const content: WireBlock[] = [];
  for (const b of message.content ?? []) {
    switch (b.type) {
      case "text": {
        const text = (b as { text?: unknown }).text;
        if (typeof text === "string" && text.trim() !== "") content.push({ type: "text", text: dropLoneSurrogates(text) });
        break;
      }
      case "thinking": {
        const t = b as { thinking?: unknown; thinkingSignature?: unknown; redacted?: unknown };
        const sig = typeof t.thinkingSignature === "string" ? t.thinkingSignature : "";
        const text = typeof t.thinking === "string" ? t.thinking : "";
        if (t.redacted === true) {
          if (sig !== "") content.push({ type: "redacted_thinking", data: sig });
          break;
        }
        if (sig.trim() === "") {
          if (text.trim() !== "") content.push({ type: "text", text: dropLoneSurrogates(text) });
          break;
        }
        content.push({ type: "thinking", thinking: dropLoneSurrogates(text), signature: sig });
        break;
      }
      case "toolCall": {
        const c = b as { id?: unknown; name?: unknown; arguments?: unknown };
        content.push({
          type: "tool_use",
          id: String(c.id ?? ""),
          name: wireToolName(String(c.name ?? ""), sentRequest?.tools),
          input: (c.arguments as object | undefined) ?? {},
        });
        break;
      }
      default:
        break;
    }
  }
  return { role: "assistant", content };
}

/**
 * pi's usage back in the response's field names. pi 1.x adds `cacheWrite1h` (the part of
 * the cache write at the 1-hour lifetime: the response's cache_creation breakdown) and
 * `reasoning` (thinking tokens, a part of output_tokens); they go back where the response had them.
 */
export function toWireUsage(u: PiUsage | undefined): Record<string, unknown> | undefined {
  if (!u) return undefined;
  const out: Record<string, unknown> = {
    input_tokens: u.input ?? 0,
    output_tokens: u.output ?? 0,
    cache_read_input_tokens: u.cacheRead ?? 0,
    cache_creation_input_tokens: u.cacheWrite ?? 0,
  };
  if (typeof u.cacheWrite1h === "number") {
    out.cache_creation = { ephemeral_1h_input_tokens: u.cacheWrite1h, ephemeral_5m_input_tokens: Math.max(0, (u.cacheWrite ?? 0) - u.cacheWrite1h) };
  }
  if (typeof u.reasoning === "number") out.output_tokens_details = { thinking_tokens: u.reasoning };
  return out;
}

/** A thinking or redacted_thinking block of an Anthropic request. */
export function isThinking(b: unknown): boolean {
  const t = (b as { type?: unknown } | null)?.type;
  return t === "thinking" || t === "redacted_thinking";
}

/** Number of thinking and redacted_thinking blocks in an Anthropic request body. */
export function countThinking(request: unknown): number {
  const messages = (request as { messages?: unknown })?.messages;
  if (!Array.isArray(messages)) return 0;
  let n = 0;
  for (const m of messages) {
    const c = (m as { content?: unknown })?.content;
    if (Array.isArray(c)) for (const b of c) if (isThinking(b)) n++;
  }
  return n;
}

/** The signature (or redacted data) of the block at `messages.N.content.M`, if it is thinking. */
export function thinkingKeyAt(request: unknown, path: string): string | undefined {
  const m = /^messages\.(\d+)\.content\.(\d+)$/.exec(path);
  if (!m) return undefined;
  const msg = (request as { messages?: unknown[] })?.messages?.[Number(m[1])] as { content?: unknown } | undefined;
  const block = Array.isArray(msg?.content) ? (msg!.content as WireBlock[])[Number(m[2])] : undefined;
  if (!block || !isThinking(block)) return undefined;
  const key = block.type === "thinking" ? block.signature : block.data;
  return typeof key === "string" ? key : undefined;
}

/**
 * The fail-closed payload: every thinking block removed and messages left empty dropped,
 * as pi's serializer drops empty messages. Removing all thinking is always accepted.
 * Returns a new object; the input is not modified.
 */
export function stripAllThinking<T>(request: T): T {
  const messages = (request as { messages?: unknown })?.messages;
  if (!Array.isArray(messages)) return request;
  const out: unknown[] = [];
  for (const m of messages) {
    const c = (m as { content?: unknown })?.content;
    if (!Array.isArray(c) || !c.some(isThinking)) {
      out.push(m);
      continue;
    }
    const kept = c.filter((b) => !isThinking(b));
    if (kept.length > 0) out.push({ ...(m as object), content: kept });
  }
  return { ...(request as object), messages: out } as T;
}

export interface BindingRefusal {
  /** `messages.N.content.M`, in the request as sent. */
  path: string;
}

/**
 * Recognises the provider's prefix-binding 400 in pi's errorMessage (pi surfaces a failed
 * request as an assistant message with stopReason "error" and errorMessage
 * "400 messages.N.content.M: Invalid `signature` in `thinking` block. The block is bound
 * to a different conversation. ..."). A bad-signature 400 lacks the "bound to a
 * different conversation" sentence and is not a refusal bindery can fix.
 */
export function parseBindingRefusal(errorMessage: string | undefined): BindingRefusal | undefined {
  if (!errorMessage || !/bound to a different conversation/i.test(errorMessage)) return undefined;
  const m = /(messages\.\d+\.content\.\d+)/.exec(errorMessage);
  return m ? { path: m[1] } : undefined;
}

/**
 * The response's input_transformations where pi exposes them: pi 1.x records them on the
 * assistant message as an "anthropic_input_transformations" diagnostic; pi 0.x does not
 * read them at all (then undefined).
 */
export function transformationsFromDiagnostics(message: PiAssistantMessage): unknown[] | undefined {
  for (const d of message.diagnostics ?? []) {
    if (d?.type !== "anthropic_input_transformations") continue;
    const t = (d.details as { transformations?: unknown } | undefined)?.transformations;
    if (Array.isArray(t)) return t;
  }
  return undefined;
}
