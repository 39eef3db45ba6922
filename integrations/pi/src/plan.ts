import { createHash, type Hash } from "node:crypto";

/**
 * bindery's answer as a plan (return: "plan"), applied to pi's own payload object, and the
 * host's half of compile by reference (api/doc.go, "Compile by reference").
 *
 * Applying the plan here instead of taking bindery's rewritten JSON means pi's request
 * never crosses the socket twice: the blocks at the strips' paths and the messages the
 * plan names as emptied are left out, and everything else stays pi's own object (on
 * Bedrock, Uint8Arrays included). It is exactly bindery's rewrite: bindery cuts only those
 * blocks and messages, every other byte as the host wrote it.
 */

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function pathPos(path: string): [number, number] | undefined {
  const m = /^messages\.(\d+)\.content\.(\d+)$/.exec(path);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

function messagePos(path: string): number | undefined {
  const m = /^messages\.(\d+)$/.exec(path);
  return m ? Number(m[1]) : undefined;
}

/**
 * The plan applied to the payload. Returns the payload itself when the plan removes
 * nothing. A strip naming no thinking block (isThinking), or a dropped message not in the
 * payload, is an error: the plan is not this payload's, and the caller fails open.
 */
export function applyPlan(
  payload: Record<string, unknown> & { messages: unknown[] },
  strips: { path?: unknown }[],
  dropped: unknown[],
  isThinking: (block: unknown) => boolean,
  what = "thinking block",
): Record<string, unknown> {
  if (strips.length === 0 && dropped.length === 0) return payload;
  const cut = new Map<number, Set<number>>();
  for (const s of strips) {
    const p = typeof s?.path === "string" ? pathPos(s.path) : undefined;
    if (!p) throw new Error(`bindery plan: strip path ${String(s?.path)} is not messages.N.content.M`);
    const block = (payload.messages[p[0]] as { content?: unknown[] } | undefined)?.content?.[p[1]];
    if (!isThinking(block)) throw new Error(`bindery plan: ${s.path} is not a ${what}`);
    (cut.get(p[0]) ?? cut.set(p[0], new Set()).get(p[0])!).add(p[1]);
  }
  const gone = new Set<number>();
  for (const d of dropped) {
    const n = typeof d === "string" ? messagePos(d) : undefined;
    if (n === undefined || n >= payload.messages.length) throw new Error(`bindery plan: dropped message ${String(d)} is not in the request`);
    gone.add(n);
  }
  const messages: unknown[] = [];
  payload.messages.forEach((m, i) => {
    if (gone.has(i)) return;
    const c = cut.get(i);
    if (!c) {
      messages.push(m);
      return;
    }
    const content = ((m as { content: unknown[] }).content ?? []).filter((_b, j) => !c.has(j));
    messages.push({ ...(m as object), content });
  });
  return { ...payload, messages };
}

/**
 * What the extension keeps of its last compile in a session, to send the next one by
 * reference: its id, its messages as the call carried them (JSON.stringify writes the call
 * whole, so the messages array is JSON.stringify(messages)), where each message ends in
 * that text, and the SHA-256 state over the messages it shared with its own base, so the
 * next digest hashes only what is new.
 */
export interface CompileBaseMemo {
  compileId: string;
  json: string;
  /** ends[i]: the offset in json just past message i. */
  ends: number[];
  /** The hash state over json.slice(1, ends[hashed - 1]) (nothing when hashed is 0). */
  hash: Hash;
  hashed: number;
}

/** A turn's messages, ready to compile by reference to the memo and to become the next memo. */
export interface MessagesText {
  json: string;
  ends: number[];
}

/**
 * The messages as JSON.stringify writes them, with each one's end. The memo's messages that
 * this text begins with keep their ends (their text is the same); only the messages after
 * them are written again on their own, to find where they end.
 */
export function messagesText(messages: unknown[], memo: CompileBaseMemo | undefined): { text: MessagesText; shared: number } {
  const json = JSON.stringify(messages);
  const shared = memo ? sharedMessages(memo, json, messages.length) : 0;
  const ends = memo ? memo.ends.slice(0, shared) : [];
  let at = shared > 0 ? ends[shared - 1] : 1;
  for (let i = shared; i < messages.length; i++) {
    if (i > 0) at++; // the ","
    at += (JSON.stringify(messages[i]) ?? "null").length;
    ends.push(at);
  }
  return { text: { json, ends }, shared };
}

/**
 * How many leading messages the text shares with the memo's, byte for byte: the most k
 * such that the text begins with the memo's first k messages (JSON values delimit
 * themselves, so a common prefix through the k-th message's end is those k messages).
 * Tried first as pi grows a conversation (all of them, or all but the last, whose cache
 * marker moved), then by bisection (an edit further back).
 */
function sharedMessages(memo: CompileBaseMemo, json: string, count: number): number {
  const upTo = Math.min(memo.ends.length, count);
  // (substring equality: V8 compares flat strings with memcmp, several times faster than startsWith)
  const holds = (k: number) => k === 0 || (json.length >= memo.ends[k - 1] && json.substring(0, memo.ends[k - 1]) === memo.json.substring(0, memo.ends[k - 1]));
  if (holds(upTo)) return upTo;
  if (upTo > 0 && holds(upTo - 1)) return upTo - 1;
  let lo = 0; // holds
  let hi = upTo - 1; // does not hold
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (holds(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/**
 * The digest of the first n messages (api/doc.go: SHA-256 of their text, separators
 * included, brackets not), from the memo's hash state when the shared part only grew, and
 * that state carried to n for the next turn.
 */
export function sharedDigest(memo: CompileBaseMemo, text: MessagesText, n: number): { digest: string; hash: Hash } {
  let hash: Hash;
  if (memo.hashed > 0 && memo.hashed <= n) {
    hash = memo.hash.copy();
    hash.update(text.json.slice(text.ends[memo.hashed - 1], text.ends[n - 1]), "utf8");
  } else {
    hash = createHash("sha256");
    hash.update(text.json.slice(1, text.ends[n - 1]), "utf8");
  }
  return { digest: hash.copy().digest("hex"), hash };
}

/** The memo a compile leaves for the next: hash covers the first `hashed` messages of text. */
export function compileBaseMemo(compileId: string, text: MessagesText, hash: Hash | undefined, hashed: number): CompileBaseMemo {
  return { compileId, json: text.json, ends: text.ends, hash: hash ?? createHash("sha256"), hashed: hash ? hashed : 0 };
}
