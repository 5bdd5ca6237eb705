// An experiment's trials as its page shows them: the objective over trials with the running
// best, the parameters as parallel axes, and what a trial's state means. No browser needed.
import { TRIAL_ACTIVE } from "./states.js";

const finite = (v) => typeof v === "number" && Number.isFinite(v);

/** The objective's direction: "maximize" or "minimize" (Katib's `objective.type`). */
export const goalType = (objective) => (objective?.type === "minimize" ? "minimize" : "maximize");

export const better = (type, a, b) => (type === "minimize" ? a < b : a > b);

/** How many trials have ended (neither queued nor running). */
export function ended(experiment) {
  return Object.entries(experiment.trials_by_state || {})
    .filter(([state]) => !TRIAL_ACTIVE.has(state))
    .reduce((sum, [, n]) => sum + n, 0);
}

/** "accuracy, maximize, goal 0.995" from Katib's objective. */
export function objectiveText(objective, show = String) {
  if (!objective) return "—";
  const parts = [objective.objectiveMetricName || "objective", goalType(objective)];
  if (objective.goal !== undefined && objective.goal !== null) parts.push(`goal ${show(objective.goal)}`);
  return parts.join(", ");
}

/** The points of the chart: [trial number, objective] of each trial that has one, split into
 * those that succeeded and the others (stopped early, failed, still running); and the best
 * objective so far among the succeeded ones, as a step line over every trial number. */
export function objectiveSeries(trials, type) {
  const sorted = [...trials].sort((a, b) => a.number - b.number);
  const succeeded = [];
  const others = [];
  const best = [];
  let current = null;
  for (const trial of sorted) {
    const value = trial.objective;
    if (finite(value)) (trial.state === "SUCCEEDED" ? succeeded : others).push([trial.number, value]);
    if (trial.state === "SUCCEEDED" && finite(value) && (current === null || better(type, value, current))) {
      current = value;
    }
    if (current !== null) best.push([trial.number, current]);
  }
  return { succeeded, others, best };
}

/** A trial's parameter as a number when the search space says it is one (or it reads as one). */
function axisKind(name, specs, trials) {
  const spec = specs.find((p) => p.name === name);
  const type = spec?.parameterType;
  if (type === "double" || type === "int") {
    const log = spec.feasibleSpace?.distribution === "logUniform";
    return log ? "log" : "value";
  }
  if (type === "categorical") return "category";
  const values = trials.map((t) => t.parameters?.[name]).filter((v) => v !== undefined && v !== null);
  return values.length > 0 && values.every((v) => v !== "" && Number.isFinite(Number(v))) ? "value" : "category";
}

/**
 * The parallel coordinates: one axis per parameter (in the search space's order, then any the
 * trials have besides), the objective last; one line per trial. `specs` is Katib's
 * `spec.parameters`. Returns { axes: [{ name, type, data? }], rows: [{ number, state, values }] }.
 */
export function parallelData(trials, specs = [], metricName = "objective") {
  const names = specs.map((p) => p.name);
  for (const trial of trials) {
    for (const name of Object.keys(trial.parameters || {})) if (!names.includes(name)) names.push(name);
  }
  const axes = names.map((name) => {
    const type = axisKind(name, specs, trials);
    if (type !== "category") return { name, type };
    const seen = [];
    const spec = specs.find((p) => p.name === name);
    for (const v of spec?.feasibleSpace?.list || []) if (!seen.includes(String(v))) seen.push(String(v));
    for (const t of trials) {
      const v = t.parameters?.[name];
      if (v !== undefined && v !== null && !seen.includes(String(v))) seen.push(String(v));
    }
    return { name, type, data: seen };
  });
  axes.push({ name: metricName, type: "value", objective: true });
  const rows = [...trials]
    .sort((a, b) => a.number - b.number)
    .map((trial) => ({
      number: trial.number,
      state: trial.state,
      values: [
        ...axes.slice(0, -1).map(({ name, type }) => {
          const raw = trial.parameters?.[name];
          if (raw === undefined || raw === null) return null;
          if (type === "category") return String(raw);
          const n = Number(raw);
          return Number.isFinite(n) && (type !== "log" || n > 0) ? n : null;
        }),
        finite(trial.objective) ? trial.objective : null,
      ],
    }));
  return { axes, rows };
}

/** Why a trial ended as it did, in words (its message: the early-stopping rule's reason). */
export function trialNote(trial) {
  if (trial.message) return trial.message;
  if (trial.state === "METRICS_UNAVAILABLE") return "it ended without reporting the objective";
  if (trial.state === "KILLED") return "halted";
  return "";
}

/** A parameter's value short: a number to 4 significant digits (`show` formats it), else as is. */
export function paramText(value, show = String) {
  const text = String(value ?? "");
  const n = Number(text);
  return text.trim() !== "" && Number.isFinite(n) ? show(n) : text;
}
