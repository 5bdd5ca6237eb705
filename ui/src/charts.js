// Line charts of metrics with ECharts, tree-shaken to what they use: lines, a grid, a
// tooltip, a scrolling legend and zoom (a slider and the wheel/pinch inside the plot); and an
// experiment's two charts: the objective over trials (points and a line) and its trials'
// parameters as parallel coordinates; and a deployment's (or a model version's) drift windows
// over time.
import { BarChart, LineChart, ParallelChart, ScatterChart } from "echarts/charts";
import {
  DataZoomComponent,
  GridComponent,
  LegendScrollComponent,
  ParallelComponent,
  TooltipComponent,
} from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { useEffect, useMemo, useRef } from "preact/hooks";
import { driftSeries } from "./drift.js";
import { metric } from "./format.js";
import { html } from "./html.js";

echarts.use([
  BarChart,
  LineChart,
  ScatterChart,
  ParallelChart,
  GridComponent,
  ParallelComponent,
  TooltipComponent,
  LegendScrollComponent,
  DataZoomComponent,
  CanvasRenderer,
]);

// Dark enough to stand out on white (3:1 and more); jobs differ by dash as well as colour.
const PALETTE = ["#1d4ed8", "#b45309", "#047857", "#be123c", "#6d28d9", "#0e7490", "#4d7c0f", "#a21caf", "#374151"];
const DASHES = ["solid", "dashed", "dotted"];
const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';

/** TensorBoard's smoothing: an exponential moving average, debiased at the start. */
export function ema(points, weight) {
  if (!weight) return points;
  let last = 0;
  let n = 0;
  return points.map(([x, y]) => {
    if (typeof y !== "number" || !Number.isFinite(y)) return [x, y];
    last = last * weight + (1 - weight) * y;
    n += 1;
    return [x, last / (1 - weight ** n)];
  });
}

/** The chart option for `lines`: [{ name, job (its index, for the dash), points: [[x, y]] }]. */
export function chartOption(lines, { smoothing = 0, logScale = false } = {}) {
  const wholeSteps = lines.every((line) => line.points.every(([x]) => Number.isInteger(x)));
  return {
    animation: false,
    color: PALETTE,
    textStyle: { fontFamily: FONT, fontSize: 12 },
    tooltip: { trigger: "axis", valueFormatter: (v) => metric(v), confine: true },
    legend: { type: "scroll", top: 0, textStyle: { color: "#1f2937" } },
    grid: { left: 12, right: 24, top: 36, bottom: 56, containLabel: true },
    xAxis: {
      type: "value",
      name: "step",
      nameLocation: "middle",
      nameGap: 24,
      min: "dataMin",
      max: "dataMax",
      minInterval: wholeSteps ? 1 : undefined, // no step 1.5 between epochs 1 and 2
      axisLabel: { color: "#374151" },
      nameTextStyle: { color: "#374151" },
    },
    yAxis: { type: logScale ? "log" : "value", scale: true, axisLabel: { color: "#374151", formatter: (v) => metric(v) } },
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "none" },
      { type: "slider", xAxisIndex: 0, filterMode: "none", height: 18, bottom: 6 },
    ],
    series: lines.map((line) => ({
      type: "line",
      name: line.name,
      id: line.id ? `${line.id}\u0000${line.name}` : line.name, // two lines never merge by name
      showSymbol: line.points.length < 2, // a lone point has no segment to draw: show its mark
      symbolSize: line.points.length < 2 ? 8 : 4,
      lineStyle: { width: 2, type: DASHES[line.job % DASHES.length] },
      emphasis: { focus: "series" },
      connectNulls: true,
      data: ema(line.points, smoothing).map(([x, y]) => [x, logScale && !(y > 0) ? null : y]),
    })),
  };
}

/** An ECharts instance in a box that follows the box's size; disposed with the component. */
function useChart(box) {
  const chart = useRef(null);
  useEffect(() => {
    chart.current = echarts.init(box.current, null, { renderer: "canvas" });
    const observer = new ResizeObserver(() => chart.current?.resize());
    observer.observe(box.current);
    return () => {
      observer.disconnect();
      chart.current.dispose();
      chart.current = null;
    };
  }, []);
  return chart;
}

