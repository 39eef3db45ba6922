/**
 * pi 1.x as people use it: the interactive TUI, driven under tmux (keystrokes in, the
 * screen read back), with pi's built-in Opus 5.5 routed to the fake by baseUrl, threads on,
 * cache warming firing while idle (its interval shortened through models.json's
 * promptCache), a daemon restart mid-session, a `/tree` jump to an earlier point and a
 * sibling branch, and a `/fork` into a new session. Every wait is on a condition (the
 * screen, or the requests the fake saw) with a generous deadline naming what it waited for.
 * Runs on the pi 1.x line when tmux is installed (ci.sh installs it); skipped otherwise,
 * saying why.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { FakeAnthropic, type Recorded } from "./fake-anthropic.js";
import { BinderyProcess, binderyForTests, get, packageDir, piCli, piIs1x, piVersion, PiHome, tempRoot } from "./e2e-support.js";

const { bin, skip: noBindery, error } = await binderyForTests("interactive pi 1.x");
const hasTmux = spawnSync("tmux", ["-V"]).status === 0;
const skip = noBindery || (!piIs1x ? `pi ${piVersion}: the interactive test drives pi 1.x only` : !hasTmux ? "tmux is not installed" : false);

function tmux(...args: string[]): string {
  const r = spawnSync("tmux", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`tmux ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

async function waitFor<T>(what: string, probe: () => T | undefined | false, seen: () => string, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`waited ${ms / 1000} s for ${what}; saw:\n${seen()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const real = (reqs: Recorded[]) => reqs.filter((r) => !r.warm && r.verdict.status === 200);
/** The prompt a request answers: the last user message with text (tool results have none). */
const userText = (r: Recorded) => {
  for (const m of [...(r.full.messages as any[])].reverse()) {
    if (m.role !== "user") continue;
    const text = typeof m.content === "string" ? m.content : (m.content ?? []).filter((b: any) => b.type === "text").map((b: any) => b.text).join("");
    if (text) return text;
  }
  return "";
};

