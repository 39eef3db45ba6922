import { Agent, request, type ClientRequest } from "node:http";

/** A call's body already written as JSON: sent as it is, not stringified again. */
export class JsonText {
  constructor(readonly text: string) {}
}

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
 * deadline covering connect, send and the whole answer. The connection is kept alive
 * between calls (a turn's compile and accept, and the next turn's, share it); idle, it
 * does not keep pi's process alive (node's agent unrefs a free socket). The one retry: a
 * call whose kept-alive connection the daemon had already closed (it restarted, or its
 * idle timeout passed) is sent once more on a new one; nothing else is retried (the
 * caller fails open).
 */
export class BinderyClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 4 });

  constructor(readonly socketPath: string) {}

  /** Closes the kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  /** `signal`: pi's abort signal for the turn; an abort ends the wait at once. */
  call<T>(method: "GET" | "POST", path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(body instanceof JsonText ? body.text : JSON.stringify(body), "utf8");
    const deadline = Date.now() + timeoutMs;
    return this.send<T>(method, path, payload, timeoutMs, deadline, signal, true);
  }

  private send<T>(
    method: "GET" | "POST",
    path: string,
    payload: Buffer | undefined,
    timeoutMs: number,
    deadline: number,
    signal: AbortSignal | undefined,
    mayRetry: boolean,
  ): Promise<T> {
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
      const req: ClientRequest = request({
        socketPath: this.socketPath,
        path,
        method,
        headers: {
          host: "bindery",
          accept: "application/json",
          ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
        },
        agent: this.agent,
      });
      const timer = setTimeout(
        () => finish(new BinderyError("timeout", `bindery ${method} ${path}: no answer within ${timeoutMs} ms`)),
        Math.max(0, deadline - Date.now()),
      );
      req.on("error", (err: NodeJS.ErrnoException) => {
        if (mayRetry && req.reusedSocket && (err.code === "ECONNRESET" || err.code === "EPIPE") && !settled && !signal?.aborted) {
          // The daemon closed the kept-alive connection before this call reached it.
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.send<T>(method, path, payload, timeoutMs, deadline, signal, false).then(resolve, reject);
          return;
        }
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
