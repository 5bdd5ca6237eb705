// The pure parts of the new pages: quotas from a form, steps and trials counted, nodes.
import assert from "node:assert/strict";
import { test } from "node:test";

// The pages import the API module, which reads localStorage only when called.
const { quotaOf } = await import("../src/pages/users.js");
const { nodesOf, share } = await import("../src/pages/capacity.js");
const { runDuration, stepsText } = await import("../src/pages/pipelines.js");
const { trialsText } = await import("../src/pages/experiments.js");

test("a quota from the form: numbers, null for the default, errors said per field", () => {
  assert.deepEqual(quotaOf({ cpus: "1.5", gpus: "", jobs: "3", max_priority: "" }), {
    quota: { cpus: 1.5, gpus: null, jobs: 3, max_priority: null },
  });
  const { errors } = quotaOf({ cpus: "0", gpus: "1.5", jobs: "-1", max_priority: "x" });
  assert.deepEqual(Object.keys(errors).sort(), ["cpus", "gpus", "jobs", "max_priority"]);
});

test("nodes: a cluster's, or this machine", () => {
  const local = nodesOf({ launcher: "local", capacity: { cpus: 2, memory: 8, gpus: 0 }, in_use: { cpus: 1, memory: 2, gpus: 0 } });
  assert.deepEqual(local, [{ name: "This machine (local launcher)", alive: true, cpus: [1, 2], memory: [2, 8], gpus: [0, 0] }]);
  const ray = nodesOf({
    nodes: [{ node: "10.0.0.2", alive: false, cpus: 8, gpus: 1, memory: 16, free_cpus: 6, free_gpus: 1, free_memory: 10 }],
  });
  assert.deepEqual(ray[0].cpus, [2, 8]);
  const kube = nodesOf({ nodes: [{ node: "n1", alive: true, cpus: 4, gpus: 0, memory: 8 }] });
  assert.deepEqual(kube[0].cpus, [null, 4]); // in use: not known
  assert.equal(share(3, 4), 0.75);
  assert.equal(share(1, 0), 0);
});

test("a run's steps and duration; an experiment's trials", () => {
  assert.equal(stepsText({ steps_total: 5, steps_by_state: { SUCCEEDED: 2, CACHED: 1, FAILED: 1, WAITING: 1 } }), "4 of 5 (1 failed)");
  assert.equal(stepsText({ steps_total: 3, steps_by_state: { HALTED: 1, RUNNING: 1, SUCCEEDED: 1 } }), "2 of 3 (1 halted, 1 running)");
  assert.equal(runDuration({ duration_s: 65, state: "SUCCEEDED" }), "1 m 05 s");
  const now = Date.parse("2026-01-01T00:01:00Z");
  assert.equal(runDuration({ duration_s: null, state: "RUNNING", created_at: "2026-01-01T00:00:00Z" }, now), "1 m 00 s");
  assert.equal(trialsText({ trials: 5, max_trial_count: 8, trials_by_state: { SUCCEEDED: 3, RUNNING: 2 } }), "3 of 8 (2 running)");
});
