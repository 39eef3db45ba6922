/**
 * A scripted stand-in for bindery's socket, used only by the extension's unit tests to
 * produce what a real daemon rarely does on demand (a slow answer, an error, garbage) and
 * to record the exact calls the extension makes. End-to-end tests use the real daemon.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Call {
  method: string;
  path: string;
  body: any;
}

export type Handler = (call: Call, res: ServerResponse) => void | Promise<void>;

export class StubDaemon {
  readonly calls: Call[] = [];
  readonly dir = mkdtempSync(join(tmpdir(), "bd"));
  readonly socketPath = join(this.dir, "bindery.sock");
  handler: Handler = defaultHandler;
  private server: Server | undefined;

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(this.socketPath, r));
    return this;
  }

  async stop(): Promise<void> {
    if (this.server) {
      this.server.closeAllConnections();
      await new Promise<void>((r) => this.server!.close(() => r()));
      this.server = undefined;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  paths(): string[] {
    return this.calls.map((c) => c.path);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const call: Call = { method: req.method ?? "", path: req.url ?? "", body: text ? JSON.parse(text) : undefined };
      this.calls.push(call);
      void this.handler(call, res);
    });
  }
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** Answers like bindery with nothing to strip: the request back, unchanged. */
export const defaultHandler: Handler = (call, res) => {
  if (call.path === "/v1/compile") {
    json(res, 200, { compileId: `c${call.body.branch ?? ""}-${Math.random().toString(36).slice(2)}`, engaged: true, thinkingStripped: 0, strips: [], droppedMessages: [], request: call.body.request });
  } else if (call.path === "/v1/accept") json(res, 200, { accepted: true, stamped: 1, released: 0 });
  else if (call.path === "/v1/release") json(res, 200, { released: 2 });
  else json(res, 404, { error: { code: "not_found", message: call.path } });
};
