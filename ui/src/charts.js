// Line charts of metrics with ECharts, tree-shaken to what they use: lines, a grid, a
// tooltip, a scrolling legend and zoom (a slider and the wheel/pinch inside the plot).
import { LineChart } from "echarts/charts";
import {
  DataZoomComponent,
  GridComponent,
  LegendScrollComponent,
  TooltipComponent,
} from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { useEffect, useRef } from "preact/hooks";
import { metric } from "./format.js";
import { html } from "./html.js";

echarts.use([LineChart, GridComponent, TooltipComponent, LegendScrollComponent, DataZoomComponent, CanvasRenderer]);

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
      id: line.name,
      showSymbol: false,
      symbolSize: 4,
      lineStyle: { width: 2, type: DASHES[line.job % DASHES.length] },
      emphasis: { focus: "series" },
      connectNulls: true,
      data: ema(line.points, smoothing).map(([x, y]) => [x, logScale && !(y > 0) ? null : y]),
    })),
  };
}

/** One chart; redrawn in place (keeping the zoom) when its lines or settings change. */
export function MetricChart({ label, lines, smoothing, logScale }) {
  const box = useRef(null);
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
  useEffect(() => {
    chart.current.setOption(chartOption(lines, { smoothing, logScale }), { replaceMerge: ["series"] });
  }, [lines, smoothing, logScale]);
  return html`<div class="chart" ref=${box} data-testid="metric-chart" role="img" aria-label=${label}></div>`;
}
