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
 * reference: its id, its messages as the call carried them (each one's JSON.stringify
 * text: the call's messages array is them joined with ","), each message's JSON data as it
 * was then (jsonView), and the SHA-256 state over the messages it shared with its own base,
 * so the next digest hashes only what is new.
 */
export interface CompileBaseMemo {
  compileId: string;
  parts: string[];
  views: unknown[];
  /** The hash state over parts[0..hashed-1] joined with "," (nothing when hashed is 0). */
  hash: Hash;
  hashed: number;
}

/** A turn's messages, ready to compile by reference to the memo and to become the next memo. */
export interface MessagesText {
  /** parts[i]: message i as JSON.stringify writes it. */
  parts: string[];
  /** views[i]: message i's JSON data when parts[i] was written. */
  views: unknown[];
}

/** The messages array as JSON.stringify writes it (a full compile's call carries it). */
export function messagesJson(text: MessagesText): string {
  return `[${text.parts.join(",")}]`;
}

/**
 * The messages' text, message by message. Those the memo's messages begin with, the same
 * JSON data (sameJson against the memo's views), keep the memo's text: pi rebuilds its
 * payload every turn, but an unchanged history is not written again, only the messages
 * after it. Comparing is cheaper than writing: no escaping, no copy, and pi's strings are
 * mostly the same strings turn after turn (=== on one string is a pointer test).
 */
export function messagesText(messages: unknown[], memo: CompileBaseMemo | undefined): { text: MessagesText; shared: number } {
  let shared = 0;
  if (memo) {
    const upTo = Math.min(memo.views.length, messages.length);
    while (shared < upTo && sameJson(messages[shared], memo.views[shared])) shared++;
  }
  const parts = memo ? memo.parts.slice(0, shared) : [];
  const views = memo ? memo.views.slice(0, shared) : [];
  for (let i = shared; i < messages.length; i++) {
    const m = messages[i];
    parts.push(JSON.stringify(m) ?? "null");
    // Taken in the same synchronous step as the text: nothing can change m in between.
    views.push(omitted(m) ? null : jsonView(m));
  }
  return { text: { parts, views }, shared };
}

/** A value JSON.stringify leaves out of an object (and writes as null in an array). */
function omitted(v: unknown): boolean {
  return v === undefined || typeof v === "function" || typeof v === "symbol";
}

/** A view that equals nothing: data JSON.stringify may write in a way sameJson does not model. */
const OPAQUE: unique symbol = Symbol("not plain JSON data");

/** A plain object's view: its keys JSON.stringify writes, in its order, and their values' views. */
class ObjectView {
  constructor(
    readonly keys: string[],
    readonly values: unknown[],
  ) {}
}

function plainArray(v: object): v is unknown[] {
  return Array.isArray(v) && Object.getPrototypeOf(v) === Array.prototype && typeof (v as { toJSON?: unknown }).toJSON !== "function";
}

function plainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v);
  return (proto === Object.prototype || proto === null) && typeof (v as { toJSON?: unknown }).toJSON !== "function";
}

/**
 * v's JSON data, detached from v: what JSON.stringify(v) reads of it (own enumerable keys in
 * order, values it does not leave out, array elements it writes as null as null), sharing
 * v's strings (immutable). Anything but plain objects, arrays and primitives (a Date, a
 * typed array, a toJSON, a bigint) is OPAQUE: its message is written again each turn.
 */
export function jsonView(v: unknown): unknown {
  if (typeof v !== "object" || v === null) return typeof v === "bigint" ? OPAQUE : v;
  if (plainArray(v)) return v.map((x) => (omitted(x) ? null : jsonView(x)));
  if (Array.isArray(v) || !plainObject(v)) return OPAQUE;
  const keys: string[] = [];
  const values: unknown[] = [];
  for (const k of Object.keys(v)) {
    const x = v[k];
    if (omitted(x)) continue;
    keys.push(k);
    values.push(jsonView(x));
  }
  return new ObjectView(keys, values);
}

/**
 * Whether JSON.stringify(v) writes exactly the text of the data view was taken from. Sound
 * one way only, which is the way that matters: true means the same text (a wrong true would
 * send bindery old bytes for a changed message); a false for equal text (NaN against
 * Infinity aside, an OPAQUE part) only sends that message again.
 */
export function sameJson(v: unknown, view: unknown): boolean {
  if (typeof v !== "object" || v === null) {
    if (typeof v === "number") return typeof view === "number" && (v === view || (!Number.isFinite(v) && !Number.isFinite(view)));
    if (typeof v === "string" || typeof v === "boolean" || v === null) return v === view;
    return false; // undefined, a function or a symbol here is the caller's to place; a bigint never
  }
  if (view instanceof ObjectView) {
    if (Array.isArray(v) || !plainObject(v)) return false;
    let j = 0;
    for (const k of Object.keys(v)) {
      const x = v[k];
      if (omitted(x)) continue;
      if (j >= view.keys.length || view.keys[j] !== k || !sameJson(x, view.values[j])) return false;
      j++;
    }
    return j === view.keys.length;
  }
  if (!Array.isArray(view) || !plainArray(v) || v.length !== view.length) return false;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (omitted(x) ? view[i] !== null : !sameJson(x, view[i])) return false;
  }
  return true;
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
    if (n > memo.hashed) hash.update(`,${text.parts.slice(memo.hashed, n).join(",")}`, "utf8");
  } else {
    hash = createHash("sha256");
    hash.update(text.parts.slice(0, n).join(","), "utf8");
  }
  return { digest: hash.copy().digest("hex"), hash };
}

/** The memo a compile leaves for the next: hash covers the first `hashed` messages of text. */
export function compileBaseMemo(compileId: string, text: MessagesText, hash: Hash | undefined, hashed: number): CompileBaseMemo {
  return { compileId, parts: text.parts, views: text.views, hash: hash ?? createHash("sha256"), hashed: hash ? hashed : 0 };
}
