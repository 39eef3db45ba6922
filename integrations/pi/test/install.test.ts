/**
 * The install paths the README names, each run for real: `pi install` of this folder (a
 * clone), and the package `npm pack` makes, loaded by pi. Each ends with a pi run against
 * the fake Anthropic server whose request went through the real bindery.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { FakeAnthropic } from "./fake-anthropic.js";
import { BinderyProcess, get, MODEL, ok, packageDir, piCli, PiHome, runPi, tempRoot, binderyForTests } from "./e2e-support.js";

const { bin, skip, error } = await binderyForTests("install");
const pkg = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
const entry: string = pkg.pi.extensions[0].replace(/^\.\//, "");

describe("installing pi-bindery", { skip }, () => {
  let fake: FakeAnthropic;
  before(async () => {
    if (error) throw new Error(error);
    fake = new FakeAnthropic();
    await fake.start();
  });
  after(() => fake.stop());

  /** pi -p with the extensions pi's settings name (no -e, no --no-extensions), then
   * whether bindery compiled the session's request. */
  async function runThroughBindery(home: PiHome, d: BinderyProcess, extraArgs: string[] = []): Promise<void> {
    const argv = [piCli, "--provider", "anthropic", "--model", MODEL, "--thinking", "high", ...extraArgs, "-p", "hello"];
    const r = await runPi(argv, home.workDir, { ...process.env, PI_CODING_AGENT_DIR: home.agentDir, PI_OFFLINE: "1", ANTHROPIC_API_KEY: "sk-ant-api03-fake", BINDERY_SOCKET: "" });
    ok(r, "pi -p");
    const id = home.header(home.sessionFiles()[0]).id;
    const conv = await get(d.socketPath, `/v1/conversations/${id}`);
    assert.equal(conv.status, 200, `bindery never saw the session's request: ${JSON.stringify(conv.body)}\n${r.stderr}`);
    assert.ok(conv.body.compiles >= 1);
  }

  test("pi install of the clone's folder: listed, loaded, named pi-bindery", async (t) => {
    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new PiHome(root, fake.baseUrl, { socketPath: d.socketPath }, d.agentDir);
    await d.start();
    t.after(() => d.stop());
    const env = { ...process.env, PI_CODING_AGENT_DIR: home.agentDir, PI_OFFLINE: "1" };
    const install = spawnSync(process.execPath, [piCli, "install", packageDir], { env, encoding: "utf8", cwd: home.workDir });
    assert.equal(install.status, 0, `pi install: ${install.stdout}${install.stderr}`);
    const list = spawnSync(process.execPath, [piCli, "list"], { env, encoding: "utf8", cwd: home.workDir });
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, new RegExp(packageDir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")), `pi list:\n${list.stdout}`);
    await runThroughBindery(home, d);

    // The name pi shows for it: pi's own labelling code (interactive mode's extension list)
    // on the entry it loads. pi 1.x ships as one bundle, with no module to call: there the
    // load above is the check.
    const im = join(dirname(piCli), "modes", "interactive", "interactive-mode.js");
    if (!existsSync(im)) {
      t.diagnostic(`no ${im} in this pi line (a bundle): the label is not checked`);
      return;
    }
    const { InteractiveMode } = await import(pathToFileURL(im).href);
    const self = Object.create(InteractiveMode.prototype);
    const labels = self.getCompactExtensionLabels([{ path: join(packageDir, entry), sourceInfo: { source: packageDir, scope: "user" } }]);
    assert.deepEqual(labels, ["pi-bindery"]);
  });

  test("npm pack: the package holds the extension, no tests, and pi loads it", async (t) => {
    const out = tempRoot();
    const packed = spawnSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: packageDir, encoding: "utf8" });
    assert.equal(packed.status, 0, packed.stderr);
    const [info] = JSON.parse(packed.stdout);
    assert.equal(info.name, "pi-bindery");
    const files: string[] = info.files.map((f: { path: string }) => f.path);
    for (const want of ["package.json", "README.md", entry, "src/index.ts", "src/bridge.ts"]) {
      assert.ok(files.includes(want), `${want} is not in the package: ${files.join(", ")}`);
    }
    assert.deepEqual(files.filter((f) => f.startsWith("test/") || f.startsWith("node_modules/")), []);
    execFileSync("tar", ["xzf", join(out, info.filename), "-C", out]);

    const root = tempRoot();
    const d = new BinderyProcess(bin, root);
    const home = new PiHome(root, fake.baseUrl, { socketPath: d.socketPath }, d.agentDir);
    await d.start();
    t.after(() => d.stop());
    await runThroughBindery(home, d, ["--no-extensions", "-e", join(out, "package")]);
  });
});
