// Tracked runs without a browser: the columns a page of runs offers, what a cell shows, the
// order a column header asks for next, labels that tell apart runs of the same name, and the
// lines of a comparison's charts.
import { metric } from "./format.js";

/** The params and metrics a page of runs holds, each list sorted: what the columns offer. */
export function columnsOf(runs) {
  const params = new Set();
  const metrics = new Set();
  for (const run of runs) {
    Object.keys(run.params || {}).forEach((key) => params.add(`params.${key}`));
    Object.keys(run.metrics || {}).forEach((key) => metrics.add(`metrics.${key}`));
  }
  return { params: [...params].sort(), metrics: [...metrics].sort() };
}

/** The columns shown before any is chosen: a few params, then a few metrics. */
export function defaultColumns(runs, most = 4) {
  const { params, metrics } = columnsOf(runs);
  return [...params.slice(0, most), ...metrics.slice(0, most)];
}

/** What one cell of a column ("params.lr", "metrics.loss", "tags.team") shows. */
export function cell(run, column) {
  const [kind, ...rest] = column.split(".");
  const key = rest.join(".");
  const source = { params: run.params, metrics: run.metrics, tags: run.tags }[kind] || {};
  const value = source[key];
  if (value === undefined) return "—";
  if (value === null) return "NaN";
  return kind === "metrics" ? metric(value) : String(value);
}

/** The `order_by` a click on a column header asks for: ascending, then descending, then none. */
export function nextOrder(current, column) {
  if (current === `${column} ASC`) return `${column} DESC`;
  if (current === `${column} DESC`) return null;
  return `${column} ASC`;
}

/** A header's aria-sort under `order`. */
export function sortOf(order, column) {
  if (order === `${column} ASC`) return "ascending";
  if (order === `${column} DESC`) return "descending";
  return "none";
}

/** Each run's label: its name, with the start of its id where another run has the same name
 * (two "train" jobs are two lines, not one). */
export function labels(runs) {
  const counts = new Map();
  runs.forEach((run) => counts.set(run.name, (counts.get(run.name) || 0) + 1));
  return runs.map((run) => (counts.get(run.name) > 1 ? `${run.name} (${run.id.slice(0, 8)})` : run.name));
}

/** A comparison's charts: { key: [{ name, job, points: [[step, value]] }] }, a line per run
 * that logged the key; `job` (its place among the runs) picks its dash. */
export function compareLines(answer) {
  const names = labels(answer.runs);
  const charts = {};
  for (const [key, histories] of Object.entries(answer.metrics || {})) {
    charts[key] = histories
      .map((history, job) => ({
        name: names[job],
        id: answer.runs[job].id,
        job,
        points: history.steps.map((step, i) => [step, history.values[i]]),
      }))
      .filter((line) => line.points.length > 0);
  }
  return charts;
}

/** The runs chosen to compare: 2 to 10 of them. */
export const MAX_COMPARED = 10;
export const canCompare = (chosen) => chosen.length >= 2 && chosen.length <= MAX_COMPARED;

/** A job's title: a trial is named by its experiment and its number, as its run is. */
export function jobTitle(job) {
  const lineage = job.lineage || {};
  if (lineage.kind === "experiment" && lineage.experiment) return `${lineage.experiment} · trial ${lineage.trial}`;
  return job.name;
}
