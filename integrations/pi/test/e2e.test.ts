/**
 * End to end: the real pi (print mode, isolated agent dir) with pi-bindery loaded, the
 * real `bindery serve`, and the fake Anthropic server judging thinking by the documented
 * rules. Skips, saying why, only when no bindery binary serving /v1/compile is available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { FakeAnthropic, type Recorded } from "./fake-anthropic.js";
import { BinderyProcess, fixtures, get, lossyProxy, packageDir, PiHome, binderyForTests, ok, quiet, tempRoot, type PiRun } from "./e2e-support.js";

const { bin, skip, error } = await binderyForTests("e2e");

const pruner = join(fixtures, "pruner.ts");
const payloadEditor = join(fixtures, "payload-editor.ts");

/** Every request the fake saw in this test was accepted. */
function noRefusals(fake: FakeAnthropic, from = 0): void {
  const bad = fake.requests.slice(from).filter((r) => r.verdict.status !== 200);
  assert.deepEqual(
    bad.map((r) => r.verdict.error),
    [],
    "pi sent a thinking block the provider refuses",
  );
}

const minted = (reqs: Recorded[]) => reqs.flatMap((r) => r.minted);

describe("pi + pi-bindery + bindery + fake Anthropic", { skip }, () => {
  let fake: FakeAnthropic;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeAnthropic();
    await fake.start();
  });
  after(() => fake.stop());

  async function setup(settings: Record<string, unknown> = {}) {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    // A generous deadline: these tests judge what is sent, not speed, on a loaded 2-core box.
    const home = new PiHome(root, fake.baseUrl, { socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000, ...settings }, d.agentDir);
    await d.start();
    const from = fake.requests.length;
    return { root, d, home, from, seen: () => fake.requests.slice(from) };
  }

  test("a frozen daemon (SIGSTOP) costs one compile deadline, not one a request; pi still answers", async (t) => {
    const timeout = 4000;
    const { d, home } = await setup({ compileTimeoutMs: timeout });
    t.after(async () => {
      d.signal("SIGCONT");
      await d.stop();
    });
    // The same three-request turn with bindery answering, then frozen: the difference is
    // what the frozen daemon cost.
    let start = Date.now();
    ok(await home.run(["three requests tools:2"]), "run 1");
    const base = Date.now() - start;
    d.signal("SIGSTOP");
    start = Date.now();
    const r = await home.run(["-c", "three requests tools:2"]);
    const took = Date.now() - start;
    ok(r, "run 2, bindery frozen");
    assert.equal(r.stderr.match(/bindery: compile failed/g)?.length, 1, `reported once: ${r.stderr}`);
    assert.match(r.stderr, /did not answer in time/);
    // Waiting out the deadline on each request cost 3 x 4 s; now only the first waits (and
    // pi's exit may wait for the background probe's one-second ask).
    t.diagnostic(`answering ${base} ms, frozen ${took} ms`);
    assert.ok(took - base < timeout + 3000, `a three-request turn took ${took} ms with bindery frozen, ${base} ms with it answering`);
  });

  test("multi-turn session with tool loops: every valid thinking block is replayed, none refused", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const runs = [
      await home.run(["first tools:2 double"]),
      await home.run(["-c", "second tools:1"]),
      await home.run(["-c", "third redacted tools:1"]),
    ];
    runs.forEach((r, i) => ok(r, `turn ${i + 1}`));
    quiet(runs);
    noRefusals(fake, from);
    const reqs = seen();
    assert.equal(reqs.length, 3 + 2 + 2);
    // Pure append: each request replays every block minted before it, and the model read them all.
    for (let i = 1; i < reqs.length; i++) {
      assert.deepEqual(reqs[i].signatures, minted(reqs.slice(0, i)), `request ${i} replays all earlier thinking`);
      assert.equal(reqs[i].verdict.thinkingRead, reqs[i].verdict.thinkingSent);
    }
    const session = home.sessionFiles()[0];
    const id = home.header(session).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.status, 200, JSON.stringify(conv.body));
    // bindery saw every request and stamped every minted block (accepts arrived).
    assert.equal(conv.body.engaged, true);
    assert.equal(conv.body.compiles, reqs.length);
    assert.equal(conv.body.stamps, minted(reqs).length);
    // Within a pi run every compile after the first went by reference (a new pi process
    // starts with no base), but the session's second request: pi moved the cache marker
    // off its only earlier message, so the two share no message. 7 requests in 3 runs.
    const byRef = d.log.split("\n").filter((l) => l.includes("compile by reference")).length;
    assert.equal(byRef, reqs.length - runs.length - 1, `compiles by reference in bindery's log:\n${d.log.slice(-3000)}`);
  });

  test("history rewrite by a pruner extension mid-session: stale thinking stripped, the rest kept, nothing refused", async (t) => {
    // The pruner is loaded AFTER pi-bindery on purpose: it rewrites at pi's `context`
    // event, which pi runs before it serialises the payload, so bindery sees its rewrite
    // whatever the load order.
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const exts = [packageDir, pruner];
    const prune = { PRUNER_ACTIVE: "1" };
    const runs = [await home.run(["alpha tools:2"], { extensions: exts })];
    const turn1 = seen();
    const [m0, m1, m2] = minted(turn1);
    runs.push(await home.run(["-c", "beta tools:1"], { extensions: exts, env: prune }));
    const turn2 = seen().slice(turn1.length);
    runs.push(await home.run(["-c", "gamma"], { extensions: exts, env: prune }));
    const turn3 = seen().slice(turn1.length + turn2.length);
    runs.forEach((r, i) => ok(r, `turn ${i + 1}`));
    quiet(runs);
    noRefusals(fake, from);
    // The pruner really rewrote history.
    assert.match(JSON.stringify(turn2[0].body.messages), /pruned by test pruner/);
    // m0 precedes every pruned tool result: still valid, kept. m1 and m2 follow one: stripped.
    assert.deepEqual(turn2[0].signatures, [m0]);
    assert.ok(!turn2[0].signatures.includes(m1) && !turn2[0].signatures.includes(m2));
    const m3 = turn2[0].minted[0];
    assert.deepEqual(turn2[1].signatures, [m0, m3], "blocks minted after the rewrite are replayed");
    // Turn 3 prunes turn 2's tool result: m3 precedes it (kept), m4 follows it (stripped).
    assert.deepEqual(turn3[0].signatures, [m0, m3]);
    for (const r of [...turn2, ...turn3]) assert.equal(r.verdict.thinkingRead, r.verdict.thinkingSent);
  });

  test("a fork (pi --fork) replays the parent's valid thinking; the parent continues too", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const runs = [await home.run(["one tools:1"]), await home.run(["-c", "two"])];
    const parentFile = home.sessionFiles()[0];
    const before = minted(seen());
    runs.push(await home.run(["--fork", parentFile, "forked tools:1"]));
    const forkReqs = seen().slice(3);
    const forkFile = home.sessionFiles().find((f) => f !== parentFile)!;
    assert.ok(forkFile, "pi wrote a fork session file");
    assert.equal(home.header(forkFile).parentSession, parentFile);
    runs.push(await home.run(["--session", parentFile, "three"]));
    runs.forEach((r, i) => ok(r, `run ${i + 1}`));
    quiet(runs);
    noRefusals(fake, from);
    assert.deepEqual(forkReqs[0].signatures, before, "the fork replays every valid block of its parent");
    const last = seen().at(-1)!;
    assert.deepEqual(last.signatures, before, "the parent replays its own blocks, not the fork's");
  });

  test("daemon restart mid-session: nothing lost, thinking still replayed", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const runs = [await home.run(["one tools:1 double"])];
    await d.stop();
    await d.start();
    runs.push(await home.run(["-c", "two tools:1"]));
    runs.forEach((r, i) => ok(r, `run ${i + 1}`));
    quiet(runs);
    noRefusals(fake, from);
    const reqs = seen();
    for (let i = 1; i < reqs.length; i++) assert.deepEqual(reqs[i].signatures, minted(reqs.slice(0, i)));
  });

  test("daemon down mid-session, then back: pi carries on unchanged, and nothing refused after", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const r1 = await home.run(["one tools:1"]);
    await d.stop();
    const r2 = await home.run(["-c", "two tools:1"]);
    await d.start();
    const r3 = await home.run(["-c", "three"]);
    [r1, r2, r3].forEach((r, i) => ok(r, `run ${i + 1}`));
    quiet([r1, r3]);
    assert.equal(r2.stderr.match(/bindery: compile failed/g)?.length, 1, `reported once: ${r2.stderr}`);
    noRefusals(fake, from);
    const reqs = seen();
    // While down, pi's payload went out unchanged: every block replayed.
    assert.deepEqual(reqs[2].signatures, minted(reqs.slice(0, 2)));
    // Blocks stamped before the outage are still replayed after it.
    for (const s of minted(reqs.slice(0, 2))) assert.ok(reqs.at(-1)!.signatures.includes(s), "pre-outage thinking survives");
  });

  test("daemon down from the start: pi works as without the extension and says so once per run", async () => {
    const root = tempRoot();
    const home = new PiHome(root, fake.baseUrl, { socketPath: join(root, "absent", "bindery.sock") });
    const from = fake.requests.length;
    const r1 = await home.run(["one tools:1"]);
    const r2 = await home.run(["-c", "two"]);
    for (const r of [r1, r2]) {
      ok(r, "run");
      assert.equal(r.stderr.match(/bindery: compile failed/g)?.length, 1, r.stderr);
    }
    noRefusals(fake, from);
    // Without bindery a history rewrite reaches the provider as is: the fake refuses it,
    // as Anthropic would. (This is the failure the pruner test above shows bindery prevents.)
    const before = fake.requests.length;
    await home.run(["-c", "three tools:1"], { extensions: [packageDir, pruner], env: { PRUNER_ACTIVE: "1" } });
    assert.equal(fake.requests[before].verdict.refusal, "prefix");
  });

  test("load order: a payload rewriter loaded before pi-bindery is seen; loaded after, its 400 releases and the next request is clean", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    const edit = { PAYLOAD_EDIT: "1" };
    // Before: bindery compiles the edited payload and strips what the edit invalidated.
    ok(await home.run(["one tools:1"]), "run 1");
    ok(await home.run(["-c", "two"], { extensions: [payloadEditor, packageDir], env: edit }), "run 2");
    noRefusals(fake, from);
    const afterRun2 = seen();
    assert.deepEqual(afterRun2[2].signatures, [], "every block follows the edited first message: all stripped");

    // After: a fresh session where the rewriter runs after bindery, unseen by it.
    const mark = fake.requests.length;
    const home2 = new PiHome(tempRoot(), fake.baseUrl, { socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000 }, d.agentDir);
    ok(await home2.run(["one tools:1"]), "run 1'");
    const refused = await home2.run(["-c", "two"], { extensions: [packageDir, payloadEditor], env: edit });
    const r2 = fake.requests.slice(mark);
    assert.equal(r2.at(-1)!.verdict.refusal, "prefix", "the provider refused the stale block");
    assert.match(refused.stderr, /refused the thinking block at messages\.1\.content\.0; bindery released it and every later one.*next request goes through clean/);
    const mark2 = fake.requests.length;
    ok(await home2.run(["-c", "three tools:1"], { extensions: [packageDir, payloadEditor], env: edit }), "run 3'");
    ok(await home2.run(["-c", "four"], { extensions: [packageDir, payloadEditor], env: edit }), "run 4'");
    noRefusals(fake, mark2);
    const r3 = fake.requests.slice(mark2);
    assert.deepEqual(r3[0].signatures, [], "released blocks are not sent again");
    assert.deepEqual(r3.at(-1)!.signatures, minted(r3.slice(0, -1)), "thinking minted after the release survives");
  });

  test("dropBlock setting: after a refusal the session sends drop_block with its beta header", async (t) => {
    const { d, home } = await setup({ dropBlock: true, dropBlockHosts: ["127.0.0.1"] });
    t.after(() => d.stop());
    const edit = { PAYLOAD_EDIT: "1" };
    const late = { extensions: [packageDir, payloadEditor], env: edit };
    ok(await home.run(["one tools:1"]), "run 1");
    const mark = fake.requests.length;
    const refused = await home.run(["-c", "two"], late);
    assert.equal(fake.requests[mark].verdict.refusal, "prefix");
    assert.match(refused.stderr, /drop_block/);
    const mark2 = fake.requests.length;
    ok(await home.run(["-c", "three"], late), "run 3");
    noRefusals(fake, mark2);
    const req = fake.requests[mark2];
    assert.deepEqual(req.body.thinking.block_binding, { prefix_mismatch_behavior: "drop_block" });
    const betas = String(req.headers["anthropic-beta"]).split(",");
    assert.ok(betas.includes("thinking-binding-controls-2026-08-01"), `beta header: ${betas}`);
    assert.ok(betas.includes("interleaved-thinking-2025-05-14"), "pi's own betas are kept");

    // The unseen rewriter changes its edit: blocks bindery believes valid are stale. Under
    // drop_block the provider drops them (no 400) and says so in input_transformations,
    // which the extension reads from the stream and passes in the accept: bindery releases
    // them and stops sending them.
    const mark3 = fake.requests.length;
    const v3 = { extensions: late.extensions, env: { ...edit, PAYLOAD_EDIT_TEXT: " [context v3]" } };
    ok(await home.run(["-c", "four"], v3), "run 4");
    const dropped = fake.requests[mark3];
    assert.equal(dropped.verdict.status, 200);
    assert.ok(dropped.verdict.transformations.length > 0, "the provider dropped stale blocks");
    const droppedSigs = dropped.verdict.transformations.map((x) => {
      const [, n, m] = /messages\.(\d+)\.content\.(\d+)/.exec(x.path)!;
      const b = dropped.body.messages[Number(n)].content[Number(m)];
      return b.signature ?? b.data;
    });
    ok(await home.run(["-c", "five"], v3), "run 5");
    noRefusals(fake, mark3);
    const next = fake.requests[mark3 + 1];
    for (const s of droppedSigs) assert.ok(!next.signatures.includes(s), "a block the provider dropped is not sent again");
    assert.deepEqual(next.verdict.transformations, [], "nothing left for the provider to drop");
    assert.ok(next.signatures.includes(dropped.minted[0]), "the block minted under the new edit is replayed");
  });

  test("a lost accept: bindery attributes the reply from the session file, its thinking replayed", async (t) => {
    const { root, d, from, seen } = await setup();
    t.after(() => d.stop());
    // pi talks to bindery through a proxy that loses every accept of the second run.
    const proxySock = join(root, "p.sock");
    let loseAccepts = false;
    const proxy = await lossyProxy(d.socketPath, proxySock, (p) => loseAccepts && p === "/v1/accept");
    t.after(() => proxy.close());
    const home = new PiHome(root, fake.baseUrl, { socketPath: proxySock, compileTimeoutMs: 10_000, callTimeoutMs: 10_000 }, d.agentDir);
    ok(await home.run(["one tools:1"]), "run 1");
    loseAccepts = true;
    const r2 = await home.run(["-c", "two tools:1"]);
    ok(r2, "run 2");
    loseAccepts = false;
    assert.equal(proxy.dropped.length, 2, "both accepts of run 2 were lost");
    const r3 = await home.run(["-c", "three"]);
    ok(r3, "run 3");
    noRefusals(fake, from);
    const reqs = seen();
    const last = reqs.at(-1)!;
    assert.deepEqual(last.signatures, minted(reqs.slice(0, -1)), "replies whose accept was lost are still replayed");
  });
});
