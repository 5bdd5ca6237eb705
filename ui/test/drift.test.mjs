// Drift windows as the deployment page and the factsheet show them: the chart's series and
// option, the verdict in words; and a factsheet's nested results as rows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { driftOption } from "../src/charts.js";
import { driftSeries, driftedText, verdictText } from "../src/drift.js";
import { factsheetFiles, flatten, inline } from "../src/factsheet.js";

const WINDOWS = [
  { at: 300, drift: true, score: 0.4, p_value: 1e-9, outliers: 3, features: ["c"] },
  { at: 100, drift: false, score: 0.05, p_value: 0.6, outliers: 0, features: [] },
  { at: 200, drift: false, score: 0.07, p_value: 0.3, outliers: 1, features: [] },
];

test("the series run oldest first, in milliseconds, with only the drifted windows marked", () => {
  const series = driftSeries(WINDOWS);
  assert.deepEqual(series.score, [[100_000, 0.05], [200_000, 0.07], [300_000, 0.4]]);
  assert.deepEqual(series.pValue.map(([, p]) => p), [0.6, 0.3, 1e-9]);
  assert.deepEqual(series.drifted, [[300_000, 0.4]]);
  assert.deepEqual(series.outliers, [[100_000, 0], [200_000, 1], [300_000, 3]]);
  assert.deepEqual(driftSeries(undefined).score, []);
});

test("the chart: score and p-value on 0–1, drifted windows as marks, outliers on their own axis", () => {
  const option = driftOption(driftSeries(WINDOWS));
  const names = option.series.map((s) => `${s.type}:${s.name}`);
  assert.deepEqual(names, ["line:Drift score", "line:p-value", "scatter:Drifted window", "bar:Outliers"]);
  assert.equal(option.xAxis.type, "time");
  assert.deepEqual([option.yAxis[0].min, option.yAxis[0].max], [0, 1]);
  assert.equal(option.series[3].yAxisIndex, 1);
  assert.equal(option.series[2].data.length, 1);
  const lone = driftOption(driftSeries(WINDOWS.slice(0, 1)));
  assert.equal(lone.series[0].showSymbol, true); // one window: a point, not an invisible line
});

test("the verdict in words", () => {
  assert.equal(verdictText({ drift: false, at: null }), "No window of requests has been tested yet.");
  assert.equal(verdictText({ ...WINDOWS[0] }), "Drifted: c (p-value 1.000e-9).");
  assert.equal(verdictText({ drift: true, at: 5, features: [], p_value: 0.001 }), "Drifted: the embedding (p-value 0.001).");
  assert.equal(verdictText(WINDOWS[1]), "No drift in the last window (p-value 0.6).");
  assert.equal(driftedText(1, 40), "1 of 40 windows drifted");
  assert.equal(driftedText(0, 1), "0 of 1 window drifted");
});

test("an evaluation's nested results as rows, long ones cut with a count", () => {
  const rows = flatten({ accuracy: 0.91234, fairness: { disparate_impact: 0.8 }, classes: [1, 2], note: null });
  assert.deepEqual(rows, [["accuracy", "0.9123"], ["fairness · disparate_impact", "0.8"], ["classes", "1, 2"], ["note", "—"]]);
  const many = flatten({ features: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}`, i])) });
  assert.equal(many.length, 60);
  assert.deepEqual(many[59], ["…", "41 more in the JSON"]);
  assert.equal(inline({ pip: ["numpy"], seed: 1 }), "pip=[\"numpy\"], seed=1");
  assert.equal(inline({}), "—");
  assert.equal(inline(["s3://a"]), "s3://a");
});

test("the factsheet's downloads: JSON and Markdown, named after the version", () => {
  const files = factsheetFiles("credit risk", 3);
  assert.equal(files.json.href, "/v1/models/credit%20risk/versions/3/factsheet");
  assert.equal(files.markdown.href, "/v1/models/credit%20risk/versions/3/factsheet?format=markdown");
  assert.equal(files.json.filename, "credit-risk-v3-factsheet.json");
  assert.equal(files.markdown.filename, "credit-risk-v3-factsheet.md");
});

test("the monitoring form: from the settings, and back to a PATCH body or an error naming the field", async () => {
  const { monitorChange, monitorForm } = await import("../src/pages/deployment.js");
  assert.deepEqual(monitorForm(null), { drift: false, outliers: false, window: "500", percent: "0" });
  const form = monitorForm({ drift: true, outliers: false, window: 200, payloads: { rate: 0.1 } });
  assert.deepEqual(form, { drift: true, outliers: false, window: "200", percent: "10" });
  assert.deepEqual(monitorChange(form), {
    monitoring: { drift: true, outliers: false, window: 200, payloads: { rate: 0.1 } },
  });
  assert.equal(monitorChange({ ...form, window: "5" }).field, "monitoring.window");
  assert.equal(monitorChange({ ...form, window: "2.5" }).field, "monitoring.window");
  assert.equal(monitorChange({ ...form, percent: "120" }).field, "monitoring.payloads.rate");
  assert.equal(monitorChange({ ...form, percent: "" }).field, "monitoring.payloads.rate");
});