describe("pi 1.x interactive under tmux: cache warming, daemon restart, /tree, /fork", { skip }, () => {
  let fake: FakeAnthropic;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeAnthropic();
    await fake.start();
  });
  after(() => fake.stop());

  test("a session as a user runs it: nothing refused or dropped, warms recorded nowhere, branches keep their own thinking", async (t) => {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new PiHome(
      root,
      fake.baseUrl,
      { socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000 },
      d.agentDir,
      { model: "claude-opus-5-5", threads: true, promptCacheShortSeconds: 12 },
      { cacheWarming: "idle" },
    );
    await d.start();
    t.after(() => d.stop());
    // Large prompts: a warm pays for itself even in pi's idle economics.
    fake.inputTokens = 200_000;
    t.after(() => (fake.inputTokens = undefined));
    const from = fake.requests.length;
    const seen = () => fake.requests.slice(from);
    const name = `bindery-pi-${process.pid}-${Date.now()}`;
    const env = [`PI_CODING_AGENT_DIR=${home.agentDir}`, "PI_OFFLINE=1", "ANTHROPIC_API_KEY=sk-ant-api03-fake", "BINDERY_SOCKET="];
    const cmd = ["env", ...env, process.execPath, piCli, "--provider", "anthropic", "--model", home.model, "--thinking", "high", "--no-extensions", "-e", packageDir]
      .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
      .join(" ");
    tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", home.workDir, cmd);
    t.after(() => void spawnSync("tmux", ["kill-session", "-t", name]));
    const screen = () => tmux("capture-pane", "-t", name, "-p");
    const keys = (...k: string[]) => void tmux("send-keys", "-t", name, ...k);
    const type = async (text: string) => {
      keys("-l", text);
      await waitFor(`"${text}" in the editor`, () => screen().includes(text), screen, 10_000);
      keys("Enter");
    };
    // A turn is over when the fake has ended it and pi shows that answer below the prompt.
    const settled = async (text: string) => {
      const last = await waitFor(`the final answer to "${text}"`, () => real(seen()).filter((r) => userText(r) === text && r.finalText).at(-1), screen);
      await waitFor(`"${last.finalText}" on screen after "${text}"`, () => screen().lastIndexOf(last.finalText!) > screen().lastIndexOf(text) && /bindery ✓/.test(screen()), screen);
    };

    await waitFor("pi's footer with bindery's status", () => /bindery (…|✓)/.test(screen()), screen);
    await type("one tools:1 double");
    await settled("one tools:1 double");

    // Idle: pi warms the cache 2 s after the last request (promptCache.short 12 s).
    const warm = await waitFor("an idle cache-warming request", () => seen().find((r) => r.warm), () => JSON.stringify(seen().map((r) => r.body.max_tokens)));
    assert.equal(warm.verdict.status, 200);

    await type("two");
    await settled("two");

    // The daemon restarts between two prompts.
    await d.stop();
    await d.start();
    await type("three tools:1");
    await settled("three tools:1");
    const mintedBeforeThree = real(seen())
      .filter((r) => userText(r) !== "three tools:1")
      .flatMap((r) => r.minted);
    const mintedThree = real(seen())
      .filter((r) => userText(r) === "three tools:1")
      .flatMap((r) => r.minted);

    // /tree: back to the answer to "two" (the entries below it: user three, its tool call, its answer), then a sibling.
    await type("/tree");
    await waitFor("the session tree", () => screen().includes("Session Tree"), screen);
    for (let i = 0; i < 3; i++) keys("Up");
    await waitFor("the answer to two selected", () => /› • assistant: done: read/.test(screen()) && screen().split("\n").some((l) => l.startsWith("› ")), screen, 10_000);
    keys("Enter");
    await waitFor("the summary question", () => screen().includes("Summarize branch?"), screen, 10_000);
    keys("Enter"); // No summary
    await waitFor("the jump", () => screen().includes("Navigated to selected point"), screen, 10_000);
    const markTree = fake.requests.length;
    await type("sibling");
    await settled("sibling");
    const sibling = real(fake.requests.slice(markTree))[0];
    assert.ok(sibling, "the sibling's request");
    assert.deepEqual(sibling.fullSignatures, mintedBeforeThree, "the sibling replays the shared thinking and none of the branch it left");
    for (const s of mintedThree) assert.ok(!sibling.fullSignatures.includes(s));

    // /fork from the last user message: a new session file, its request replays the parent's thinking before that message.
    const filesBefore = home.sessionFiles();
    await type("/fork");
    await waitFor("the fork selector", () => screen().includes("Fork from Message"), screen, 10_000);
    keys("Enter");
    await waitFor("the fork", () => screen().includes("Forked to new session"), screen, 10_000);
    const markFork = fake.requests.length;
    keys("Enter"); // the selected message ("sibling") is in the editor: send it
    await settled("sibling");
    const forkReq = real(fake.requests.slice(markFork)).filter((r) => userText(r) === "sibling")[0];
    assert.ok(forkReq, "the fork's request");
    const forkFile = home.sessionFiles().find((f) => !filesBefore.includes(f));
    assert.ok(forkFile, "pi wrote the fork's session file");
    assert.ok(home.header(forkFile).parentSession, "the fork names its parent");
    assert.deepEqual(forkReq.fullSignatures, sibling.fullSignatures, "the fork replays what its parent had before the forked message");

    // Nothing refused, nothing dropped, every block sent was read; warms recorded nowhere.
    const all = seen();
    assert.deepEqual(all.filter((r) => r.verdict.status !== 200 && r.verdict.status !== 404).map((r) => r.verdict.error), [], "no refusal");
    for (const r of all.filter((r) => r.verdict.status === 200)) {
      assert.deepEqual(r.verdict.transformations, [], "nothing dropped");
      assert.equal(r.verdict.thinkingRead, r.verdict.thinkingSent);
    }
    const parentFile = filesBefore[0];
    const id = home.header(parentFile).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    const parentReqs = real(all).filter((r) => r !== forkReq && fake.requests.indexOf(r) < markFork);
    assert.equal(conv.body.compiles, parentReqs.length, `one compile per real request of the parent, none for its ${all.filter((r) => r.warm).length} warm(s)`);
    assert.match(readFileSync(parentFile, "utf8"), /"type":"usage"/, "pi recorded the warm's spend");
    keys("C-c");
    keys("C-c");
  });
});
