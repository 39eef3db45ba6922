/**
 * The request as it actually left pi, and paths in it mapped back to the request bindery
 * compiled.
 *
 * pi 1.6 (message threads, on by default for Anthropic's own API) runs the payload hook on
 * the FULL request, then, when the prefix it sent last time is unchanged, drops `system`,
 * `tools` and those prefix messages and sends `thread: {type: "continue",
 * previous_message_id}` with only the new messages. The provider then names paths (a 400's
 * `messages.N.content.M`, `input_transformations`) counting from the start of the trimmed
 * list. bindery's release and accept take paths in the request it compiled, so each path
 * is moved by the number of messages pi left out, and checked by the block's signature
 * read from the body actually sent. No pi hook exposes that body (before_provider_headers
 * sees headers only, provider_stream_event only a successful stream), so the fetch
 * wrapper (beta-header.ts) reads it.
 */

/** What the extension keeps of one body pi sent to a Messages endpoint. */
export interface SentShape {
  /** The body was a `thread: continue`: its messages are the tail of the compiled request's. */
  continued: boolean;
  /** max_tokens as sent (cache warming re-sends with 1; the accept must not be pinned on it). */
  maxTokens: number | undefined;
  /** Messages in the body as sent. */
  messages: number;
  /** Signature (or redacted data) of each thinking block, by its path in the body as sent. */
  signatures: Map<string, string>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const CONTINUE = '"thread":{"type":"continue"';
const MAX_TOKENS = /"max_tokens":(\d+)[,}]/;

/**
 * Reads a body pi is about to send. Only a thread continue is parsed in full (the others
 * are the compiled request itself, plus `stream: true`): that keeps the wrapper off the
 * hot path for the usual megabyte bodies.
 */
export function sentShape(body: string): SentShape {
  if (!body.includes(CONTINUE)) {
    const m = MAX_TOKENS.exec(body);
    return { continued: false, maxTokens: m ? Number(m[1]) : undefined, messages: -1, signatures: new Map() };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { continued: false, maxTokens: undefined, messages: -1, signatures: new Map() };
  }
  const p = isObject(parsed) ? parsed : {};
  const thread = isObject(p.thread) ? p.thread : {};
  const messages = Array.isArray(p.messages) ? p.messages : [];
  return {
    continued: thread.type === "continue",
    maxTokens: typeof p.max_tokens === "number" ? p.max_tokens : undefined,
    messages: messages.length,
    signatures: thinkingSignatures(messages),
  };
}

/** Path -> signature (redacted: data) of every thinking block in `messages`. */
export function thinkingSignatures(messages: unknown[]): Map<string, string> {
  const out = new Map<string, string>();
  messages.forEach((m, n) => {
    const c = isObject(m) ? m.content : undefined;
    if (!Array.isArray(c)) return;
    c.forEach((b, k) => {
      if (!isObject(b)) return;
      const sig = b.type === "thinking" ? b.signature : b.type === "redacted_thinking" ? b.data : undefined;
      if (typeof sig === "string") out.set(`messages.${n}.content.${k}`, sig);
    });
  });
  return out;
}

export type Mapped = { path: string } | { unmapped: string };

/**
 * `path` (as the provider named it in the body actually sent) in the compiled request
 * `full`. Without a continue the two are the same request. In a continue the messages pi
 * left out are the first `full.length - sent.length`; the block found there must carry the
 * signature the sent body had at `path`, else it is looked up by signature; a path whose
 * block cannot be found in `full` is not mapped (a release on a guess could free the
 * wrong block).
 */
export function toCompiledPath(path: string, sent: SentShape | undefined, full: { messages?: unknown }): Mapped {
  if (!sent || !sent.continued) return { path };
  const m = /^messages\.(\d+)\.content\.(\d+)$/.exec(path);
  if (!m) return { unmapped: `${path}: not a messages.N.content.M path` };
  const fullMessages = Array.isArray(full.messages) ? full.messages : [];
  const k = fullMessages.length - sent.messages;
  if (k < 0) return { unmapped: `${path}: the body sent has more messages (${sent.messages}) than the compiled request (${fullMessages.length})` };
  const sig = sent.signatures.get(path);
  const candidate = `messages.${Number(m[1]) + k}.content.${m[2]}`;
  const fullSigs = thinkingSignatures(fullMessages);
  if (sig === undefined) return { unmapped: `${path}: no thinking block there in the body sent` };
  if (fullSigs.get(candidate) === sig) return { path: candidate };
  for (const [p, s] of fullSigs) if (s === sig) return { path: p };
  return { unmapped: `${path}: its block is not in the compiled request` };
}

/** input_transformations with every path moved to the compiled request; entries that cannot be are left out. */
export function transformationsToCompiled(list: unknown[], sent: SentShape | undefined, full: { messages?: unknown }, onUnmapped: (why: string) => void): unknown[] {
  if (!sent || !sent.continued) return list;
  const out: unknown[] = [];
  for (const t of list) {
    const path = isObject(t) ? t.path : undefined;
    if (typeof path !== "string") {
      out.push(t);
      continue;
    }
    const r = toCompiledPath(path, sent, full);
    if ("path" in r) out.push({ ...(t as object), path: r.path });
    else onUnmapped(r.unmapped);
  }
  return out;
}
