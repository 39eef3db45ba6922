/**
 * pi-bindery: routes every Anthropic request pi makes through the bindery daemon, so pi
 * replays exactly the signed thinking the provider will accept.
 *
 * Hooks (pi-coding-agent 0.73 shapes):
 * - before_provider_request {payload}: pi's final provider params. POST /v1/compile with
 *   the session id, leaf id and session file; return bindery's rewritten request.
 *   pi runs every `context` handler (where pruners such as pi-condense rewrite history)
 *   before it serialises the payload, so those changes are always in what bindery sees.
 *   Among before_provider_request handlers pi runs extensions in load order: load this one
 *   last (README) so payload-level rewriters run before it.
 * - message_end {message}: for the assistant message answering the compile, POST
 *   /v1/accept with the reply in wire shape, or, on a prefix-binding 400 (stopReason
 *   "error"), POST /v1/release with the path the provider named.
 * - session_start: reset the per-session footer counters.
 */
import { BinderyBridge, ENTRY_TYPE, STATUS_KEY, piReporter } from "./bridge.js";
import { installDropBlockHeader, installFetchWrapper, onInputTransformations, onSentRequest } from "./beta-header.js";
import type { PiContext, PiExtensionAPI } from "./pi-types.js";
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

  pi.on("message_end", (event: { message: unknown }, ctx: PiContext) => {
    // Not awaited: accept and release run off pi's loop; pi appends the message now.
    bridge.messageEnd(event.message, ctx);
  });

  pi.on("session_shutdown", async () => {
    // Let a last accept reach bindery before pi exits (each call has a short deadline).
    await bridge.settle();
  });
}

export { BinderyBridge } from "./bridge.js";
export { loadSettings, defaultSocketPath } from "./settings.js";
export { toWireReply, toWireUsage, parseBindingRefusal } from "./wire.js";
