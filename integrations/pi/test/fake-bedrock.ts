/**
 * A fake Amazon Bedrock runtime for tests: ConverseStream (`POST /model/{modelId}/converse-stream`)
 * for Claude, judging thinking blocks as the fake Anthropic API does (fake-anthropic.ts: an
 * enforced account on a binding model), on the model's own Messages request that Bedrock builds
 * from the Converse one, as Bedrock's "Preserved thinking" page says the checks are the same:
 *
 * - The Converse request is translated as Bedrock does for Claude: system and tools from
 *   `system` and `toolConfig.tools[].toolSpec`; content blocks {text}, {toolUse}, {toolResult},
 *   {reasoningContent: {reasoningText}|{redactedContent}} to text, tool_use, tool_result,
 *   thinking, redacted_thinking; a {cachePoint} becomes a cache marker on the block before it
 *   (it takes no place: paths count the blocks without it, binding/converse.go); `thinking`,
 *   `output_config` and `anthropic_beta` from `additionalModelRequestFields`.
 * - A refusal is an HTTP 400 ValidationException carrying the model's message (`messages.N.content.M:
 *   Invalid \`signature\` ... bound to a different conversation ...`), before any event.
 * - The reply streams in AWS event-stream framing (application/vnd.amazon.eventstream), encoded
 *   with @smithy/core's EventStreamCodec, the encoder of pi 1.6's own AWS SDK: messageStart,
 *   contentBlockStart (tool use), contentBlockDelta (text, reasoningContent text then signature,
 *   toolUse input), contentBlockStop, messageStop (stopReason, and additionalModelResponseFields
 *   with input_transformations when the request named "/input_transformations" in
 *   additionalModelResponseFieldPaths and carried the beta), metadata (usage).
 * - Credentials are not checked beyond an Authorization header being present (SigV4 or bearer).
 *
 * Replies are scripted as fake-anthropic.ts's (tools:K, double); redacted thinking is not
 * scripted here (its Converse form is bytes, and the fake's signatures are not base64).
 */
import { createServer, type Http2Server, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { BETA, judge, reply, type Verdict } from "./fake-anthropic.js";

type Json = any;

export interface BedrockRecorded {
  /** The Converse body as pi sent it (JSON, bytes as base64). */
  body: Json;
  /** The model's own request built from it, as judged. */
  native: Json;
  headers: Record<string, string>;
  verdict: Verdict;
  minted: string[];
  warm: boolean;
  stopReason?: string;
}

/** The encoder pi 1.6's AWS SDK decodes with, from that line's node_modules (a dependency pi already has). */
function codecFrom(lineDir: string): { encode(m: { headers: Record<string, { type: string; value: unknown }>; body: Uint8Array }): Uint8Array } {
  const req = createRequire(`${lineDir}/package.json`);
  const { EventStreamCodec } = req("@smithy/core/event-streams");
  const toUtf8 = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("utf8");
  const fromUtf8 = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));
  return new EventStreamCodec(toUtf8, fromUtf8);
}

/** Bedrock's translation of a Converse request for Claude into the model's Messages request. */
export function toNative(cv: Json): { body: Json; headers: Record<string, string> } {
  const block = (b: Json): Json => {
    if (b.text !== undefined) return { type: "text", text: b.text };
    if (b.toolUse) return { type: "tool_use", id: b.toolUse.toolUseId, name: b.toolUse.name, input: b.toolUse.input ?? {} };
    if (b.toolResult) {
      return {
        type: "tool_result",
        tool_use_id: b.toolResult.toolUseId,
        content: blocks((b.toolResult.content ?? []).map((c: Json) => (c.json !== undefined ? { text: JSON.stringify(c.json) } : c))),
        is_error: b.toolResult.status === "error",
      };
    }
    if (b.reasoningContent?.reasoningText) {
      return { type: "thinking", thinking: b.reasoningContent.reasoningText.text, signature: b.reasoningContent.reasoningText.signature ?? "" };
    }
    if (b.reasoningContent?.redactedContent !== undefined) return { type: "redacted_thinking", data: b.reasoningContent.redactedContent };
    if (b.image) return { type: "image", source: { type: "base64", media_type: `image/${b.image.format}`, data: b.image.source?.bytes } };
    return { type: "unsupported", value: b };
  };
  const blocks = (content: Json[]): Json[] => {
    const out: Json[] = [];
    for (const b of content ?? []) {
      if (b.cachePoint) {
        if (out.length > 0) out[out.length - 1] = { ...out[out.length - 1], cache_control: { type: "ephemeral" } };
        continue;
      }
      out.push(block(b));
    }
    return out;
  };
  const amrf = cv.additionalModelRequestFields ?? {};
  const body: Json = {
    model: cv.modelId,
    max_tokens: cv.inferenceConfig?.maxTokens,
    messages: (cv.messages ?? []).map((m: Json) => ({ role: m.role, content: blocks(m.content) })),
  };
  if (cv.system !== undefined) body.system = blocks(cv.system);
  const tools = (cv.toolConfig?.tools ?? []).filter((t: Json) => t.toolSpec);
  if (tools.length > 0) body.tools = tools.map((t: Json) => ({ name: t.toolSpec.name, description: t.toolSpec.description, input_schema: t.toolSpec.inputSchema?.json }));
  if (amrf.thinking !== undefined) body.thinking = amrf.thinking;
  if (amrf.output_config !== undefined) body.output_config = amrf.output_config;
  const headers: Record<string, string> = {};
  if (Array.isArray(amrf.anthropic_beta)) headers["anthropic-beta"] = amrf.anthropic_beta.join(",");
  return { body, headers };
}

