// Durations, totals and compact JSON as the pages show them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { duration, json, metric, total } from "../src/format.js";

test("durations", () => {
  assert.equal(duration(5), "5 s");
  assert.equal(duration(65), "1 m 05 s");
  assert.equal(duration(3 * 3600 + 4 * 60), "3 h 04 m");
  assert.equal(duration(null), "—");
});

test("a total that is a lower bound", () => {
  assert.equal(total({ total: 10000, total_exact: false }), "10,000+");
  assert.equal(total({ total: 12, total_exact: true }), "12");
});

test("metric values", () => {
  assert.equal(metric(0.98888), "0.9889");
  assert.equal(metric(30), "30");
  assert.equal(metric(0.0002432), "2.432e-4");
});

test("arrays of plain values on one line", () => {
  assert.equal(json({ shape: [1, 8], name: "a [b]" }), '{\n  "shape": [1, 8],\n  "name": "a [b]"\n}');
});