/** One chart; redrawn in place (keeping the zoom) when its lines or settings change. */
export function MetricChart({ label, lines, smoothing, logScale }) {
  const box = useRef(null);
  const chart = useChart(box);
  useEffect(() => {
    chart.current.setOption(chartOption(lines, { smoothing, logScale }), { replaceMerge: ["series"] });
  }, [lines, smoothing, logScale]);
  return html`<div class="chart" ref=${box} data-testid="metric-chart" role="img" aria-label=${label}></div>`;
}

const AXIS = { axisLabel: { color: "#374151" }, nameTextStyle: { color: "#374151" } };

/**
 * The objective over trials: each trial's objective as a point (round: succeeded; triangles:
 * the others, stopped early or failed), and the best so far as a dashed step line.
 * `series` is trials.js's objectiveSeries.
 */
export function objectiveOption({ succeeded, others, best }, metricName) {
  const points = (name, data, symbol, color) => ({
    type: "scatter",
    name,
    data,
    symbol,
    symbolSize: 10,
    itemStyle: { color, borderColor: "#111827", borderWidth: 1 },
  });
  return {
    animation: false,
    textStyle: { fontFamily: FONT, fontSize: 12 },
    tooltip: {
      trigger: "item",
      confine: true,
      formatter: (p) => `${p.seriesName}<br>trial ${p.value[0]}: ${metric(p.value[1])}`,
    },
    legend: { type: "scroll", top: 0, textStyle: { color: "#1f2937" } },
    grid: { left: 30, right: 24, top: 40, bottom: 36, containLabel: true },
    xAxis: {
      type: "value",
      name: "trial",
      nameLocation: "middle",
      nameGap: 24,
      minInterval: 1,
      min: (v) => Math.max(0, v.min - 1),
      max: (v) => v.max + 1,
      ...AXIS,
    },
    yAxis: {
      type: "value",
      scale: true,
      name: metricName,
      nameLocation: "middle",
      nameRotate: 90,
      nameGap: 46,
      ...AXIS,
      axisLabel: { ...AXIS.axisLabel, formatter: (v) => metric(v) },
    },
    series: [
      points("Succeeded trials", succeeded, "circle", PALETTE[0]),
      ...(others.length ? [points("Other trials (stopped early, failed, running)", others, "triangle", PALETTE[1])] : []),
      {
        type: "line",
        name: "Best so far",
        data: best,
        step: "end",
        showSymbol: false,
        color: PALETTE[2],
        lineStyle: { width: 2, type: "dashed", color: PALETTE[2] },
      },
    ],
  };
}

/** The parameters of the trials as parallel coordinates, the objective the last axis; the best
 * trial a thick line of its own. `data` is trials.js's parallelData. */
export function parallelOption({ axes, rows }, bestNumber) {
  const line = (row) => ({ name: `trial ${row.number}`, value: row.values });
  const best = rows.filter((r) => r.number === bestNumber);
  const rest = rows.filter((r) => r.number !== bestNumber);
  return {
    animation: false,
    textStyle: { fontFamily: FONT, fontSize: 12 },
    tooltip: { trigger: "item", confine: true, formatter: (p) => `${p.name}: ${p.value.map((v) => metric(v)).join(", ")}` },
    legend: { top: 0, textStyle: { color: "#1f2937" } },
    parallel: {
      left: 48,
      right: 72,
      top: 56,
      bottom: 28,
      parallelAxisDefault: {
        nameLocation: "end",
        nameGap: 12,
        nameTextStyle: { color: "#1f2937", fontWeight: "bold" },
        axisLabel: { color: "#374151", formatter: (v) => (typeof v === "number" ? metric(v) : v) },
        axisLine: { lineStyle: { color: "#4b5563" } },
      },
    },
    parallelAxis: axes.map((axis, dim) => ({
      dim,
      name: axis.objective ? `${axis.name} (objective)` : axis.name,
      type: axis.type,
      ...(axis.data ? { data: axis.data } : { scale: true }),
    })),
    series: [
      { type: "parallel", name: "Trials", data: rest.map(line), color: PALETTE[0], lineStyle: { width: 1.5, opacity: 0.7, color: PALETTE[0] } },
      ...(best.length
        ? [{ type: "parallel", name: "Best trial", data: best.map(line), color: PALETTE[1], lineStyle: { width: 4, opacity: 1, type: "dashed", color: PALETTE[1] } }]
        : []),
    ],
  };
}

