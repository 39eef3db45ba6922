/**
 * pi-bindery: routes every request pi makes to Claude (Anthropic's API, Amazon Bedrock)
 * through the bindery daemon, so pi replays exactly the signed thinking the provider will
 * accept.
 *
 * Hooks (pi-coding-agent 0.73 shapes, unchanged in 1.x; 1.x-only hooks marked):
 * - before_provider_request {payload}: pi's final provider params. POST /v1/compile with
 *   the session id, leaf id and session file; return bindery's rewritten request.
 *   pi runs every `context` handler (where pruners such as pi-condense rewrite history)
 *   before it serialises the payload, so those changes are always in what bindery sees.
 *   Among before_provider_request handlers pi runs extensions in load order: load this one
 *   last (README) so payload-level rewriters run before it.
 * - message_end {message}: for the assistant message answering the compile, POST
 *   /v1/accept with the reply in wire shape, or, on a prefix-binding 400 (stopReason
 *   "error"), POST /v1/release with the path the provider named.
 * - provider_stream_event (pi 1.x): input_transformations from the raw stream.
 * - session_start: reset the per-session footer counters.
 * A fetch wrapper (beta-header.ts), installed at load, reads the body pi actually sends
 * (pi 1.x trims a thread continue after the payload hook; no hook shows it) and, on pi
 * 0.x, adds the drop_block beta header and reads drops from a copy of the stream.
 */
import { BinderyBridge, ENTRY_TYPE, STATUS_KEY, piReporter } from "./bridge.js";
import { installDropBlockHeader, installFetchWrapper, onInputTransformations, onSentRequest, streamEventsDelivered } from "./beta-header.js";
import type { PiContext, PiExtensionAPI } from "./pi-types.js";
import { converseTransformations } from "./converse.js";
import { loadSettings } from "./settings.js";

export default function bindery(pi: PiExtensionAPI): void {
  const { settings, warnings } = loadSettings(process.cwd());
  const bridge = new BinderyBridge(settings, piReporter, (persist) => {
    installDropBlockHeader();
    if (persist) pi.appendEntry(ENTRY_TYPE, { dropBlock: true });
  });
  onInputTransformations((t) => bridge.receiveTransformations(t));
  if (settings.enabled) {
    onSentRequest((shape) => bridge.receiveSent(shape));
    installFetchWrapper();
  }
  let warned = false;

  pi.on("session_start", (_event: unknown, ctx: PiContext) => {
    if (!warned && warnings.length > 0) {
      warned = true;
      piReporter.notify(ctx, `bindery settings: ${warnings.join("; ")}`, "warning");
    }
    if (!settings.enabled) {
      ctx.ui.setStatus(STATUS_KEY, undefined);
      return;
    }
    bridge.sessionStart(ctx);
  });

  pi.on("before_provider_request", (event: { payload: unknown }, ctx: PiContext) =>
    bridge.beforeProviderRequest(event.payload, ctx),
  );

  // pi 1.x: the provider's raw stream events. input_transformations ride on message_start
  // (and on a message_delta after a server-side fallback); reading them here replaces
  // tee-ing the response stream in the fetch wrapper (pi 0.x has no such hook).
  // On the Bedrock route the events are ConverseStream's: input_transformations ride on
  // messageStop's additionalModelResponseFields (when the request asked for them, converse.ts).
  pi.on("provider_stream_event", (event: { data?: { type?: string; message?: { input_transformations?: unknown }; input_transformations?: unknown } }) => {
    streamEventsDelivered();
    const d = event?.data;
    const t = d?.type === "message_start" ? d.message?.input_transformations : d?.type === "message_delta" ? d.input_transformations : converseTransformations(d);
    if (Array.isArray(t)) bridge.receiveTransformations(t);
  });

  pi.on("message_end", (event: { message: unknown }, ctx: PiContext) => {
    // Not awaited: accept and release run off pi's loop; pi appends the message now.
    bridge.messageEnd(event.message, ctx);
  });

  pi.on("session_shutdown", async () => {
    // Let a last accept reach bindery before pi exits (each call has a short deadline).
    await bridge.settle();
    bridge.stopProbe();
  });
}

export { BinderyBridge } from "./bridge.js";
export { loadSettings, defaultSocketPath } from "./settings.js";
export { toWireReply, toWireUsage, parseBindingRefusal } from "./wire.js";
