// Request rate and latency percentiles between two readings of a deployment's counters.
import assert from "node:assert/strict";
import { test } from "node:test";
import { quantile, traffic } from "../src/traffic.js";

test("a quantile read off cumulative buckets", () => {
  const buckets = [["0.001", 0], ["0.01", 50], ["0.1", 100], ["+Inf", 100]];
  assert.ok(Math.abs(quantile(buckets, 0.5) - 0.01) < 1e-12);
  assert.ok(Math.abs(quantile(buckets, 0.25) - 0.0055) < 1e-9);
  assert.ok(Math.abs(quantile(buckets, 0.99) - 0.0982) < 1e-9);
  assert.equal(quantile([["0.1", 0], ["+Inf", 0]], 0.5), null);
});

test("rate and latency over the interval only", () => {
  const before = { at: 10, requests: { 200: 100, 503: 2 }, buckets: [["0.01", 100], ["+Inf", 102]], count: 102, sum: 0.5 };
  const after = { at: 12, requests: { 200: 120, 503: 2 }, buckets: [["0.01", 100], ["0.1", 120], ["+Inf", 122]], count: 122, sum: 1.5, inflight: 3, waiting: 1 };
  const found = traffic(before, after);
  assert.equal(found.rate, 10);
  assert.ok(found.p50 > 0.01 && found.p50 <= 0.1); // the 20 new ones were all slower
  assert.equal(found.inflight, 3);
  assert.equal(found.waiting, 1);
  assert.equal(traffic(null, after), null);
  assert.equal(traffic(after, after), null);
});
