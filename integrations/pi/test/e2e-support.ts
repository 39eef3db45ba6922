/**
 * Real processes for the end-to-end tests: the real `bindery serve`, the real pi CLI in
 * print mode with an isolated PI_CODING_AGENT_DIR, and the fake Anthropic server.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// Every root this process made, removed when it exits (left behind, each
// run of the suite left some seventy folders in the temporary folder).
const roots: string[] = [];
process.once("exit", () => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

export function tempRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "bde"));
  roots.push(root);
  return root;
}

const here = dirname(fileURLToPath(import.meta.url)); // dist/test
export const packageDir = resolve(here, "..", "..");
export const repoRoot = resolve(packageDir, "..", "..");
export const fixtures = join(packageDir, "test", "fixtures");
// pi's CLI from the devDependency (its exports map hides the path from resolve); PI_CLI overrides.
export const piCli = process.env.PI_CLI ?? join(packageDir, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "cli.js");
export const MODEL = "claude-fable-5-2";
/** The pi line under test (ci.sh sets it from pi-lines.json); the devDependency's 0.73 otherwise. */
export const piLine = process.env.PI_LINE ?? "pi-0.73";
export const piVersion = process.env.PI_VERSION ?? "0.73.1";
/** pi 1.x: built-in models send pi's own binding controls and use message threads. */
export const piIs1x = /^1\./.test(piVersion);

function post(socketPath: string, path: string, body: unknown, timeoutMs = 3000): Promise<{ status: number; body: any }> {
  return new Promise((res, rej) => {
    const data = JSON.stringify(body);
    const req = request({ socketPath, path, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } }, (r) => {
      const chunks: Buffer[] = [];
      r.on("data", (c) => chunks.push(c));
      r.on("end", () => {
        const t = Buffer.concat(chunks).toString();
        let b: any = t;
        try {
          b = JSON.parse(t);
        } catch {}
        res({ status: r.statusCode ?? 0, body: b });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error("timeout")));
    req.on("error", rej);
    req.end(data);
  });
}

export function get(socketPath: string, path: string): Promise<{ status: number; body: any }> {
  return new Promise((res, rej) => {
    const req = request({ socketPath, path, method: "GET" }, (r) => {
      const chunks: Buffer[] = [];
      r.on("data", (c) => chunks.push(c));
      r.on("end", () => {
        const t = Buffer.concat(chunks).toString();
        try {
          res({ status: r.statusCode ?? 0, body: JSON.parse(t) });
        } catch {
          res({ status: r.statusCode ?? 0, body: t });
        }
      });
    });
    req.on("error", rej);
    req.end();
  });
}

/**
 * The bindery binary to test: $BINDERY_BIN, else `go build ./cmd/bindery` from the repo
 * root. `skip` (with the reason) only when the binary runs but does not serve
 * POST /v1/compile yet; `error` when there is no binary or it does not start, which fails
 * the tests rather than hiding a broken build.
 */
export async function resolveBindery(): Promise<{ bin: string } | { skip: string } | { error: string }> {
  let bin = process.env.BINDERY_BIN;
  if (!bin) {
    const out = join(tempRoot(), "bindery");
    const r = spawnSync("go", ["build", "-o", out, "./cmd/bindery"], { cwd: repoRoot, encoding: "utf8", timeout: 600_000 });
    if (r.error || r.status !== 0) return { error: `could not build bindery (go build ./cmd/bindery in ${repoRoot}): ${r.error?.message ?? r.stderr.trim().split("\n").slice(-3).join(" ")}` };
    bin = out;
  }
  if (!existsSync(bin)) return { error: `BINDERY_BIN=${bin} does not exist` };
  const probeDir = tempRoot();
  const d = new BinderyProcess(bin, probeDir);
  try {
    await d.start();
    const r = await post(d.socketPath, "/v1/compile", {});
    if (r.status === 404 || r.status === 405) return { skip: `${bin} does not serve POST /v1/compile yet (answered ${r.status})` };
    return { bin };
  } catch (err) {
    return { error: `${bin} did not start: ${(err as Error).message}` };
  } finally {
    await d.stop();
  }
}

/** Resolves the binary once per test file: what to run, or why to skip or fail. */
export async function binderyForTests(what: string): Promise<{ bin: string; skip: string | false; error: string | undefined }> {
  const r = await resolveBindery();
  if ("skip" in r) {
    console.log(`# ${what} skipped: ${r.skip}`);
    return { bin: "", skip: `${what} skipped: ${r.skip}`, error: undefined };
  }
  if ("error" in r) return { bin: "", skip: false, error: r.error };
  return { bin: r.bin, skip: false, error: undefined };
}

export class BinderyProcess {
  readonly socketPath: string;
  readonly stateDir: string;
  readonly agentDir: string;
  private child: ChildProcess | undefined;
  log = "";

  constructor(readonly bin: string, root: string, agentDir?: string) {
    this.socketPath = join(root, "b.sock");
    this.stateDir = join(root, "state");
    this.agentDir = agentDir ?? join(root, "agent");
    mkdirSync(join(this.agentDir, "sessions"), { recursive: true });
  }

  async start(): Promise<void> {
    const child = spawn(this.bin, ["serve", "--agent-dir", this.agentDir, "--state-dir", this.stateDir, "--socket", this.socketPath, "--log-level", "debug"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, BINDERY_SOCKET: "", PI_CODING_AGENT_DIR: this.agentDir },
    });
    this.child = child;
    child.stdout!.on("data", (d) => (this.log += d));
    child.stderr!.on("data", (d) => (this.log += d));
    const exited = new Promise<never>((_, rej) => child.once("exit", (code) => rej(new Error(`bindery exited (${code}): ${this.log.slice(-2000)}`))));
    const deadline = Date.now() + 20_000;
    const ready = (async () => {
      while (Date.now() < deadline) {
        try {
          if ((await get(this.socketPath, "/v1/health")).status === 200) return;
        } catch {}
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`bindery did not answer /v1/health within 20s: ${this.log.slice(-2000)}`);
    })();
    await Promise.race([ready, exited]);
    exited.catch(() => {});
  }

  /** Sends the daemon a signal (SIGSTOP freezes it as a wedged process is, SIGCONT thaws it). */
  signal(sig: NodeJS.Signals): void {
    this.child?.kill(sig);
  }

  async stop(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const done = new Promise((r) => c.once("exit", r));
    c.kill("SIGTERM");
    const t = setTimeout(() => c.kill("SIGKILL"), 15_000);
    await done;
    clearTimeout(t);
    this.child = undefined;
  }
}

