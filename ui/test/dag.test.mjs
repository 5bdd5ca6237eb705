// The pipeline graph's layered layout: columns by depth, rows ordered, edges from box to box.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BOX, clip, depths, layout, progress } from "../src/dag.js";

const WORKFLOW = [
  { name: "data", after: [] },
  { name: "train", after: ["data"] },
  { name: "pick", after: ["train"] },
  { name: "serve", after: ["pick"] },
  { name: "predict", after: ["serve", "data"] },
  { name: "report", after: [], exit_handler: true },
];

test("a step's depth is the longest chain it waits for", () => {
  const depth = depths(WORKFLOW);
  assert.deepEqual(
    Object.fromEntries(depth),
    { data: 0, train: 1, pick: 2, serve: 3, predict: 4, report: 5 }, // the exit handler goes last
  );
});

test("unknown names and cycles do not break the depths", () => {
  const depth = depths([
    { name: "a", after: ["b", "nowhere"] },
    { name: "b", after: ["a"] },
  ]);
  assert.equal(depth.size, 2);
  for (const d of depth.values()) assert.ok(Number.isInteger(d) && d >= 0);
});

test("an exit handler alone is a root", () => {
  assert.equal(depths([{ name: "only", after: [], exit_handler: true }]).get("only"), 0);
});

test("boxes in columns by depth, a short column centred, edges from right side to left side", () => {
  const steps = [
    { name: "a", after: [] },
    { name: "b", after: ["a"] },
    { name: "c", after: ["a"] },
    { name: "d", after: ["b", "c"] },
  ];
  const { nodes, edges, width, height } = layout(steps);
  const at = Object.fromEntries(nodes.map((n) => [n.name, n]));
  assert.equal(at.a.depth, 0);
  assert.equal(at.b.depth, 1);
  assert.equal(at.c.depth, 1);
  assert.equal(at.d.depth, 2);
  assert.equal(at.b.x, at.c.x);
  assert.ok(at.b.x > at.a.x + BOX.width);
  assert.notEqual(at.b.y, at.c.y);
  // a and d sit between b and c
  assert.equal(at.a.y, (at.b.y + at.c.y) / 2);
  assert.equal(at.d.y, at.a.y);
  assert.equal(edges.length, 4);
  const ab = edges.find((e) => e.from === "a" && e.to === "b");
  assert.match(ab.d, new RegExp(`^M${at.a.x + BOX.width},${at.a.y + BOX.height / 2} C`));
  assert.ok(ab.d.endsWith(`${at.b.x},${at.b.y + BOX.height / 2}`));
  assert.equal(width, BOX.margin * 2 + 3 * BOX.width + 2 * BOX.gapX);
  assert.equal(height, BOX.margin * 2 + 2 * BOX.height + BOX.gapY);
  for (const n of nodes) {
    assert.ok(n.x >= 0 && n.x + n.width <= width);
    assert.ok(n.y >= 0 && n.y + n.height <= height);
  }
});

test("children follow their parents' rows: no crossing where none is needed", () => {
  const steps = [
    { name: "p1", after: [] },
    { name: "p2", after: [] },
    { name: "c2", after: ["p2"] }, // listed first, but its parent is the lower one
    { name: "c1", after: ["p1"] },
  ];
  const at = Object.fromEntries(layout(steps).nodes.map((n) => [n.name, n]));
  assert.ok(at.p1.y < at.p2.y);
  assert.ok(at.c1.y < at.c2.y);
});

test("no steps, no boxes", () => {
  const { nodes, edges } = layout([]);
  assert.deepEqual([nodes, edges], [[], []]);
});

test("a fan-out's progress and clipped names", () => {
  const tasks = [{ state: "SUCCEEDED" }, { state: "CACHED" }, { state: "RUNNING" }, { state: "WAITING" }];
  assert.deepEqual(progress(tasks), { done: 2, running: 1, total: 4 });
  assert.equal(clip("a-very-long-step-name", 10), "a-very-lo…");
  assert.equal(clip("short", 10), "short");
});
