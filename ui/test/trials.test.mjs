// An experiment's trials: the running best, the parallel axes, the counts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ended, objectiveSeries, objectiveText, paramText, parallelData, trialNote } from "../src/trials.js";

const TRIALS = [
  { number: 0, state: "SUCCEEDED", objective: 0.9, parameters: { lr: "0.01", width: "8", opt: "adam" } },
  { number: 1, state: "EARLY_STOPPED", objective: null, parameters: { lr: "0.1", width: "16", opt: "sgd" }, message: "stopped early by medianstop" },
  { number: 2, state: "SUCCEEDED", objective: 0.95, parameters: { lr: "0.001", width: "32", opt: "sgd" } },
  { number: 3, state: "FAILED", objective: 0.99, parameters: { lr: "0.05", width: "4", opt: "adam" } },
  { number: 4, state: "SUCCEEDED", objective: 0.93, parameters: { lr: "0.02", width: "8", opt: "adam" } },
  { number: 5, state: "RUNNING", objective: null, parameters: { lr: "0.03", width: "8", opt: "adam" } },
];
const SPECS = [
  { name: "lr", parameterType: "double", feasibleSpace: { min: "0.0005", max: "0.1", distribution: "logUniform" } },
  { name: "width", parameterType: "int", feasibleSpace: { min: "4", max: "32" } },
  { name: "opt", parameterType: "categorical", feasibleSpace: { list: ["adam", "sgd", "rmsprop"] } },
];

test("the best so far counts succeeded trials only, in the goal's direction", () => {
  const { succeeded, others, best } = objectiveSeries(TRIALS, "maximize");
  assert.deepEqual(succeeded, [[0, 0.9], [2, 0.95], [4, 0.93]]);
  assert.deepEqual(others, [[3, 0.99]]);
  assert.deepEqual(best, [[0, 0.9], [1, 0.9], [2, 0.95], [3, 0.95], [4, 0.95], [5, 0.95]]);
  assert.deepEqual(objectiveSeries(TRIALS, "minimize").best.map(([, v]) => v), [0.9, 0.9, 0.9, 0.9, 0.9, 0.9]);
  assert.deepEqual(objectiveSeries([], "maximize"), { succeeded: [], others: [], best: [] });
});

test("parallel axes: the search space's types, the objective last", () => {
  const { axes, rows } = parallelData(TRIALS, SPECS, "accuracy");
  assert.deepEqual(axes.map((a) => [a.name, a.type]), [
    ["lr", "log"],
    ["width", "value"],
    ["opt", "category"],
    ["accuracy", "value"],
  ]);
  assert.deepEqual(axes[2].data, ["adam", "sgd", "rmsprop"]);
  assert.ok(axes[3].objective);
  assert.deepEqual(rows[0], { number: 0, state: "SUCCEEDED", values: [0.01, 8, "adam", 0.9] });
  assert.deepEqual(rows[1].values, [0.1, 16, "sgd", null]);
});

test("parallel axes without a search space: numbers where every value is one", () => {
  const { axes } = parallelData([{ number: 0, parameters: { a: "1.5", b: "x" }, objective: 1 }]);
  assert.deepEqual(axes.map((a) => a.type), ["value", "category", "value"]);
  assert.equal(axes[2].name, "objective");
});

test("counts, words and short values", () => {
  assert.equal(ended({ trials_by_state: { SUCCEEDED: 3, RUNNING: 2, CREATED: 1, EARLY_STOPPED: 2 } }), 5);
  assert.equal(objectiveText({ type: "maximize", goal: 0.99, objectiveMetricName: "accuracy" }), "accuracy, maximize, goal 0.99");
  assert.equal(objectiveText({ type: "minimize", objectiveMetricName: "loss" }), "loss, minimize");
  assert.equal(objectiveText(null), "—");
  assert.equal(trialNote(TRIALS[1]), "stopped early by medianstop");
  assert.equal(trialNote({ state: "METRICS_UNAVAILABLE" }), "it ended without reporting the objective");
  assert.equal(paramText("0.009254916391482307", (n) => String(+n.toPrecision(4))), "0.009255");
  assert.equal(paramText("adam"), "adam");
  assert.equal(paramText(""), "");
});
