// Runs without a browser: columns, cells, the order a header asks for, and chart lines that
// keep runs of the same name apart.
import assert from "node:assert/strict";
import { test } from "node:test";
import { canCompare, cell, columnsOf, compareLines, defaultColumns, jobTitle, labels, nextOrder, sortOf } from "../src/runs.js";
import { parse } from "../src/router.js";

const RUNS = [
  { id: "aaaaaaaa11", name: "train", params: { lr: "0.1", batch: "32" }, metrics: { loss: 0.25, acc: null }, tags: { team: "a" } },
  { id: "bbbbbbbb22", name: "train", params: { lr: "0.2" }, metrics: { loss: 0.5 }, tags: {} },
];

test("the columns a page of runs offers, and the first ones shown", () => {
  assert.deepEqual(columnsOf(RUNS), { params: ["params.batch", "params.lr"], metrics: ["metrics.acc", "metrics.loss"] });
  assert.deepEqual(defaultColumns(RUNS, 1), ["params.batch", "metrics.acc"]);
});

test("a cell shows the value, NaN for a metric without one, a dash for a missing key", () => {
  assert.equal(cell(RUNS[0], "params.lr"), "0.1");
  assert.equal(cell(RUNS[0], "metrics.loss"), "0.25");
  assert.equal(cell(RUNS[0], "metrics.acc"), "NaN");
  assert.equal(cell(RUNS[1], "params.batch"), "—");
  assert.equal(cell(RUNS[0], "tags.team"), "a");
});

test("a header click orders ascending, then descending, then not at all", () => {
  assert.equal(nextOrder(null, "metrics.loss"), "metrics.loss ASC");
  assert.equal(nextOrder("metrics.loss ASC", "metrics.loss"), "metrics.loss DESC");
  assert.equal(nextOrder("metrics.loss DESC", "metrics.loss"), null);
  assert.equal(nextOrder("params.lr ASC", "metrics.loss"), "metrics.loss ASC");
  assert.equal(sortOf("metrics.loss DESC", "metrics.loss"), "descending");
  assert.equal(sortOf("metrics.loss DESC", "params.lr"), "none");
});

test("two runs of the same name are two lines, and a single point is a line too", () => {
  assert.deepEqual(labels(RUNS), ["train (aaaaaaaa)", "train (bbbbbbbb)"]);
  const lines = compareLines({
    runs: RUNS,
    metrics: { loss: [{ steps: [1, 2], values: [0.5, 0.25] }, { steps: [7], values: [0.5] }], acc: [{ steps: [], values: [] }, { steps: [], values: [] }] },
  });
  assert.deepEqual(lines.loss.map((l) => [l.name, l.job, l.points]), [
    ["train (aaaaaaaa)", 0, [[1, 0.5], [2, 0.25]]],
    ["train (bbbbbbbb)", 1, [[7, 0.5]]],
  ]);
  assert.deepEqual(lines.acc, []);
});

test("2 to 10 runs are compared; a trial job is named by its experiment", () => {
  assert.equal(canCompare(["a"]), false);
  assert.equal(canCompare(["a", "b"]), true);
  assert.equal(canCompare(Array.from({ length: 11 }, (_, i) => String(i))), false);
  assert.equal(jobTitle({ name: "t", lineage: { kind: "experiment", experiment: "digits", trial: 3 } }), "digits · trial 3");
  assert.equal(jobTitle({ name: "t", lineage: null }), "t");
});

test("the run pages, MLflow's links to its runs among them", () => {
  assert.deepEqual(parse("#/runs"), { page: "runs", param: null, key: "runs/" });
  assert.equal(parse("#/runs/abc").param, "abc");
  assert.equal(parse("#/compare/a,b").param, "a,b");
  assert.deepEqual(parse("#/experiments/3/runs/abc123"), { page: "runs", param: "abc123", key: "runs/abc123" });
});
