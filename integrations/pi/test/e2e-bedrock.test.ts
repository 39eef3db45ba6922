/**
 * End to end on pi 1.x's Bedrock route: pi's built-in `amazon-bedrock` provider with a Claude
 * model that binds (us.anthropic.claude-opus-5-5, a cross-region inference profile), pointed at
 * a fake Bedrock runtime (fake-bedrock.ts: ConverseStream over HTTP/2 in AWS event-stream
 * framing) by models.json's baseUrl, with dummy AWS credentials. pi sends its real Converse
 * body: block_binding drop_block and the beta through additionalModelRequestFields, cachePoints
 * on system and the last user message. Runs on the pi 1.x line; skipped on 0.x, saying why.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { judge } from "./fake-anthropic.js";
import { FakeBedrock, toNative, type BedrockRecorded } from "./fake-bedrock.js";
import { BinderyProcess, binderyForTests, fixtures, get, lossyProxy, packageDir, ok, piCli, piIs1x, piVersion, PiHome, quiet, sum, dropped, runPi, tempRoot, type PiRun } from "./e2e-support.js";

const { bin, skip: noBindery, error } = await binderyForTests("e2e bedrock");
const lineDir = join(packageDir, "lines", "pi-1.6");
const skip =
  noBindery ||
  (piIs1x ? false : `pi ${piVersion}: the amazon-bedrock Converse route is tested on the pi 1.x line`) ||
  (existsSync(join(lineDir, "node_modules", "@smithy", "core")) ? false : `no @smithy/core under ${lineDir} (run the pi 1.6 line's install, ci.sh)`);

const MODEL = "us.anthropic.claude-opus-5-5";
const pruner = join(fixtures, "pruner.ts");
const payloadEditor = join(fixtures, "payload-editor.ts");
const payloadRecorder = join(fixtures, "payload-recorder.ts");

/** pi with the amazon-bedrock provider's baseUrl on the fake, dummy credentials, an isolated agent dir. */
class BedrockHome {
  readonly agentDir: string;
  readonly workDir: string;
  constructor(root: string, baseUrl: string, bindery: Record<string, unknown>, agentDir?: string) {
    this.agentDir = agentDir ?? join(root, "agent");
    this.workDir = join(root, "work");
    mkdirSync(this.agentDir, { recursive: true });
    mkdirSync(this.workDir, { recursive: true });
    writeFileSync(join(this.agentDir, "models.json"), JSON.stringify({ providers: { "amazon-bedrock": { baseUrl } } }));
    writeFileSync(join(this.agentDir, "settings.json"), JSON.stringify({ bindery }));
  }

  run(args: string[], opts: { extensions?: string[]; env?: Record<string, string> } = {}): Promise<PiRun> {
    const ext = (opts.extensions ?? [packageDir]).flatMap((e) => ["-e", e]);
    const argv = [piCli, "--provider", "amazon-bedrock", "--model", MODEL, "--thinking", "high", "--no-extensions", ...ext, "-p", ...args];
    const env: Record<string, string | undefined> = {
      ...process.env,
      PI_CODING_AGENT_DIR: this.agentDir,
      PI_OFFLINE: "1",
      AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE",
      AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
      AWS_REGION: "us-east-1",
      AWS_PROFILE: undefined,
      AWS_BEARER_TOKEN_BEDROCK: undefined,
      AWS_CONFIG_FILE: join(this.agentDir, "no-aws-config"),
      AWS_SHARED_CREDENTIALS_FILE: join(this.agentDir, "no-aws-credentials"),
      BINDERY_SOCKET: "",
      ...opts.env,
    };
    return runPi(argv, this.workDir, env);
  }

  sessionFiles(): string[] {
    return PiHome.prototype.sessionFiles.call(this as unknown as PiHome);
  }

  header(file: string): any {
    return JSON.parse(readFileSync(file, "utf8").split("\n")[0]);
  }
}


