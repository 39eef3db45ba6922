// core.ts against a real `bindery serve` (BINDERY_BIN, which ci.sh builds
// from the repository): the status text follows the workspace's pi session
// from the live feed, says so when the daemon goes away and picks the feed
// up again when it is back. Pure text functions are table-tested first.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, appendFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Bindery, type FeedEvent, eventLine, money, runCli, spendOn, statusText, dayOf } from "../src/core";

test("statusText", () => {
  assert.equal(statusText({}), "bindery …");
  assert.equal(statusText({ up: false, session: "s" }), "bindery down");
  assert.equal(statusText({ up: true }), "bindery: no pi session here");
  assert.equal(statusText({ up: true, session: "s" }), "bindery · no compile yet");
  assert.equal(
    statusText({ up: true, session: "s", kept: 12, stripped: 2, lastStrip: { reason: "prefix-changed", path: "p" }, hitRatio: 0.9649, spendToday: 1.234 }),
    "bindery · kept 12 stripped 2 · last strip prefix-changed · cache 96% · $1.23 today",
  );
  assert.equal(money(0.001), "<$0.01");
  assert.equal(money(undefined), "$?");
});

test("spendOn counts today's priced requests and the unpriced apart", () => {
  const now = new Date().toISOString();
  const got = spendOn([{ timestamp: now, cost: 0.5 }, { timestamp: now, cost: 0.25 }, { timestamp: now }, { timestamp: "2001-01-01T12:00:00Z", cost: 9 }], dayOf(new Date()));
  assert.deepEqual(got, { total: 0.75, unpriced: 1 });
});

test("eventLine", () => {
  assert.equal(
    eventLine({ time: "2026-12-01T21:00:01.5Z", type: "compile", conversation: "c1", thinkingKept: 3, thinkingStripped: 1, cache: { cause: "strip" } }),
    "21:00:01 compile  c1 kept 3 stripped 1 cache strip",
  );
  assert.equal(
    eventLine({ time: "2026-12-01T21:00:01Z", type: "strip", conversation: "c1", path: "messages.1.content.0", reason: "prefix-changed", tokens: 12 }),
    "21:00:01 strip    c1 messages.1.content.0 prefix-changed (~12 tokens)",
  );
});

async function waitFor(what: string, cond: () => boolean | Promise<boolean>, seen: () => string): Promise<void> {
  const deadline = Date.now() + 60_000; // bounds a hang; asserts no speed
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${seen()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const bin = process.env.BINDERY_BIN;

test("follows a real daemon", { skip: bin ? false : "BINDERY_BIN is not set (ci.sh builds it)" }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "bvs"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const sock = join(dir, "s");
  const ws = join(dir, "ws");
  const sessions = join(dir, "agent", "sessions", "--ws--");
  mkdirSync(sessions, { recursive: true });
  const sid = "0193e6c4-ffff-7000-8000-000000000001";
  const file = join(sessions, `2026-12-01T10-00-00-000Z_${sid}.jsonl`);
  const line = (v: unknown) => appendFileSync(file, JSON.stringify(v) + "\n");
  const now = () => new Date().toISOString();
  line({ type: "session", version: 3, id: sid, timestamp: now(), cwd: ws });

  let daemon: ChildProcess | undefined;
  const opts = { cmd: bin!, socket: sock };
  const start = async () => {
    daemon = spawn(bin!, ["serve", "--agent-dir", join(dir, "agent"), "--state-dir", join(dir, "state"), "--socket", sock, "--rescan", "200ms"], {
      stdio: "ignore",
      env: { ...process.env, NOTIFY_SOCKET: "", BINDERY_SOCKET: "" },
    });
    let last = "";
    await waitFor("bindery serve to answer", async () => {
      const r = await runCli(opts, ["status", "--json"]);
      last = `${r.code} ${r.stderr}`;
      return r.code === 0;
    }, () => last);
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!daemon || daemon.exitCode !== null) return resolve();
      daemon.once("exit", () => resolve());
      daemon.kill("SIGTERM");
    });
  t.after(stop);
  await start();

  const model = "claude-fable-5-2";
  const msgs: unknown[] = [];
  let parent: string | null = null;
  let n = 0;
  // round: a user entry, a compile at it, pi's reply written to the file
  // (with pi's cost, today), an accept.
  const round = async (edit?: () => void) => {
    n++;
    const uid = `u${n}`;
    const aid = `a${n}`;
    line({ type: "message", id: uid, parentId: parent, timestamp: now(), message: { role: "user", content: `turn ${n}`, timestamp: 1 } });
    msgs.push({ role: "user", content: `turn ${n}` });
    edit?.();
    const req = join(dir, `req${n}.json`);
    writeFileSync(req, JSON.stringify({ model, max_tokens: 1024, system: "be brief", thinking: { type: "enabled", budget_tokens: 1024 }, messages: msgs }));
    const c = await runCli(opts, ["compile", "--conversation", sid, "--branch", uid, "--file", req, "--json"]);
    assert.equal(c.code, 0, c.stderr);
    const ans = JSON.parse(c.stdout);
    const sig = `sig-${n}`;
    const reply = { role: "assistant", content: [{ type: "thinking", thinking: `think ${n}`, signature: sig }, { type: "text", text: `answer ${n}` }] };
    msgs.push(reply);
    line({ type: "message", id: aid, parentId: uid, timestamp: now(), message: {
      role: "assistant", api: "anthropic-messages", provider: "anthropic", model, stopReason: "stop", timestamp: 2,
      content: [{ type: "thinking", thinking: `think ${n}`, thinkingSignature: sig }, { type: "text", text: `answer ${n}` }],
      usage: { input: 10, output: 100, cacheRead: 900, cacheWrite: 100, totalTokens: 1110, cost: { input: 0.01, output: 0.2, cacheRead: 0.04, cacheWrite: 0.25, total: 0.5 } },
    } });
    parent = aid;
    const rep = join(dir, `rep${n}.json`);
    writeFileSync(rep, JSON.stringify(reply));
    const a = await runCli(opts, ["accept", "--compile", ans.compileId, "--reply", rep]);
    assert.equal(a.code, 0, a.stderr);
    return ans as { thinkingKept: number; thinkingStripped: number };
  };
  await round();

  const b = new Bindery({ cmd: bin!, socket: sock, workspace: ws, reconnectMs: 200, refreshMs: 50 });
  const events: FeedEvent[] = [];
  b.onEvent = (ev) => events.push(ev);
  t.after(() => b.stop());
  b.start();
  const text = () => statusText(b.state);
  await waitFor("the workspace's session with its figures", () => text() === "bindery · no compile yet · cache 89% · $0.50 today", text);

  // The host edits its history: the next compile strips the first reply's thinking.
  const second = await round(() => (msgs[0] = { role: "user", content: "turn 1 (edited)" }));
  assert.deepEqual([second.thinkingKept, second.thinkingStripped], [0, 1]);
  await waitFor("the strip and the new spend", () => text() === "bindery · kept 0 stripped 1 · last strip prefix-changed · cache 89% · $1.00 today", text);
  assert.ok(events.some((e) => e.type === "strip" && e.reason === "prefix-changed"), "a strip event reached the feed");

  await stop();
  await waitFor("the daemon down", () => text() === "bindery down", text);
  await start();
  await waitFor("the daemon back", () => text() !== "bindery down", text);
  const third = await round();
  assert.deepEqual([third.thinkingKept, third.thinkingStripped], [1, 1]);
  await waitFor("the compile after the restart", () => text().startsWith("bindery · kept 1 stripped 1 · last strip released"), text);
});
