// Drift windows (a deployment's, from GET /v1/deployments/N/drift, or a model version's, from
// its factsheet) as the pages show them: series for the chart, oldest first, and the words for
// a verdict. A window is `{at, drift, score, p_value, outliers, features, …}`, `at` in UNIX
// seconds.
import { count, metric } from "./format.js";

const byTime = (a, b) => a.at - b.at;

/** The chart's series, oldest first, x in milliseconds: the drift score (the largest distance),
 * the smallest p-value, the windows that drifted (marked at their score)
 * and the outliers flagged per window. */
export function driftSeries(windows) {
  const shown = (windows || []).filter((w) => typeof w.at === "number").sort(byTime);
  const x = (w) => w.at * 1000;
  return {
    score: shown.map((w) => [x(w), w.score ?? null]),
    pValue: shown.map((w) => [x(w), w.p_value ?? null]),
    drifted: shown.filter((w) => w.drift).map((w) => [x(w), w.score ?? 0]),
    outliers: shown.map((w) => [x(w), w.outliers ?? 0]),
  };
}

/** "c, d" for the features that drifted; "the embedding" when an image's did. */
export const featuresText = (window) => (window.features?.length ? window.features.join(", ") : "the embedding");

/** The last window's verdict in words. */
export function verdictText(found) {
  if (!found?.at) return "No window of requests has been tested yet.";
  if (found.drift) return `Drifted: ${featuresText(found)} (p-value ${metric(found.p_value)}).`;
  return `No drift in the last window (p-value ${metric(found.p_value)}).`;
}

/** "3 of 40 windows drifted". */
export const driftedText = (drifted, total) => `${count(drifted)} of ${count(total)} ${total === 1 ? "window" : "windows"} drifted`;