export interface PiRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * pi 1.x's built-in model `model`, routed to the fake by `baseUrl` only, as a user points
 * pi at a proxy: models.json overrides the anthropic provider's baseUrl (which applies to
 * its built-in models) and, through `modelOverrides`, what pi reads per model:
 * `compat.supportsMessageThreads` (threads are on by default only when baseUrl contains
 * api.anthropic.com) and `promptCache.short` (the cache lifetime cache warming is timed from).
 */
export interface BuiltinModel {
  model: string;
  threads?: boolean;
  promptCacheShortSeconds?: number;
  /** More of pi's per-model compat flags (modelOverrides.<id>.compat). */
  compat?: Record<string, unknown>;
}

/** An isolated pi installation: agent dir with models.json pointing at the fake, a work dir. */
export class PiHome {
  readonly agentDir: string;
  readonly workDir: string;
  readonly model: string;

  constructor(root: string, baseUrl: string, bindery: Record<string, unknown>, agentDir?: string, builtin?: BuiltinModel, settings: Record<string, unknown> = {}) {
    this.agentDir = agentDir ?? join(root, "agent");
    this.workDir = join(root, "work");
    this.model = builtin?.model ?? MODEL;
    mkdirSync(this.agentDir, { recursive: true });
    mkdirSync(this.workDir, { recursive: true });
    const override: Record<string, unknown> = {};
    if (builtin?.threads || builtin?.compat) override.compat = { ...(builtin.threads ? { supportsMessageThreads: true } : {}), ...builtin.compat };
    if (builtin?.promptCacheShortSeconds) override.promptCache = { short: builtin.promptCacheShortSeconds, long: 3600 };
    if (builtin) {
      writeFileSync(join(this.agentDir, "models.json"), JSON.stringify({ providers: { anthropic: { baseUrl, modelOverrides: { [builtin.model]: override } } } }));
      writeFileSync(join(this.agentDir, "settings.json"), JSON.stringify({ ...settings, bindery }));
      return;
    }
    writeFileSync(
      join(this.agentDir, "models.json"),
      JSON.stringify({
        providers: {
          anthropic: {
            baseUrl,
            apiKey: "sk-ant-api03-fake",
            api: "anthropic-messages",
            models: [{ id: MODEL, name: "Fable 5.2 (fake)", reasoning: true, input: ["text"], contextWindow: 200000, maxTokens: 32000, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } }],
          },
        },
      }),
    );
    writeFileSync(join(this.agentDir, "settings.json"), JSON.stringify({ ...settings, bindery }));
  }

  /** pi -p with the given extensions in that order (they load in -e order). */
  run(args: string[], opts: { extensions?: string[]; env?: Record<string, string> } = {}): Promise<PiRun> {
    const ext = (opts.extensions ?? [packageDir]).flatMap((e) => ["-e", e]);
    const argv = [piCli, "--provider", "anthropic", "--model", this.model, "--thinking", "high", "--no-extensions", ...ext, "-p", ...args];
    return runPi(argv, this.workDir, { ...process.env, PI_CODING_AGENT_DIR: this.agentDir, PI_OFFLINE: "1", ANTHROPIC_API_KEY: "sk-ant-api03-fake", BINDERY_SOCKET: "", ...opts.env });
  }

  /** Session files, newest first by name (the name starts with the creation time). */
  sessionFiles(): string[] {
    const root = join(this.agentDir, "sessions");
    const out: string[] = [];
    const walk = (d: string) => {
      for (const f of readdirSync(d)) {
        const p = join(d, f);
        if (statSync(p).isDirectory()) walk(p);
        else if (f.endsWith(".jsonl")) out.push(p);
      }
    };
    if (existsSync(root)) walk(root);
    return out.sort().reverse();
  }

  header(file: string): any {
    return JSON.parse(readFileSync(file, "utf8").split("\n")[0]);
  }
}

