// The extension's logic, without `vscode`: it runs the bindery CLI (the
// documented client), follows the live feed and keeps what the status item
// shows. extension.ts is only the glue to VS Code's UI, so everything here is
// tested with Node's test runner against a real daemon (test/core.test.ts).
//
// The feed is `bindery tail --json`: one JSON object a line, pushed by the
// daemon. The session list and report are fetched again only when an event
// says they changed; the one timer reconnects after the daemon went away,
// resuming after the last seq seen so no event is missed.
import { spawn, type ChildProcess } from "node:child_process";

export interface Options {
  /** The bindery binary. */
  cmd: string;
  /** --socket for every call; undefined: the CLI's default. */
  socket?: string;
  /** The workspace folder whose pi sessions are shown. */
  workspace: string;
  reconnectMs?: number;
  refreshMs?: number;
}

/** What the status item shows (statusText documents each field). */
export interface State {
  up?: boolean;
  session?: string;
  kept?: number;
  stripped?: number;
  lastStrip?: { reason: string; path: string };
  hitRatio?: number;
  spendToday?: number;
}

/** A feed event: seq, time, type and conversation, then the type's fields (api/event.go). */
export type FeedEvent = Record<string, unknown> & { seq?: number; time?: string; type?: string; conversation?: string };

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** runCli runs the bindery CLI and collects its output. */
export function runCli(opts: Pick<Options, "cmd" | "socket">, args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    const argv = [...args, ...(opts.socket ? ["--socket", opts.socket] : [])];
    let stdout = "";
    let stderr = "";
    let child: ChildProcess;
    try {
      child = spawn(opts.cmd, argv, { stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      resolve({ code: -1, stdout: "", stderr: String(e) });
      return;
    }
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (e) => resolve({ code: -1, stdout, stderr: stderr + String(e) }));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

export function money(x: number | undefined): string {
  if (x === undefined) return "$?";
  if (x > 0 && x < 0.005) return "<$0.01";
  return `$${x.toFixed(2)}`;
}

/** localDay turns pi's ISO timestamp into the local calendar day YYYY-MM-DD. */
export function localDay(ts: unknown): string | undefined {
  if (typeof ts !== "string") return undefined;
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return undefined;
  return dayOf(d);
}

export function dayOf(d: Date): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
}

/** spendOn sums a session report's priced requests on day (local); unpriced ones are counted apart. */
export function spendOn(requests: unknown, day: string): { total: number; unpriced: number } {
  let total = 0;
  let unpriced = 0;
  for (const r of Array.isArray(requests) ? requests : []) {
    if (localDay(r?.timestamp) !== day) continue;
    if (typeof r.cost === "number") total += r.cost;
    else unpriced++;
  }
  return { total, unpriced };
}

/** statusText is the status item's text. */
export function statusText(st: State): string {
  if (st.up === undefined) return "bindery …";
  if (!st.up) return "bindery down";
  if (!st.session) return "bindery: no pi session here";
  const parts = ["bindery"];
  parts.push(st.kept !== undefined ? `kept ${st.kept} stripped ${st.stripped ?? 0}` : "no compile yet");
  if (st.lastStrip) parts.push(`last strip ${st.lastStrip.reason}`);
  if (st.hitRatio !== undefined) parts.push(`cache ${Math.round(st.hitRatio * 100)}%`);
  if (st.spendToday !== undefined) parts.push(`${money(st.spendToday)} today`);
  return parts.join(" · ");
}

/** eventLine is one feed event on one line, for the output channel. */
export function eventLine(ev: FeedEvent): string {
  const time = typeof ev.time === "string" ? (/T(\d+:\d+:\d+)/.exec(ev.time)?.[1] ?? ev.time) : "";
  const head = `${time} ${String(ev.type ?? "?").padEnd(8)} ${ev.conversation ?? ""}`;
  const f = (k: string, d: unknown = "?") => String(ev[k] ?? d);
  let tail = "";
  switch (ev.type) {
    case "compile": {
      tail = `kept ${f("thinkingKept")} stripped ${f("thinkingStripped", 0)}`;
      const cause = (ev.cache as { cause?: string } | undefined)?.cause;
      if (cause && cause !== "none") tail += ` cache ${cause}`;
      break;
    }
    case "strip":
      tail = `${f("path")} ${f("reason")} (~${f("tokens")} tokens)`;
      break;
    case "accept":
      tail = `stamped ${f("stamped", 0)} released ${f("released", 0)}`;
      break;
    case "release":
      tail = `${String(ev.path ?? ev.signature ?? "?")} released ${f("released", 0)}`;
      break;
    case "session":
      tail = `${f("change")} ${f("entries", 0)} entries`;
      break;
    case "ingest-error":
      tail = `${f("file")} line ${f("line")}: ${f("reason")}`;
      break;
  }
  return tail ? `${head} ${tail}` : head;
}

/**
 * Bindery follows the daemon for one workspace. onChange fires whenever the
 * state may have changed, onEvent for every feed event.
 */
export class Bindery {
  readonly state: State = {};
  onChange: (st: State) => void = () => {};
  onEvent: (ev: FeedEvent) => void = () => {};
  private child?: ChildProcess;
  private lastSeq?: number;
  private partial = "";
  private stopped = true;
  private reconnectTimer?: NodeJS.Timeout;
  private refreshTimer?: NodeJS.Timeout;

  constructor(readonly opts: Options) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.follow();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.refreshTimer);
    this.child?.kill();
    this.child = undefined;
  }

  cli(args: string[]): Promise<CliResult> {
    return runCli(this.opts, args);
  }

  /** refresh fetches the workspace's live session (latest activity) and its report. */
  async refresh(): Promise<void> {
    const res = await this.cli(["sessions", "--json", "--cwd", this.opts.workspace]);
    if (res.code === 3) {
      this.state.up = false;
      return this.changed();
    }
    let list: { sessions?: { id: string; lastActivity?: string; removed?: boolean }[] };
    try {
      list = JSON.parse(res.stdout);
    } catch {
      return;
    }
    this.state.up = true;
    let live: { id: string; lastActivity?: string } | undefined;
    for (const s of list.sessions ?? []) {
      if (!s.removed && (!live || (s.lastActivity ?? "") > (live.lastActivity ?? ""))) live = s;
    }
    if (live?.id !== this.state.session) {
      this.state.session = live?.id;
      this.state.kept = this.state.stripped = this.state.lastStrip = undefined;
    }
    if (!live) {
      this.state.hitRatio = this.state.spendToday = undefined;
      return this.changed();
    }
    const rep = await this.cli(["report", "--json", "--session", live.id]);
    if (rep.code === 0) {
      try {
        const r = JSON.parse(rep.stdout);
        this.state.hitRatio = r?.figures?.cache?.hitRatio;
        this.state.spendToday = spendOn(r?.requests, dayOf(new Date())).total;
      } catch {
        // a report that does not parse leaves the last figures
      }
    }
    this.changed();
  }

  private changed(): void {
    this.onChange(this.state);
  }

  private scheduleRefresh(): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      void this.refresh();
    }, this.opts.refreshMs ?? 250);
  }

  private handle(ev: FeedEvent): void {
    if (typeof ev.seq === "number" && ev.seq > 0) this.lastSeq = ev.seq;
    this.onEvent(ev);
    const mine = ev.conversation !== undefined && ev.conversation === this.state.session;
    if (ev.type === "compile" && mine) {
      this.state.kept = ev.thinkingKept as number | undefined;
      this.state.stripped = ev.thinkingStripped as number | undefined;
      const strips = ev.strips as { reason: string; path: string }[] | undefined;
      if ((this.state.stripped ?? 0) > 0 && strips?.length) {
        const last = strips[strips.length - 1];
        this.state.lastStrip = { reason: last.reason, path: last.path };
      }
      this.changed();
    }
    if ((ev.type === "accept" && mine) || ev.type === "session" || ev.type === "reset") this.scheduleRefresh();
  }

  private follow(): void {
    if (this.stopped) return;
    const args = ["tail", "--json", "--no-reconnect"];
    if (this.lastSeq !== undefined) args.push("--since", String(this.lastSeq));
    if (this.opts.socket) args.push("--socket", this.opts.socket);
    this.partial = "";
    let child: ChildProcess;
    try {
      child = spawn(this.opts.cmd, args, { stdio: ["ignore", "pipe", "ignore"] });
    } catch {
      return this.lost();
    }
    this.child = child;
    child.on("error", () => {});
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      const lines = (this.partial + chunk).split("\n");
      this.partial = lines.pop() ?? "";
      for (const line of lines) {
        if (!line) continue;
        try {
          this.handle(JSON.parse(line));
        } catch {
          // not an event: ignore the line
        }
      }
    });
    child.on("close", () => {
      if (this.child === child) this.child = undefined;
      this.lost();
    });
    void this.refresh();
  }

  private lost(): void {
    if (this.stopped) return;
    this.state.up = false;
    this.changed();
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.follow(), this.opts.reconnectMs ?? 2000);
  }
}
