// pi's Bedrock route (api "bedrock-converse-stream", provider amazon-bedrock): its payload at
// before_provider_request is a Converse ConverseStreamCommand input, an object graph that
// holds binary fields as Uint8Array (reasoningContent.redactedContent, image and document
// bytes). bindery reads Converse bodies as JSON, where AWS's JSON protocol writes a blob as
// its base64 text, so the payload goes to bindery in that form; bindery's plan (the paths it
// strips, the messages the strip empties) is then applied to pi's own object, which keeps its
// Uint8Arrays, rather than taking back the rewritten JSON. Shapes read from @earendil-works/pi-ai
// 1.6.0 dist/api/bedrock-converse-stream.js.

import type { PiAssistantMessage } from "./pi-types.js";
import { dropLoneSurrogates } from "./wire.js";
import { applyPlan } from "./plan.js";

export const CONVERSE_API = "bedrock-converse-stream";
/** The JSON Pointer Converse takes in additionalModelResponseFieldPaths to return the model's input_transformations. */
export const TRANSFORMATIONS_POINTER = "/input_transformations";
const BINDING_BETA = "thinking-binding-controls-2026-08-01";

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Whether a payload is a Converse request (pi's Bedrock route builds it with modelId first). */
export function isConverseBody(payload: unknown): payload is Record<string, unknown> & { messages: unknown[] } {
  return isObject(payload) && typeof payload.modelId === "string" && Array.isArray(payload.messages);
}

/**
 * Whether a Bedrock request goes to a Claude model, as pi itself decides it (isAnthropicClaudeModel:
 * the model id, or for an application inference profile whose ARN names no model, the model's name).
 */
export function isBedrockClaude(model: { id?: string; name?: string } | undefined, payload: Record<string, unknown>): boolean {
  const id = String(model?.id ?? payload.modelId ?? "").toLowerCase();
  const name = String(model?.name ?? "").toLowerCase();
  return id.includes("anthropic.claude") || id.includes("anthropic/claude") || name.includes("claude");
}

/** Whether a Converse payload asks Bedrock for the model's input_transformations. */
export function asksTransformations(payload: Record<string, unknown>): boolean {
  const p = payload.additionalModelResponseFieldPaths;
  return Array.isArray(p) && p.includes(TRANSFORMATIONS_POINTER);
}

/**
 * The payload as JSON text the way the AWS SDK writes it: every Uint8Array as its base64
 * text. Other values as JSON.stringify writes them.
 */
export function converseJson(payload: unknown): string {
  return JSON.stringify(payload, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") : v));
}

/** The parsed JSON value of the payload (what bindery is sent as `request`). */
export function converseRequest(payload: unknown): unknown {
  return JSON.parse(converseJson(payload));
}

function pathPos(path: string): [number, number] | undefined {
  const m = /^messages\.(\d+)\.content\.(\d+)$/.exec(path);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/**
 * bindery's plan applied to pi's payload (plan.ts): the blocks at the strips' paths and the
 * messages it names as emptied are left out (paths index the payload as pi built it).
 * Everything else is pi's own object, Uint8Arrays included.
 */
export function applyConversePlan(
  payload: Record<string, unknown> & { messages: unknown[] },
  strips: { path?: unknown }[],
  dropped: unknown[],
): Record<string, unknown> {
  return applyPlan(payload, strips, dropped, isReasoning, "reasoning block");
}

export function isReasoning(b: unknown): boolean {
  return isObject(b) && isObject(b.reasoningContent);
}

/** Reasoning blocks in a Converse payload (the footer's "kept"). */
export function countConverseThinking(payload: { messages?: unknown }): number {
  let n = 0;
  for (const m of Array.isArray(payload.messages) ? payload.messages : []) {
    const c = (m as { content?: unknown })?.content;
    if (Array.isArray(c)) for (const b of c) if (isReasoning(b)) n++;
  }
  return n;
}

/** The signature (or the redacted bytes' base64 text) of the reasoning block at a path of the payload. */
export function converseKeyAt(payload: { messages?: unknown }, path: string): string | undefined {
  const p = pathPos(path);
  if (!p || !Array.isArray(payload.messages)) return undefined;
  const block = (payload.messages[p[0]] as { content?: unknown[] } | undefined)?.content?.[p[1]];
  if (!isReasoning(block)) return undefined;
  const rc = (block as { reasoningContent: Record<string, unknown> }).reasoningContent;
  const sig = (rc.reasoningText as { signature?: unknown } | undefined)?.signature;
  if (typeof sig === "string") return sig;
  const red = rc.redactedContent;
  if (red instanceof Uint8Array) return Buffer.from(red.buffer, red.byteOffset, red.byteLength).toString("base64");
  return typeof red === "string" ? red : undefined;
}

/** The fail-closed Converse payload: every reasoning block out, messages left empty dropped. */
export function stripAllConverseThinking(payload: Record<string, unknown> & { messages: unknown[] }): Record<string, unknown> {
  const messages: unknown[] = [];
  for (const m of payload.messages) {
    const c = (m as { content?: unknown })?.content;
    if (!Array.isArray(c) || !c.some(isReasoning)) {
      messages.push(m);
      continue;
    }
    const kept = c.filter((b) => !isReasoning(b));
    if (kept.some((b) => !(isObject(b) && "cachePoint" in b))) messages.push({ ...(m as object), content: kept });
  }
  return { ...payload, messages };
}

/**
 * Asks Bedrock to return the model's input_transformations (in the messageStop event's
 * additionalModelResponseFields) when the request carries the beta under which the model
 * reports them: pi 1.6 sends it with block_binding on the models that bind. A pointer to a
 * field the response lacks is ignored by Converse, so asking costs nothing; the field is
 * outside the prefix (only system, tools and messages are in it).
 */
export function withTransformationsPointer(payload: Record<string, unknown>): Record<string, unknown> {
  const amrf = payload.additionalModelRequestFields;
  const betas = isObject(amrf) ? amrf.anthropic_beta : undefined;
  if (!Array.isArray(betas) || !betas.includes(BINDING_BETA)) return payload;
  const paths = Array.isArray(payload.additionalModelResponseFieldPaths) ? (payload.additionalModelResponseFieldPaths as unknown[]) : [];
  if (paths.includes(TRANSFORMATIONS_POINTER)) return payload;
  return { ...payload, additionalModelResponseFieldPaths: [...paths, TRANSFORMATIONS_POINTER] };
}

/**
 * input_transformations from one of pi 1.x's provider_stream_event items on the Bedrock route
 * (the SDK's decoded ConverseStream event: {messageStop: {stopReason,
 * additionalModelResponseFields}}), or undefined.
 */
export function converseTransformations(item: unknown): unknown[] | undefined {
  const stop = isObject(item) ? item.messageStop : undefined;
  const amrf = isObject(stop) ? stop.additionalModelResponseFields : undefined;
  const t = isObject(amrf) ? amrf.input_transformations : undefined;
  return Array.isArray(t) ? t : undefined;
}

type ConverseBlock = Record<string, unknown>;

/** pi's sanitizeBedrockDocument: members with an empty key are left out, at any depth. */
function sanitizeDocument(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sanitizeDocument);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).filter(([k]) => k.length > 0).map(([k, x]) => [k, sanitizeDocument(x)]));
  }
  return v;
}

