// Job states, as src/loom/domain/states.py names and groups them.
export const STATES = [
  "QUEUED",
  "PENDING",
  "DOWNLOADING",
  "PROCESSING",
  "STORING",
  "COMPLETED",
  "FAILED",
  "HALTED",
];
export const RUNNING = new Set(["PENDING", "DOWNLOADING", "PROCESSING", "STORING"]);
export const TERMINAL = new Set(["COMPLETED", "FAILED", "HALTED"]);
export const HALTABLE = new Set(["QUEUED", ...RUNNING]);
export const isLive = (state) => state === "QUEUED" || RUNNING.has(state);

// An experiment's and its trials' states (src/loom/domain/experiments.py, Katib's).
export const EXPERIMENT_ACTIVE = new Set(["CREATED", "RUNNING"]);
export const EXPERIMENT_ENDED = new Set(["SUCCEEDED", "FAILED"]);
export const TRIAL_ACTIVE = new Set(["CREATED", "RUNNING"]);

// A pipeline run's and its steps' states (src/loom/domain/pipeline_states.py).
export const RUN_ACTIVE = new Set(["PENDING", "RUNNING"]);
export const STEP_ENDED = new Set(["SUCCEEDED", "CACHED", "FAILED", "SKIPPED", "HALTED"]);
