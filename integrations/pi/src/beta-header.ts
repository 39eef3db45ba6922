import { DROP_BLOCK_BETA } from "./bridge.js";
import { sentShape, type SentShape } from "./sent-request.js";

let installed = false;
let tagging = false;
let streamEvents = false;

/**
 * pi 1.x delivers the provider's raw stream events to extensions (provider_stream_event):
 * from the first one on, input_transformations come from there (and pi's own diagnostics)
 * and the wrapper stops tee-ing response streams.
 */
export function streamEventsDelivered(): void {
  streamEvents = true;
}
let sink: ((transformations: unknown[]) => void) | undefined;
let sentSink: ((shape: SentShape) => void) | undefined;

/** Where the shape of each Messages body pi sends goes (the bridge, for path mapping). */
export function onSentRequest(fn: (shape: SentShape) => void): void {
  sentSink = fn;
}

/** Where the response's `input_transformations` go (the bridge, for the pending accept). */
export function onInputTransformations(fn: (transformations: unknown[]) => void): void {
  sink = fn;
}

/** Turns on the drop_block beta header (below), the first time a session turns drop_block on. */
export function installDropBlockHeader(): void {
  tagging = true;
  installFetchWrapper();
}

/**
 * The one fetch wrapper, installed when the extension loads. For every POST to a
 * /v1/messages URL it hands the body's shape (sent-request.ts: whether pi trimmed it to a
 * thread continue, its max_tokens, its thinking blocks' signatures) to the bridge, so paths
 * the provider names can be mapped to the compiled request: no pi hook shows the body as
 * sent. It never changes a body, and never fails a request: a wrapper error lets the
 * request through unchanged.
 *
 * pi 0.x builds the provider's headers before before_provider_request runs and gives
 * extensions no per-request header hook, so the drop_block beta rides on this wrapper too
 * (pi 1.6's before_provider_headers would replace pi's own beta list, not extend it):
 * it touches only POSTs to a /v1/messages URL whose JSON body carries
 * `thinking.block_binding` (a field only this extension adds, only when the dropBlock
 * setting is on), and appends the beta to any anthropic-beta value pi already set.
 * With the beta the response reports the blocks the provider dropped in
 * `input_transformations`, which pi does not read: the wrapper reads them from a copy of
 * the stream (message_start, and a later message_delta after a server-side fallback) and
 * hands them on for the accept (pi 1.x reads them itself into the message's diagnostics,
 * which the accept prefers).
 */
export function installFetchWrapper(): void {
  if (installed) return;
  installed = true;
  const inner = globalThis.fetch;
  globalThis.fetch = async function binderyFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    let tagged = false;
    let nextInit = init;
    try {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const body = init?.body;
      const messages = /\/v1\/messages(\?|$)/.test(url) && typeof body === "string";
      if (messages && sentSink) sentSink(sentShape(body));
      if (messages && tagging && body.includes('"block_binding"')) {
        const headers = new Headers(init?.headers);
        const betas = (headers.get("anthropic-beta") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
        if (!betas.includes(DROP_BLOCK_BETA)) betas.push(DROP_BLOCK_BETA);
        headers.set("anthropic-beta", betas.join(","));
        nextInit = { ...init, headers };
        tagged = true;
      }
    } catch {
      // never let the wrapper break a request: fall through unchanged
    }
    const res = await inner(input, nextInit);
    if (!tagged || streamEvents || !res.ok || !res.body || !sink) return res;
    try {
      const [forPi, forUs] = res.body.tee();
      void readTransformations(forUs).then((t) => t && sink?.(t), () => {});
      return new Response(forPi, { status: res.status, statusText: res.statusText, headers: res.headers });
    } catch {
      return res;
    }
  } as typeof fetch;
}

/** The last `input_transformations` array in an SSE stream, if any. */
export async function readTransformations(stream: ReadableStream<Uint8Array>): Promise<unknown[] | undefined> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let found: unknown[] | undefined;
  const take = (event: string) => {
    for (const line of event.split("\n")) {
      if (!line.startsWith("data:") || !line.includes("input_transformations")) continue;
      try {
        const ev = JSON.parse(line.slice(5).trim());
        const t = ev?.message?.input_transformations ?? ev?.input_transformations ?? ev?.delta?.input_transformations;
        if (Array.isArray(t)) found = t;
      } catch {
        // a line we cannot read says nothing about drops
      }
    }
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      take(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
  take(buf);
  return found;
}
