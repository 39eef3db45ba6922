import { test } from "node:test";
import assert from "node:assert/strict";
import { jsonView, messagesJson, messagesText, sameJson } from "../src/plan.js";

/** Values whose JSON text is equal, or nearly, in ways JSON.stringify tells apart or not. */
function samples(): unknown[] {
  const nullProto = Object.create(null);
  nullProto.a = 1;
  const withToJSON = { a: 1, toJSON: () => ({ a: 2 }) };
  const hiddenToJSON = { a: 1 };
  Object.defineProperty(hiddenToJSON, "toJSON", { value: () => "x", enumerable: false });
  const arrayToJSON: unknown[] & { toJSON?: () => unknown } = [1];
  arrayToJSON.toJSON = () => [2];
  const hiddenKey = { a: 1 };
  Object.defineProperty(hiddenKey, "b", { value: 2, enumerable: false });
  class Point {
    x = 1;
  }
  return [
    {}, { a: 1 }, { a: 1, b: undefined }, { b: undefined, a: 1 }, { a: 1, f: () => 1 }, { a: 1, s: Symbol("s") },
    { a: 1, b: 2 }, { b: 2, a: 1 }, { 1: "x", a: 2 }, { a: 2, 1: "x" }, JSON.parse('{"__proto__":1}'), { ["__proto__x"]: 1 },
    nullProto, withToJSON, { a: 2 }, hiddenToJSON, "x", arrayToJSON, [2], hiddenKey, new Point(), { x: 1 },
    [], [1], [1, undefined], [1, null], [1, () => 1], [undefined], [null], [[]], [{}],
    0, -0, 1, 1e21, 1.5, NaN, Infinity, -Infinity, null, true, false, "", "true", "1", "null", "\u2028", "\ud800", "é",
    new Date(0), "1970-01-01T00:00:00.000Z", new Uint8Array([1]), { 0: 1 }, new String("x"), new Number(1),
    { a: [{ b: "c" }] }, { a: [{ b: "d" }] }, { a: [{ b: "c", d: undefined }] }, { a: { b: { c: [1, { d: "e" }] } } },
  ];
}

test("sameJson against a value's view is true only when JSON.stringify writes the same text", () => {
  const xs = samples();
  for (const a of xs) {
    for (const b of xs) {
      const same = sameJson(a, jsonView(b));
      if (same) assert.equal(JSON.stringify(a), JSON.stringify(b), `${String(JSON.stringify(a))} vs ${String(JSON.stringify(b))}`);
    }
  }
});

test("plain data equals its own view, and any copy of it (pi rebuilds its payload every turn)", () => {
  // Plain data: primitives, arrays and objects of Object's prototype (or none), no toJSON.
  const plainDeep = (v: unknown): boolean => {
    if (typeof v !== "object" || v === null) return typeof v !== "bigint";
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== Array.prototype && proto !== null) return false;
    if (typeof (v as { toJSON?: unknown }).toJSON === "function") return false;
    return Object.values(v).every(plainDeep);
  };
  const plain = samples().filter((v) => plainDeep(v) && typeof v !== "number");
  for (const v of plain) {
    assert.ok(sameJson(v, jsonView(v)), JSON.stringify(v));
    assert.ok(sameJson(JSON.parse(JSON.stringify(v)), jsonView(v)), JSON.stringify(v));
  }
  for (const n of [0, -0, 1, 1e21, 1.5, NaN, Infinity]) assert.ok(sameJson(n, jsonView(n)), String(n));
  assert.ok(sameJson({ a: 1, b: undefined }, jsonView({ a: 1 })), "a key whose value JSON leaves out is no change");
  assert.ok(sameJson([undefined], jsonView([null])), "an array writes undefined as null");
});

test("a view is detached: changing the value after it was taken is a difference", () => {
  const v = { role: "user", content: [{ type: "text", text: "a" }] };
  const view = jsonView(v);
  v.content[0].text = "b";
  assert.equal(sameJson(v, view), false);
  v.content[0].text = "a";
  assert.equal(sameJson(v, view), true);
  v.content.push({ type: "text", text: "c" });
  assert.equal(sameJson(v, view), false);
});

test("messagesText: the messages' text is JSON.stringify's, the memo's kept for the shared ones", () => {
  const messages: unknown[] = [{ role: "user", content: "a" }, undefined, { role: "assistant", content: [{ type: "text", text: "b" }] }];
  const first = messagesText(messages, undefined);
  assert.equal(first.shared, 0);
  assert.equal(messagesJson(first.text), JSON.stringify(messages));
  const memo = { compileId: "c", parts: first.text.parts, views: first.text.views, hash: undefined as never, hashed: 0 };
  const next = [...structuredClone(messages.slice(0, 1)), null, { role: "assistant", content: [{ type: "text", text: "c" }] }, { role: "user", content: "d" }];
  const second = messagesText(next, memo);
  assert.equal(second.shared, 2);
  assert.equal(second.text.parts[0], first.text.parts[0]);
  assert.equal(messagesJson(second.text), JSON.stringify(next));
});