/** Runs pi (argv after node) in cwd with env, killed after 2 minutes. */
export function runPi(argv: string[], cwd: string, env: Record<string, string | undefined>): Promise<PiRun> {
  return new Promise((res) => {
    const p = spawn(process.execPath, argv, { cwd, stdio: ["ignore", "pipe", "pipe"], env });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => p.kill("SIGKILL"), 120_000);
    p.on("close", (code) => {
      clearTimeout(t);
      res({ code, stdout, stderr });
    });
  });
}

/** f summed over the fake provider's recorded requests. */
export function sum<R>(reqs: R[], f: (r: R) => number): number {
  return reqs.reduce((a, r) => a + f(r), 0);
}

/** The blocks the fake provider dropped (drop_block) over its recorded requests. */
export function dropped(reqs: { verdict: { transformations: unknown[] } }[]): number {
  return sum(reqs, (r) => r.verdict.transformations.length);
}

/** pi exited 0 (what: the step, for the message). */
export function ok(run: PiRun, what: string): void {
  assert.equal(run.code, 0, `${what}: pi exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
}

/** The extension said nothing: bindery answered every call. */
export function quiet(runs: PiRun[]): void {
  for (const r of runs) assert.doesNotMatch(r.stderr, /bindery/, `pi printed a bindery warning: ${r.stderr}`);
}


/**
 * A Unix-socket proxy in front of bindery that forwards every call except the ones
 * `drop` names, which it answers with a 503 without forwarding: a lost accept, as when
 * pi dies between the response and the accept.
 */
export async function lossyProxy(target: string, socketPath: string, drop: (path: string) => boolean): Promise<{ close(): Promise<void>; dropped: string[] }> {
  const { createServer } = await import("node:http");
  const dropped: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (drop(req.url ?? "")) {
        dropped.push(req.url ?? "");
        res.writeHead(503, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "unavailable", message: "dropped by the test proxy" } }));
        return;
      }
      const body = Buffer.concat(chunks);
      const up = request({ socketPath: target, path: req.url, method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on("error", () => {
        res.writeHead(502);
        res.end();
      });
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(socketPath, r));
  return { dropped, close: () => new Promise<void>((r) => server.close(() => r())) };
}