function OptionChart({ label, option, testid }) {
  const box = useRef(null);
  const chart = useChart(box);
  useEffect(() => {
    chart.current.setOption(option, { notMerge: true });
  }, [option]);
  return html`<div class="chart" ref=${box} data-testid=${testid} role="img" aria-label=${label}></div>`;
}

/** The objective over trials; `series` from trials.js's objectiveSeries. */
export function ObjectiveChart({ label, series, metricName }) {
  const option = useMemo(() => objectiveOption(series, metricName), [series, metricName]);
  return html`<${OptionChart} label=${label} option=${option} testid="objective-chart" />`;
}

/** The trials' parameters; `data` from trials.js's parallelData. */
export function ParametersChart({ label, data, best }) {
  const option = useMemo(() => parallelOption(data, best), [data, best]);
  return html`<${OptionChart} label=${label} option=${option} testid="parameters-chart" />`;
}

/**
 * Drift over time: each window's score (the largest distance between its requests and the
 * reference) and smallest p-value on the left axis, the windows that drifted marked on the
 * score line, and the outliers flagged per window as bars on the right axis. `series` is
 * drift.js's driftSeries.
 */
const margin = (extent) => Math.max(extent.max - extent.min, 60_000) * 0.04;

export function driftOption({ score, pValue, drifted, outliers }) {
  const lone = score.length < 2; // a lone point has no segment to draw: show its mark
  const line = (name, data, color, type) => ({
    type: "line",
    name,
    data,
    color,
    showSymbol: lone,
    symbolSize: lone ? 8 : 4,
    lineStyle: { width: 2, type, color },
    connectNulls: true,
  });
  return {
    animation: false,
    textStyle: { fontFamily: FONT, fontSize: 12 },
    tooltip: { trigger: "axis", confine: true, valueFormatter: (v) => metric(v) },
    legend: { type: "scroll", top: 0, textStyle: { color: "#1f2937" } },
    grid: { left: 12, right: 24, top: 40, bottom: 56, containLabel: true },
    // Room either side, so that the first and the last window's bars are drawn whole.
    xAxis: { type: "time", min: (v) => v.min - margin(v), max: (v) => v.max + margin(v), ...AXIS },
    yAxis: [
      {
        type: "value",
        name: "score, p-value",
        min: 0,
        max: 1,
        ...AXIS,
        axisLabel: { ...AXIS.axisLabel, formatter: (v) => metric(v) },
      },
      { type: "value", name: "outliers", minInterval: 1, splitLine: { show: false }, ...AXIS },
    ],
    dataZoom: [
      { type: "inside", xAxisIndex: 0, filterMode: "none" },
      { type: "slider", xAxisIndex: 0, filterMode: "none", height: 18, bottom: 6 },
    ],
    series: [
      line("Drift score", score, PALETTE[0], "solid"),
      line("p-value", pValue, PALETTE[2], "dashed"),
      {
        type: "scatter",
        name: "Drifted window",
        data: drifted,
        symbol: "triangle",
        symbolSize: 12,
        itemStyle: { color: PALETTE[3], borderColor: "#111827", borderWidth: 1 },
        z: 3,
      },
      {
        type: "bar",
        name: "Outliers",
        yAxisIndex: 1,
        data: outliers,
        barMaxWidth: 10,
        itemStyle: { color: PALETTE[8], opacity: 0.6 },
      },
    ],
  };
}

/** A deployment's or a version's drift windows; `windows` as the API gives them. Redrawn in
 * place when new windows come (every few seconds on a deployment's page), keeping the zoom. */
export function DriftChart({ label, windows }) {
  const box = useRef(null);
  const chart = useChart(box);
  useEffect(() => {
    chart.current.setOption(driftOption(driftSeries(windows)), { replaceMerge: ["series"] });
  }, [windows]);
  return html`<div class="chart" ref=${box} data-testid="drift-chart" role="img" aria-label=${label}></div>`;
}
