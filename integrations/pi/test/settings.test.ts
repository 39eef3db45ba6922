import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentDir, defaultSocketPath, loadSettings } from "../src/settings.js";

test("default socket follows bindery's own resolution order", () => {
  const home = "/home/u";
  assert.equal(defaultSocketPath({ BINDERY_SOCKET: "/s.sock", XDG_RUNTIME_DIR: "/run/user/1" }, home), "/s.sock");
  assert.equal(defaultSocketPath({ RUNTIME_DIRECTORY: "/run/bindery:/other", XDG_RUNTIME_DIR: "/x" }, home), "/run/bindery/bindery.sock");
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: "/run/user/1" }, home), "/run/user/1/bindery/bindery.sock");
  assert.equal(defaultSocketPath({ BINDERY_STATE_DIR: "/st" }, home), "/st/run/bindery.sock");
  assert.equal(defaultSocketPath({ STATE_DIRECTORY: "/var/lib/b:/y" }, home), "/var/lib/b/run/bindery.sock");
  assert.equal(defaultSocketPath({ XDG_STATE_HOME: "/xs" }, home), "/xs/bindery/run/bindery.sock");
  assert.equal(defaultSocketPath({}, home), "/home/u/.local/state/bindery/run/bindery.sock");
});

test("agent dir: PI_CODING_AGENT_DIR with ~ expanded, else ~/.pi/agent", () => {
  assert.equal(agentDir({ PI_CODING_AGENT_DIR: "~/pa" }, "/h"), "/h/pa");
  assert.equal(agentDir({ PI_CODING_AGENT_DIR: "/abs" }, "/h"), "/abs");
  assert.equal(agentDir({}, "/h"), "/h/.pi/agent");
});

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function dirs() {
  const root = mkdtempSync(join(tmpdir(), "bset"));
  roots.push(root);
  const agent = join(root, "agent");
  const cwd = join(root, "proj");
  mkdirSync(agent);
  mkdirSync(join(cwd, ".pi"), { recursive: true });
  return { agent, cwd, env: { PI_CODING_AGENT_DIR: agent, XDG_RUNTIME_DIR: "/run/user/7" } };
}

test("no settings at all: defaults, no warnings", () => {
  const { cwd, env } = dirs();
  const { settings, warnings } = loadSettings(cwd, env, "/h");
  assert.deepEqual(warnings, []);
  assert.equal(settings.enabled, true);
  assert.equal(settings.failOpen, true);
  assert.equal(settings.dropBlock, false);
  assert.equal(settings.socketPath, "/run/user/7/bindery/bindery.sock");
});

test("global then project settings, project wins key by key", () => {
  const { agent, cwd, env } = dirs();
  writeFileSync(join(agent, "settings.json"), JSON.stringify({ theme: "dark", bindery: { socketPath: "/g.sock", dropBlock: true, failOpen: false } }));
  writeFileSync(join(cwd, ".pi", "settings.json"), JSON.stringify({ bindery: { socketPath: "/p.sock", compileTimeoutMs: 500 } }));
  const { settings, warnings } = loadSettings(cwd, env, "/h");
  assert.deepEqual(warnings, []);
  assert.equal(settings.socketPath, "/p.sock");
  assert.equal(settings.dropBlock, true);
  assert.equal(settings.failOpen, false);
  assert.equal(settings.compileTimeoutMs, 500);
});

test("bad settings are reported, never fatal, and leave defaults", () => {
  const { agent, cwd, env } = dirs();
  writeFileSync(join(agent, "settings.json"), "{ not json");
  writeFileSync(join(cwd, ".pi", "settings.json"), JSON.stringify({ bindery: { enabled: "yes", compileTimeoutMs: -1, socketPath: "", colour: 1 } }));
  const { settings, warnings } = loadSettings(cwd, env, "/h");
  assert.equal(settings.enabled, true);
  assert.equal(settings.compileTimeoutMs, 2000);
  assert.equal(warnings.length, 5, warnings.join("\n"));
  assert.match(warnings[0], /not valid JSON/);
  assert.ok(warnings.some((w) => /bindery\.enabled must be true or false/.test(w)));
  assert.ok(warnings.some((w) => /unknown setting bindery\.colour/.test(w)));
});

test("a non-object bindery key is reported", () => {
  const { agent, cwd, env } = dirs();
  writeFileSync(join(agent, "settings.json"), JSON.stringify({ bindery: false }));
  const { warnings } = loadSettings(cwd, env, "/h");
  assert.match(warnings[0], /must be an object/);
});