describe("pi 1.x amazon-bedrock (Converse) + pi-bindery + bindery + fake Bedrock runtime", { skip }, () => {
  let fake: FakeBedrock;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeBedrock(lineDir);
    await fake.start();
  });
  after(() => fake.stop());

  async function setup(settings: Record<string, unknown> = {}) {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new BedrockHome(root, fake.baseUrl, { socketPath: d.socketPath, compileTimeoutMs: 10_000, callTimeoutMs: 10_000, ...settings }, d.agentDir);
    await d.start();
    const from = fake.requests.length;
    return { root, d, home, seen: () => fake.requests.slice(from) };
  }

  test("pi's Converse body goes through bindery: pi's own drop_block, cachePoints, drops asked for; nothing dropped, every block read and stamped", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    const runs = [await home.run(["first tools:2 double"]), await home.run(["-c", "second tools:1"])];
    runs.forEach((r, i) => ok(r, `run ${i + 1}`));
    quiet(runs);
    const reqs = seen();
    assert.ok(reqs.length >= 5, `${reqs.length} requests`);
    assert.deepEqual(reqs.map((r) => r.verdict.status), reqs.map(() => 200), "every request answered");
    const first = reqs[0].body;
    assert.equal(first.modelId, MODEL);
    assert.deepEqual(first.additionalModelRequestFields.thinking.block_binding, { prefix_mismatch_behavior: "drop_block" }, "pi's own block_binding, as pi set it");
    assert.ok(first.additionalModelRequestFields.anthropic_beta.includes("thinking-binding-controls-2026-08-01"));
    assert.deepEqual(first.additionalModelResponseFieldPaths, ["/input_transformations"], "the extension asks Bedrock for the drops");
    assert.ok(first.system.some((b: any) => b.cachePoint) && first.messages.at(-1).content.at(-1).cachePoint, "pi's cachePoints on system and the last user message");
    assert.ok(first.toolConfig.tools.length > 0, "pi's tools in toolConfig");
    for (const r of reqs) {
      assert.equal(r.verdict.transformations.length, 0, "nothing dropped");
      assert.equal(r.verdict.thinkingRead, r.verdict.thinkingSent, "every block sent was read");
      assert.equal(r.verdict.thinkingRead, r.verdict.maxReadable, "as many as the provider could read");
    }
    assert.ok(sum(reqs, (r) => r.verdict.thinkingRead) > 0, "thinking was replayed at all");
    const id = home.header(home.sessionFiles()[0]).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.status, 200, JSON.stringify(conv.body));
    assert.equal(conv.body.compiles, reqs.length, "one compile per request: Converse bodies are compiled, not passed by");
    assert.equal(conv.body.stamps, sum(reqs, (r) => r.minted.length), "every minted block stamped: each Converse accept reached its compile");

    // bindery report prices the Bedrock usage from pi's own cost fields.
    const file = home.sessionFiles()[0];
    const costs = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      .filter((e) => e.type === "message" && e.message?.role === "assistant")
      .map((e) => e.message.usage?.cost?.total as number);
    assert.equal(costs.length, reqs.length, "one assistant entry per request");
    assert.ok(costs.every((c) => typeof c === "number" && c > 0), `pi priced every Bedrock reply: ${costs}`);
    // The report reads the session file bindery follows: wait until it has every request.
    let rep = await get(d.socketPath, `/v1/report?session=${id}`);
    for (const deadline = Date.now() + 60_000; !(rep.status === 200 && rep.body.figures?.requests?.total === reqs.length) && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 100));
      rep = await get(d.socketPath, `/v1/report?session=${id}`);
    }
    assert.equal(rep.status, 200, JSON.stringify(rep.body));
    assert.equal(rep.body.figures.requests.total, reqs.length, "the report has every request");
    const spend = rep.body.figures.spend;
    assert.equal(spend.fromPi, reqs.length, `every request priced from pi's usage.cost: ${JSON.stringify(spend)}`);
    assert.equal(spend.unpriced, 0);
    const total = costs.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(spend.total - total) < 1e-9, `report spend ${spend.total} = pi's ${total}`);
    assert.ok(rep.body.requests.every((r: any) => r.model === MODEL && r.costSource === "pi" && r.regime !== "unknown"), `requests: ${JSON.stringify(rep.body.requests.map((r: any) => [r.model, r.costSource, r.regime]))}`);
  });

  test("the figure on Bedrock: a pruner rewrites old tool results mid-session; pi alone loses blocks to its own drop_block, with bindery none, and reads the provider's maximum", async (t) => {
    const script = [["alpha tools:2 double"], ["-c", "beta tools:2"], ["-c", "gamma tools:1 double"], ["-c", "delta tools:1"]];
    const prune = { PRUNER_ACTIVE: "1" };
    const alone = new BedrockHome(tempRoot(), fake.baseUrl, { enabled: false });
    const mAlone = fake.requests.length;
    for (const [i, args] of script.entries()) ok(await alone.run(args, { extensions: [pruner], env: i > 0 ? prune : {} }), `alone run ${i + 1}`);
    const aloneReqs = fake.requests.slice(mAlone);

    const { root, d, home, seen } = await setup();
    t.after(() => d.stop());
    const log = join(root, "payloads.jsonl");
    const runs: PiRun[] = [];
    for (const [i, args] of script.entries()) runs.push(await home.run(args, { extensions: [payloadRecorder, packageDir, pruner], env: { PAYLOAD_LOG: log, ...(i > 0 ? prune : {}) } }));
    runs.forEach((r, i) => ok(r, `bindery run ${i + 1}`));
    quiet(runs);
    const withReqs = seen();
    assert.match(JSON.stringify(withReqs.map((r) => r.body.messages)), /pruned by test pruner/, "the pruner really rewrote history");
    assert.equal(withReqs.length, aloneReqs.length, "the same scripted session");
    const piPayloads = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(piPayloads.length, withReqs.length, "one payload per request");
    const maxWith = piPayloads.map((p) => {
      const n = toNative(p);
      return judge(n.body, n.headers).verdict.maxReadable;
    });
    const figure = {
      requests: withReqs.length,
      aloneDropped: dropped(aloneReqs),
      aloneRead: sum(aloneReqs, (r) => r.verdict.thinkingRead),
      aloneSent: sum(aloneReqs, (r) => r.verdict.thinkingSent),
      binderyDropped: dropped(withReqs),
      binderyRead: sum(withReqs, (r) => r.verdict.thinkingRead),
      binderySent: sum(withReqs, (r) => r.verdict.thinkingSent),
      max: maxWith.reduce((a, b) => a + b, 0),
    };
    console.log(`bedrock figure: ${JSON.stringify(figure)}`);
    assert.deepEqual(fake.refusals().filter((r) => withReqs.includes(r) || aloneReqs.includes(r)), [], "no refusals");
    assert.ok(figure.aloneDropped > 0, "pi alone had blocks dropped (the pruner's rewrite, pi's own drop_block)");
    assert.equal(figure.binderyDropped, 0, "with bindery nothing was dropped");
    assert.equal(figure.binderyRead, figure.binderySent, "every block sent was read");
    withReqs.forEach((r, i) => assert.equal(r.verdict.thinkingRead, maxWith[i], `request ${i + 1}: bindery's blocks read equal the provider's maximum over pi's own payload`));
    assert.ok(figure.binderyRead > figure.aloneRead, `bindery read more (${figure.binderyRead}) than pi alone (${figure.aloneRead})`);
  });

  test("the error mode on Bedrock (GovCloud: pi sends no block_binding): a pruner's rewrite is stripped, an unseen edit's ValidationException is released and the retry is clean", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    const gov = { AWS_REGION: "us-gov-west-1" };
    ok(await home.run(["one tools:2"], { extensions: [packageDir, pruner], env: gov }), "run 1");
    ok(await home.run(["-c", "two tools:1"], { extensions: [packageDir, pruner], env: { ...gov, PRUNER_ACTIVE: "1" } }), "run 2 (the pruner rewrites run 1's tool results)");
    const first = seen()[0].body;
    assert.equal(first.additionalModelRequestFields.thinking.block_binding, undefined, "no block_binding: the account's default (error) applies");
    assert.deepEqual(seen().filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), [], "bindery stripped what the pruner invalidated");
    const late = { extensions: [packageDir, pruner, payloadEditor], env: { ...gov, PRUNER_ACTIVE: "1", PAYLOAD_EDIT: "1" } };
    const mark = fake.requests.length;
    const refused = await home.run(["-c", "three"], late);
    assert.equal(fake.requests[mark].verdict.refusal, "prefix", "the provider refused the stale block");
    assert.match(refused.stderr, /refused the thinking block at messages\.\d+\.content\.\d+; bindery released it/);
    const mark2 = fake.requests.length;
    ok(await home.run(["-c", "three, again tools:1"], late), "the retry");
    assert.deepEqual(fake.requests.slice(mark2).filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), [], "clean after the release");
  });

  test("accepts lost on the way (a proxy drops them): the Converse replies are attributed from the requests and the session file, still replayed and read", async (t) => {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    await d.start();
    t.after(() => d.stop());
    const from = fake.requests.length;
    const proxySock = join(root, "p.sock");
    let loseAccepts = false;
    const proxy = await lossyProxy(d.socketPath, proxySock, (p) => loseAccepts && p === "/v1/accept");
    t.after(() => proxy.close());
    const home = new BedrockHome(root, fake.baseUrl, { socketPath: proxySock, compileTimeoutMs: 10_000, callTimeoutMs: 10_000 }, d.agentDir);
    ok(await home.run(["one tools:1"]), "run 1");
    loseAccepts = true;
    ok(await home.run(["-c", "two tools:1 double"]), "run 2");
    loseAccepts = false;
    assert.equal(proxy.dropped.length, 2, "both accepts of run 2 were lost");
    ok(await home.run(["-c", "three"]), "run 3");
    const reqs = fake.requests.slice(from);
    assert.deepEqual(reqs.filter((r) => r.verdict.status !== 200).map((r) => r.verdict.error), [], "no refusals");
    const last = reqs.at(-1)!;
    assert.equal(last.verdict.thinkingSent, sum(reqs.slice(0, -1), (r) => r.minted.length), "replies whose accept was lost are still replayed");
    assert.equal(last.verdict.thinkingRead, last.verdict.thinkingSent, "and read");
    assert.equal(last.verdict.transformations.length, 0);
  });

  test("pi's own drop_block on Bedrock: a rewrite bindery cannot see is dropped once, the drops read from messageStop's additionalModelResponseFields released, never sent again", async (t) => {
    const { d, home, seen } = await setup();
    t.after(() => d.stop());
    const late = { extensions: [packageDir, payloadEditor], env: { PAYLOAD_EDIT: "1" } };
    ok(await home.run(["one tools:1 double"]), "run 1");
    ok(await home.run(["-c", "two"], late), "run 2 (the unseen edit starts)");
    const reqs = seen();
    const droppedReq = reqs.find((r) => r.verdict.transformations.length > 0);
    assert.ok(droppedReq, "the provider dropped the blocks the unseen edit invalidated");
    // The paths name the model's own request (cachePoints take no place).
    const droppedSigs = droppedReq.verdict.transformations.map((x) => {
      const [, n, m] = /messages\.(\d+)\.content\.(\d+)/.exec(x.path)!;
      return droppedReq.native.messages[Number(n)].content[Number(m)].signature as string;
    });
    assert.ok(droppedSigs.every((s) => typeof s === "string" && s !== ""), `signatures ${droppedSigs}`);
    const mark = fake.requests.length;
    ok(await home.run(["-c", "three tools:1"], late), "run 3");
    const after = fake.requests.slice(mark);
    const sigs = (body: any) =>
      (body.messages ?? []).flatMap((m: any) => (m.content ?? []).map((b: any) => b.reasoningContent?.reasoningText?.signature).filter(Boolean));
    for (const r of after) {
      for (const s of droppedSigs) assert.ok(!sigs(r.body).includes(s), "a block the provider dropped is not sent again");
      assert.equal(r.verdict.transformations.length, 0, "nothing left to drop");
    }
    assert.ok(sigs(after[0].body).includes(droppedReq.minted[0]), "the block minted after the edit is replayed");
  });
});