export class FakeBedrock {
  readonly requests: BedrockRecorded[] = [];
  private server: Http2Server | undefined;
  private readonly codec;
  baseUrl = "";

  constructor(lineDir: string) {
    this.codec = codecFrom(lineDir);
  }

  async start(): Promise<string> {
    // HTTP/2 cleartext: the SDK's default handler for Bedrock runtime is HTTP/2.
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", r));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    await new Promise<void>((r) => this.server!.close(() => r()));
  }

  refusals(): BedrockRecorded[] {
    return this.requests.filter((r) => r.verdict.status !== 200);
  }

  private error(res: Http2ServerResponse, status: number, type: string, message: string): void {
    res.writeHead(status, { "content-type": "application/json", "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`, "x-amzn-requestid": `req-${this.requests.length}` });
    res.end(JSON.stringify({ message }));
  }

  private handle(req: Http2ServerRequest, res: Http2ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => this.answer(req, res, chunks));
  }

  private event(res: Http2ServerResponse, type: string, payload: Json): void {
    const msg = this.codec.encode({
      headers: {
        ":message-type": { type: "string", value: "event" },
        ":event-type": { type: "string", value: type },
        ":content-type": { type: "string", value: "application/json" },
      },
      body: Buffer.from(JSON.stringify(payload)),
    });
    res.write(Buffer.from(msg.buffer, msg.byteOffset, msg.byteLength));
  }

  private answer(req: Http2ServerRequest, res: Http2ServerResponse, chunks: Buffer[]): void {
    const m = /^\/model\/([^/]+)\/converse-stream$/.exec(req.url ?? "");
    if (req.method !== "POST" || !m) return this.error(res, 404, "UnknownOperationException", `${req.method} ${req.url}`);
    if (!req.headers.authorization) return this.error(res, 403, "AccessDeniedException", "no credentials");
    let cv: Json;
    try {
      cv = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return this.error(res, 400, "ValidationException", "body is not JSON");
    }
    cv.modelId ??= decodeURIComponent(m[1]);
    const native = toNative(cv);
    const { verdict, lastRead } = judge(native.body, native.headers);
    const warm = cv.inferenceConfig?.maxTokens === 1;
    const rec: BedrockRecorded = { body: cv, native: native.body, headers: native.headers, verdict, minted: [], warm };
    this.requests.push(rec);
    if (verdict.status !== 200) return this.error(res, 400, "ValidationException", verdict.error ?? "refused");
    const plan = warm ? { blocks: [{ type: "text", text: "." }], stopReason: "max_tokens" } : reply(native.body, lastRead, verdict);
    rec.minted = plan.blocks.filter((b: Json) => b.type === "thinking").map((b: Json) => b.signature);
    rec.stopReason = plan.stopReason;
    res.writeHead(200, { "content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": `req-${this.requests.length}` });
    this.event(res, "messageStart", { role: "assistant" });
    plan.blocks.forEach((b: Json, i: number) => {
      if (b.type === "thinking") {
        this.event(res, "contentBlockDelta", { contentBlockIndex: i, delta: { reasoningContent: { text: b.thinking } } });
        this.event(res, "contentBlockDelta", { contentBlockIndex: i, delta: { reasoningContent: { signature: b.signature } } });
      } else if (b.type === "text") {
        this.event(res, "contentBlockDelta", { contentBlockIndex: i, delta: { text: b.text } });
      } else if (b.type === "tool_use") {
        this.event(res, "contentBlockStart", { contentBlockIndex: i, start: { toolUse: { toolUseId: b.id, name: b.name } } });
        this.event(res, "contentBlockDelta", { contentBlockIndex: i, delta: { toolUse: { input: JSON.stringify(b.input) } } });
      }
      this.event(res, "contentBlockStop", { contentBlockIndex: i });
    });
    const asked = Array.isArray(cv.additionalModelResponseFieldPaths) && cv.additionalModelResponseFieldPaths.includes("/input_transformations");
    const beta = String(native.headers["anthropic-beta"] ?? "").split(",").includes(BETA);
    const stopReason = plan.stopReason === "tool_use" ? "tool_use" : plan.stopReason === "max_tokens" ? "max_tokens" : "end_turn";
    this.event(res, "messageStop", { stopReason, ...(asked && beta ? { additionalModelResponseFields: { input_transformations: verdict.transformations } } : {}) });
    const input = Math.ceil(JSON.stringify(cv).length / 4);
    this.event(res, "metadata", { usage: { inputTokens: input, outputTokens: 20, totalTokens: input + 20, cacheReadInputTokens: 0, cacheWriteInputTokens: 0 }, metrics: { latencyMs: 1 } });
    res.end();
  }
}
