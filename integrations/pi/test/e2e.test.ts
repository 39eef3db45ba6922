/**
 * End to end: the real pi (print mode, isolated agent dir) with pi-bindery loaded, the
 * real `bindery serve`, and the fake Anthropic server judging thinking by the documented
 * rules. Skips, saying why, only when no bindery binary serving /v1/compile is available.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { FakeAnthropic, type Recorded } from "./fake-anthropic.js";
import { BinderyProcess, fixtures, get, packageDir, PiHome, resolveBindery, tempRoot, type PiRun } from "./e2e-support.js";

const resolved = await resolveBindery();
const skip = "skip" in resolved ? `e2e skipped: ${resolved.skip}` : false;
if (skip) console.log(`# ${skip}`);
const bin = "bin" in resolved ? resolved.bin : "";

const pruner = join(fixtures, "pruner.ts");
const payloadEditor = join(fixtures, "payload-editor.ts");

function ok(run: PiRun, what: string): void {
  assert.equal(run.code, 0, `${what}: pi exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
}

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
    fake = new FakeAnthropic();
    await fake.start();
  });
  after(() => fake.stop());

  async function setup(settings: Record<string, unknown> = {}) {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new PiHome(root, fake.baseUrl, { socketPath: d.socketPath, ...settings }, d.agentDir);
    await d.start();
    const from = fake.requests.length;
    return { root, d, home, from, seen: () => fake.requests.slice(from) };
  }

  test("multi-turn session with tool loops: every valid thinking block is replayed, none refused", async (t) => {
    const { d, home, from, seen } = await setup();
    t.after(() => d.stop());
    ok(await home.run(["first tools:2 double"]), "turn 1");
    ok(await home.run(["-c", "second tools:1"]), "turn 2");
    ok(await home.run(["-c", "third redacted tools:1"]), "turn 3");
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
  });
});
