import { DROP_BLOCK_BETA } from "./bridge.js";

let installed = false;

/**
 * pi builds the provider's headers before before_provider_request runs and gives
 * extensions no per-request header hook, so the drop_block beta rides on a fetch wrapper:
 * it touches only POSTs to a /v1/messages URL whose JSON body carries
 * `thinking.block_binding` (a field only this extension adds, only when the dropBlock
 * setting is on), and appends the beta to any anthropic-beta value pi already set.
 * Installed lazily, the first time a session turns drop_block on.
 */
export function installDropBlockHeader(): void {
  if (installed) return;
  installed = true;
  const inner = globalThis.fetch;
  globalThis.fetch = async function binderyFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    try {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const body = init?.body;
      if (/\/v1\/messages(\?|$)/.test(url) && typeof body === "string" && body.includes('"block_binding"')) {
        const headers = new Headers(init?.headers);
        const betas = (headers.get("anthropic-beta") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
        if (!betas.includes(DROP_BLOCK_BETA)) betas.push(DROP_BLOCK_BETA);
        headers.set("anthropic-beta", betas.join(","));
        return inner(input, { ...init, headers });
      }
    } catch {
      // never let the wrapper break a request: fall through unchanged
    }
    return inner(input, init);
  } as typeof fetch;
}
