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
