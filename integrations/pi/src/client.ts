import { request } from "node:http";

/** Why a call to bindery did not produce an answer. */
export type FailureKind = "down" | "timeout" | "http" | "protocol" | "aborted";

export class BinderyError extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
    this.name = "BinderyError";
  }
}

/**
 * HTTP/1.1 + JSON over bindery's Unix socket with node:http only. Every call has a hard
 * deadline covering connect, send and the whole answer; no retries (the caller fails open).
 */
export class BinderyClient {
  constructor(readonly socketPath: string) {}

  /** `signal`: pi's abort signal for the turn; an abort ends the wait at once. */
  call<T>(method: "GET" | "POST", path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body), "utf8");
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const onAbort = () => finish(new BinderyError("aborted", `bindery ${method} ${path}: aborted`));
      const finish = (err: BinderyError | null, value?: T) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err) {
          req.destroy();
          reject(err);
        } else resolve(value as T);
      };
      const req = request({
        socketPath: this.socketPath,
        path,
        method,
        headers: {
          host: "bindery",
          accept: "application/json",
          ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
        },
        agent: false,
      });
      const timer = setTimeout(
        () => finish(new BinderyError("timeout", `bindery ${method} ${path}: no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      req.on("error", (err: NodeJS.ErrnoException) => {
        const down = err.code === "ENOENT" || err.code === "ECONNREFUSED" || err.code === "EACCES" || err.code === "ENOTSOCK";
        finish(new BinderyError(down ? "down" : "protocol", `bindery ${method} ${path}: ${err.code ?? err.message} (${this.socketPath})`));
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", (err) => finish(new BinderyError("protocol", `bindery ${method} ${path}: ${err.message}`)));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown;
          try {
            parsed = text === "" ? undefined : JSON.parse(text);
          } catch {
            finish(new BinderyError("protocol", `bindery ${method} ${path}: answer is not JSON (status ${res.statusCode})`, res.statusCode));
            return;
          }
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            const e = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
            finish(
              new BinderyError("http", `bindery ${method} ${path}: ${status} ${e?.code ?? ""} ${e?.message ?? text}`.trim(), status, e?.code),
            );
            return;
          }
          finish(null, parsed as T);
        });
      });
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      if (payload) req.end(payload);
      else req.end();
    });
  }
}