/**
 * pi's assistant message in the Converse wire shape, as pi's Bedrock serializer replays it to
 * a Claude model (convertMessages, case "assistant"): text -> {text} (blank skipped); toolCall
 * -> {toolUse: {toolUseId, name, input}}; redacted thinking -> {reasoningContent:
 * {redactedContent}} (the bytes as pi keeps them, base64); signed thinking ->
 * {reasoningContent: {reasoningText: {text, signature}}}; unsigned thinking -> {text}; blank
 * thinking skipped (pi drops it, signed or not). Lone surrogates go, as pi's sanitizer does.
 */
export function toConverseReply(message: PiAssistantMessage): { role: "assistant"; content: ConverseBlock[] } {
  const content: ConverseBlock[] = [];
  for (const b of message.content ?? []) {
    switch (b.type) {
      case "text": {
        const text = (b as { text?: unknown }).text;
        if (typeof text === "string") {
          const s = dropLoneSurrogates(text);
          if (s.trim() !== "") content.push({ text: s });
        }
        break;
      }
      case "toolCall": {
        const c = b as { id?: unknown; name?: unknown; arguments?: unknown };
        content.push({ toolUse: { toolUseId: String(c.id ?? ""), name: String(c.name ?? ""), input: sanitizeDocument(c.arguments ?? {}) } });
        break;
      }
      case "thinking": {
        const t = b as { thinking?: unknown; thinkingSignature?: unknown; redacted?: unknown };
        const sig = typeof t.thinkingSignature === "string" ? t.thinkingSignature : "";
        if (t.redacted === true) {
          if (sig !== "") content.push({ reasoningContent: { redactedContent: sig } });
          break;
        }
        const text = dropLoneSurrogates(typeof t.thinking === "string" ? t.thinking : "");
        if (text.trim() === "") break;
        if (sig.trim() === "") content.push({ text });
        else content.push({ reasoningContent: { reasoningText: { text, signature: sig } } });
        break;
      }
      default:
        break;
    }
  }
  return { role: "assistant", content };
}
