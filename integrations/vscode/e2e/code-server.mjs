// The extension in a real VS Code build: code-server (VS Code in a
// browser, from npm) with the packaged .vsix installed, driven by headless
// Chromium through playwright-core, against a real `bindery serve`.
// Run by e2e/run.sh, which installs code-server and builds what this needs:
//   node e2e/code-server.mjs <bindery> <code-server> <vsix> <screenshot.png>
// It exits non-zero, saying what it waited for and what it saw, when the
// status item or the feed channel do not show what a user must see.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, appendFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";
import { chromium } from "playwright-core";

const [bindery, codeServer, vsix, shot] = process.argv.slice(2);
if (!shot) throw new Error("usage: code-server.mjs <bindery> <code-server> <vsix> <screenshot.png>");

const dir = mkdtempSync(join(tmpdir(), "bvc"));
const procs = [];
const cleanup = () => {
  for (const p of procs) p.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
};
process.on("exit", cleanup);

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = s.address().port;
      s.close(() => resolve(port));
    });
  });

async function waitFor(what, cond, seen) {
  const deadline = Date.now() + 120_000; // bounds a hang; asserts no speed
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${await seen()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A workspace and one pi session of it, with one accepted turn.
const ws = join(dir, "workspace");
mkdirSync(ws);
writeFileSync(join(ws, "README.md"), "# a project\n");
const sessions = join(dir, "agent", "sessions", "--workspace--");
mkdirSync(sessions, { recursive: true });
const sid = "0193e6c4-cccc-7000-8000-000000000001";
const file = join(sessions, `2026-12-01T10-00-00-000Z_${sid}.jsonl`);
const line = (v) => appendFileSync(file, JSON.stringify(v) + "\n");
const now = () => new Date().toISOString();
line({ type: "session", version: 3, id: sid, timestamp: now(), cwd: ws });

const sock = join(dir, "s");
procs.push(spawn(bindery, ["serve", "--agent-dir", join(dir, "agent"), "--state-dir", join(dir, "state"), "--socket", sock, "--rescan", "200ms"],
  { stdio: "ignore", env: { ...process.env, NOTIFY_SOCKET: "", BINDERY_SOCKET: "" } }));
const cli = (...args) => execFileSync(bindery, [...args, "--socket", sock], { encoding: "utf8" });
await waitFor("bindery serve", () => { try { cli("status"); return true; } catch { return false; } }, () => "not answering");

const model = "claude-fable-5-2";
const msgs = [{ role: "user", content: "fix the parser" }];
const req = (n) => {
  const p = join(dir, `req${n}.json`);
  writeFileSync(p, JSON.stringify({ model, max_tokens: 1024, system: "be brief", thinking: { type: "enabled", budget_tokens: 1024 }, messages: msgs }));
  return p;
};
line({ type: "message", id: "u1", parentId: null, timestamp: now(), message: { role: "user", content: "fix the parser", timestamp: 1 } });
const c1 = JSON.parse(cli("compile", "--conversation", sid, "--branch", "u1", "--file", req(1), "--json"));
const reply = { role: "assistant", content: [{ type: "thinking", thinking: "look at parse.go", signature: "sig-1" }, { type: "text", text: "done" }] };
line({ type: "message", id: "a1", parentId: "u1", timestamp: now(), message: {
  role: "assistant", api: "anthropic-messages", provider: "anthropic", model, stopReason: "stop", timestamp: 2,
  content: [{ type: "thinking", thinking: "look at parse.go", thinkingSignature: "sig-1" }, { type: "text", text: "done" }],
  usage: { input: 12, output: 480, cacheRead: 41200, cacheWrite: 1800, totalTokens: 43492, cost: { input: 0.0001, output: 0.012, cacheRead: 0.0206, cacheWrite: 0.01125, total: 0.04395 } } } });
writeFileSync(join(dir, "rep1.json"), JSON.stringify(reply));
cli("accept", "--compile", c1.compileId, "--reply", join(dir, "rep1.json"));
msgs.push(reply, { role: "user", content: "and the tests" });
msgs[0] = { role: "user", content: "fix the parser (edited)" }; // the host rewrote history

// code-server with the .vsix installed and the extension pointed at this daemon.
const ud = join(dir, "user-data");
const ext = join(dir, "extensions");
mkdirSync(join(ud, "User"), { recursive: true });
writeFileSync(join(ud, "User", "settings.json"), JSON.stringify({
  "bindery.path": bindery, "bindery.socket": sock, "workbench.startupEditor": "none", "security.workspace.trust.enabled": false,
  "chat.disableAIFeatures": true, "workbench.secondarySideBar.defaultVisibility": "hidden",
}));
execFileSync(codeServer, ["--extensions-dir", ext, "--user-data-dir", ud, "--install-extension", vsix], { stdio: "inherit" });
const port = await freePort();
procs.push(spawn(codeServer, ["--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--extensions-dir", ext, "--user-data-dir", ud,
  "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", ws], { stdio: "ignore", env: { ...process.env, BINDERY_SOCKET: "" } }));

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  let loaded = false;
  await waitFor("code-server to serve the workbench", async () => {
    try {
      await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`, { waitUntil: "domcontentloaded", timeout: 10_000 });
      loaded = true;
    } catch { /* not listening yet */ }
    return loaded;
  }, () => "no answer");
  const statusText = () => page.evaluate(() => [...document.querySelectorAll(".statusbar-item")].map((e) => e.textContent).find((t) => t?.includes("bindery")) ?? "(no bindery item)");

  await waitFor("the status item with the workspace's session", async () => (await statusText()) === "bindery · no compile yet · cache 96% · $0.04 today", statusText);
  cli("compile", "--conversation", sid, "--branch", "u2", "--file", req(2), "--out", join(dir, "sent.json"));
  await waitFor("the status item to show the strip from the feed", async () =>
    (await statusText()) === "bindery · kept 0 stripped 1 · last strip prefix-changed · cache 96% · $0.04 today", statusText);

  // The item opens the feed channel, which lists the compile and its strip.
  await page.locator(".statusbar-item", { hasText: "bindery" }).first().click();
  const channel = () => page.evaluate(() => document.querySelector(".output-view, .panel")?.textContent ?? "");
  await waitFor("the feed channel to list the strip", async () => (await channel()).includes("prefix-changed"), async () => (await channel()).slice(0, 300));
  await page.screenshot({ path: shot });
  console.log(`code-server e2e: status item and feed channel as expected; screenshot ${shot}`);
} finally {
  await browser.close();
}
process.exit(0);
