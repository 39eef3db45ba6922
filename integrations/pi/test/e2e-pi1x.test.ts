/**
 * End to end on pi 1.x as people run it: pi's BUILT-IN Claude model (Opus 5.5), routed to
 * the fake Anthropic server by baseUrl only, so pi sends its real 1.x body: adaptive
 * thinking with its own `block_binding: drop_block`, `output_config.effort`, per-turn
 * `role: "system"` effort messages, its betas, and (forced on, as they are by default on
 * api.anthropic.com) message threads. The fake judges each continue on the reconstructed
 * conversation. Runs on the pi 1.x line (ci.sh: PI_VERSION); skipped on 0.x, saying why.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { readFileSync } from "node:fs";
import { FakeAnthropic, judge, type Recorded } from "./fake-anthropic.js";
import { BinderyProcess, fixtures, get, packageDir, PiHome, binderyForTests, ok, piIs1x, piVersion, quiet, sum, dropped, tempRoot, type BuiltinModel, type PiRun } from "./e2e-support.js";

const { bin, skip: noBindery, error } = await binderyForTests("e2e pi 1.x");
const skip = noBindery || (piIs1x ? false : `pi ${piVersion} has no built-in binding controls or message threads (pi 1.x only)`);

const pruner = join(fixtures, "pruner.ts");
const payloadEditor = join(fixtures, "payload-editor.ts");
const payloadRecorder = join(fixtures, "payload-recorder.ts");
const OPUS: BuiltinModel = { model: "claude-opus-5-5", threads: true };

const answered = (reqs: Recorded[]) => reqs.filter((r) => r.verdict.status === 200);

describe("pi 1.x built-in model + pi-bindery + bindery + fake Anthropic (threads on)", { skip }, () => {
  let fake: FakeAnthropic;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeAnthropic();
    await fake.start();
  });
  after(() => fake.stop());

  async function setup(builtin: BuiltinModel = OPUS, settings: Record<string, unknown> = {}) {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new PiHome(root, fake.baseUrl, { socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000, ...settings }, d.agentDir, builtin);
    await d.start();
    const from = fake.requests.length;
    return { root, d, home, from, seen: () => fake.requests.slice(from) };
  }

  test("pi's real 1.x body goes through: drop_block, effort, system messages, betas, thread create then continue; nothing dropped, every block read and stamped", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    const runs = [await home.run(["first tools:2 double"]), await home.run(["-c", "second tools:1 redacted"])];
    runs.forEach((r, i) => ok(r, `run ${i + 1}`));
    quiet(runs);
    const reqs = seen();
    assert.deepEqual(reqs.map((r) => r.verdict.status), reqs.map(() => 200), "every request answered");
    const first = reqs[0];
    assert.deepEqual(first.body.thinking.block_binding, { prefix_mismatch_behavior: "drop_block" }, "pi's own block_binding left as pi set it");
    assert.equal(first.body.thinking.type, "adaptive");
    assert.ok(first.body.output_config?.effort, "output_config.effort");
    assert.ok(first.body.messages.some((m: any) => m.role === "system" && m.output_config?.effort), "per-turn role:system effort message");
    const betas = String(first.headers["anthropic-beta"]).split(",");
    for (const b of ["thinking-binding-controls-2026-08-01", "message-threads-2026-08-12"]) assert.ok(betas.includes(b), `beta ${b} in ${betas}`);
    // Threads: each run creates, then continues within the run (pi keeps thread state in memory).
    assert.deepEqual(reqs.map((r) => r.thread?.type), ["create", "continue", "continue", "create", "continue"]);
    for (const r of reqs.filter((r) => r.thread?.type === "continue")) {
      assert.equal(r.body.system, undefined, "a continue carries no system");
      assert.equal(r.body.tools, undefined, "a continue carries no tools");
      assert.ok(r.offset > 0 && r.body.messages.length < r.full.messages.length, "a continue sends only the new messages");
    }
    for (const r of reqs) {
      assert.equal(r.verdict.transformations.length, 0, "nothing dropped");
      assert.equal(r.verdict.thinkingRead, r.verdict.thinkingSent, "every block sent was read");
      assert.equal(r.verdict.thinkingRead, r.verdict.maxReadable, "as many as the provider could read");
    }
    const id = home.header(home.sessionFiles()[0]).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.status, 200, JSON.stringify(conv.body));
    assert.equal(conv.body.compiles, reqs.length, "one compile per request (the full request, before pi trims it)");
    assert.equal(conv.body.stamps, sum(reqs, (r) => r.minted.length), "every minted block stamped: each accept reached its compile");
  });

  test("the figure: a pruner rewrites old tool results mid-session; pi alone loses blocks to its own drop_block, with bindery none, and reads the provider's maximum", async (t) => {
    // The same scripted session twice: pi with the pruner only, then pi with pi-bindery and the pruner.
    const script = [["alpha tools:2 double"], ["-c", "beta tools:2"], ["-c", "gamma tools:1 double"], ["-c", "delta tools:1"]];
    const prune = { PRUNER_ACTIVE: "1" };
    const alone = new PiHome(tempRoot(), fake.baseUrl, {}, undefined, OPUS);
    const mAlone = fake.requests.length;
    for (const [i, args] of script.entries()) ok(await alone.run(args, { extensions: [pruner], env: i > 0 ? prune : {} }), `alone run ${i + 1}`);
    const aloneReqs = fake.requests.slice(mAlone);

    const { root, d, home, seen } = await setup();
    t.after(() => d.stop());
    const runs: PiRun[] = [];
    // The recorder, loaded before pi-bindery, keeps pi's own payload of each request.
    const log = join(root, "payloads.jsonl");
    const exts = [payloadRecorder, packageDir, pruner];
    for (const [i, args] of script.entries()) runs.push(await home.run(args, { extensions: exts, env: { PAYLOAD_LOG: log, ...(i > 0 ? prune : {}) } }));
    runs.forEach((r, i) => ok(r, `bindery run ${i + 1}`));
    quiet(runs);
    const withReqs = seen();
    assert.match(JSON.stringify(withReqs.map((r) => r.full.messages)), /pruned by test pruner/, "the pruner really rewrote history");
    assert.equal(withReqs.length, aloneReqs.length, "the same scripted session");
    // The provider's maximum for each request: the most of pi's own blocks (before bindery
    // stripped any) it could have read, as the fake judges them.
    const piPayloads = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(piPayloads.length, withReqs.length, "one payload per request");
    const maxWith = piPayloads.map((p, i) => judge(p, withReqs[i].headers).verdict.maxReadable);
    const figure = {
      requests: withReqs.length,
      aloneDropped: dropped(aloneReqs),
      aloneRead: sum(aloneReqs, (r) => r.verdict.thinkingRead),
      aloneSent: sum(aloneReqs, (r) => r.verdict.thinkingSent),
      max: sum(aloneReqs, (r) => r.verdict.maxReadable),
      binderyDropped: dropped(withReqs),
      binderyRead: sum(withReqs, (r) => r.verdict.thinkingRead),
      binderySent: sum(withReqs, (r) => r.verdict.thinkingSent),
      binderyMax: maxWith.reduce((a, b) => a + b, 0),
    };
    console.log(`# figure (pi ${piVersion}, claude-opus-5-5, pruner): ${JSON.stringify(figure)}`);
    assert.ok(figure.aloneDropped > 0, "pi alone: its drop_block loses blocks after the rewrite");
    assert.equal(figure.binderyDropped, 0, "with bindery the provider drops nothing");
    // Per request: bindery's request lets the provider read every block it could have read of pi's history.
    withReqs.forEach((r, i) => assert.equal(r.verdict.thinkingRead, maxWith[i], `request ${i}: read the provider's maximum`));
    assert.ok(figure.aloneRead < figure.max, "pi alone reads fewer than the provider could have");
  });

  test("thread expiry: a continue the provider cannot serve is a 404, pi replays it with create, and the accept still lands on its compile", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    let clock = 0;
    fake.now = () => clock;
    t.after(() => {
      fake.now = () => Date.now();
      fake.hold = undefined;
    });
    // After the first reply of the run, 6 minutes pass: the thread it created has expired.
    let replies = 0;
    fake.hold = () => {
      if (++replies === 1) clock += 6 * 60_000;
      return undefined;
    };
    const r = await home.run(["one tools:2 double"]);
    ok(r, "run");
    quiet([r]);
    const reqs = seen();
    assert.deepEqual(
      reqs.map((x) => `${x.thread?.type}:${x.verdict.status}`),
      ["create:200", "continue:404", "create:200", "continue:200"],
      "the expired continue, then pi's replay with create, then a continue of the new thread",
    );
    for (const x of answered(reqs)) {
      assert.equal(x.verdict.transformations.length, 0);
      assert.equal(x.verdict.thinkingRead, x.verdict.thinkingSent);
    }
    const id = home.header(home.sessionFiles()[0]).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.body.compiles, 3, "the replay is the same compile: no compile of its own");
    assert.equal(conv.body.stamps, sum(reqs, (x) => x.minted.length), "every minted block stamped");
  });

  test("pi's own drop_block end to end: a rewrite bindery cannot see is dropped by the provider once, released from pi's diagnostics, never sent again", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    const late = { extensions: [packageDir, payloadEditor], env: { PAYLOAD_EDIT: "1" } };
    ok(await home.run(["one tools:1 double"]), "run 1");
    ok(await home.run(["-c", "two"], late), "run 2 (the unseen edit starts)"); // create: the edit changed messages[0]
    const reqs = seen();
    const droppedReq = reqs.find((r) => r.verdict.transformations.length > 0);
    assert.ok(droppedReq, "the provider dropped the blocks the unseen edit invalidated");
    const droppedSigs = droppedReq.verdict.transformations.map((x) => {
      const [, n, m] = /messages\.(\d+)\.content\.(\d+)/.exec(x.path)!;
      const b = droppedReq.body.messages[Number(n)].content[Number(m)];
      return b.signature ?? b.data;
    });
    const mark = fake.requests.length;
    ok(await home.run(["-c", "three tools:1"], late), "run 3");
    const after = fake.requests.slice(mark);
    for (const r of after) {
      for (const s of droppedSigs) assert.ok(!r.fullSignatures.includes(s), "a block the provider dropped is not sent again");
      assert.equal(r.verdict.transformations.length, 0, "nothing left to drop");
    }
    assert.ok(after[0].signatures.includes(droppedReq.minted[0]), "the block minted after the edit is replayed");
  });

  test("cache warming fires mid-request: a dry-run compile warms the same prefix, records nothing, and the accept goes to the real compile", async (t) => {
    // promptCache.short 12 s: pi warms 2 s after a request starts (90% of the lifetime, 10 s margin).
    const { d, home, seen } = await setup({ ...OPUS, promptCacheShortSeconds: 12 });
    t.after(() => d.stop());
    // A prompt large enough that a warm pays for itself in pi's economics.
    fake.inputTokens = 200_000;
    t.after(() => {
      fake.inputTokens = undefined;
      fake.hold = undefined;
    });
    ok(await home.run(["one tools:1"]), "run 1");
    // Run 2's request is held until pi's warm for it arrives (a condition, with a deadline).
    let warmSeen: () => void = () => {};
    const warmed = new Promise<void>((r) => (warmSeen = r));
    let held = 0;
    fake.hold = (rec) => {
      if (rec.warm) {
        warmSeen();
        return undefined;
      }
      if (held++ > 0) return undefined;
      return Promise.race([
        warmed,
        new Promise<void>((_, rej) => setTimeout(() => rej(new Error("no cache-warming request within 60 s")), 60_000).unref()),
      ]).catch((e) => console.log(`# ${e.message}`));
    };
    const r2 = await home.run(["-c", "two"]);
    ok(r2, "run 2");
    quiet([r2]);
    const reqs = seen();
    const warms = reqs.filter((r) => r.warm);
    const real = reqs.filter((r) => !r.warm);
    assert.ok(warms.length >= 1, `pi sent a cache-warming request: ${reqs.map((r) => r.body.max_tokens)}`);
    const heldReq = real[real.length - 1];
    for (const w of warms) {
      assert.equal(w.verdict.status, 200);
      assert.deepEqual(w.fullSignatures, heldReq.fullSignatures, "the warm carries the thinking of the request it warms");
    }
    const id = home.header(home.sessionFiles()[0]).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.body.compiles, real.length, "the warm's dry-run compile is not recorded");
    assert.equal(conv.body.stamps, sum(real, (r) => r.minted.length), "the accept reached the real compile");
    const file = readFileSync(home.sessionFiles()[0], "utf8");
    assert.match(file, /"type":"usage"/, "pi recorded the warm's spend");
    // The next request replays everything: the warm became nobody's request.
    const mark = fake.requests.length;
    fake.hold = undefined;
    ok(await home.run(["-c", "three"]), "run 3");
    const last = fake.requests.slice(mark).find((r) => !r.warm)!;
    assert.deepEqual(last.fullSignatures, real.flatMap((r) => r.minted), "every block replayed");
    assert.equal(last.verdict.thinkingRead, last.verdict.thinkingSent);
  });

  // The fake judges as an enforced account on a binding model. pi 1.6 sends drop_block for
  // every binding model in its catalog; with supportsMidConvoEffort turned off for the model
  // (modelOverrides) it sends no block_binding and the account's default, a 400, applies.
  test("the error mode under pi 1.x's body: built-in Opus 5.5 without pi's binding controls; a pruner's rewrite never reaches the provider stale, an unseen edit's 400 is released and the retry is clean", async (t) => {
    const { d, home, seen } = await setup({ model: "claude-opus-5-5", threads: true, compat: { supportsMidConvoEffort: false } });
    t.after(() => d.stop());
    const prune = { extensions: [packageDir, pruner], env: { PRUNER_ACTIVE: "1" } };
    ok(await home.run(["one tools:2"], { extensions: [packageDir, pruner] }), "run 1");
    ok(await home.run(["-c", "two tools:1"], prune), "run 2 (the pruner rewrites run 1's tool results)");
    const first = seen()[0];
    assert.equal(first.body.thinking.type, "adaptive");
    assert.equal(first.body.thinking.block_binding, undefined, "pi sends no block_binding for this model: the account's default (error) applies");
    assert.deepEqual(seen().filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), [], "bindery stripped what the pruner invalidated");
    assert.match(JSON.stringify(seen().map((r) => r.full.messages)), /pruned by test pruner/);
    // An edit bindery cannot see (loaded after it): the provider's 400, the release, a clean retry.
    const late = { extensions: [packageDir, pruner, payloadEditor], env: { PRUNER_ACTIVE: "1", PAYLOAD_EDIT: "1" } };
    const mark = fake.requests.length;
    const refused = await home.run(["-c", "three"], late);
    assert.equal(fake.requests[mark].verdict.refusal, "prefix", "the provider refused the stale block");
    assert.match(refused.stderr, /refused the thinking block at messages\.\d+\.content\.\d+; bindery released it/);
    const mark2 = fake.requests.length;
    ok(await home.run(["-c", "three, again tools:1"], late), "the retry");
    assert.deepEqual(fake.requests.slice(mark2).filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), [], "clean after the release");
  });
});
