// A pipeline run's DAG drawn as SVG with dag.js's layered layout: one box per step with its
// name, its state as a word (the box's tint and border only repeat it), its duration, "cached"
// and a fan-out's items. The picture is one image to a screen reader; the Steps table below it
// says the same, row by row.
import { html } from "../html.js";
import { clip, layout, progress } from "../dag.js";
import { duration } from "../format.js";

const TONE = {
  WAITING: "waiting",
  RUNNING: "active",
  SUCCEEDED: "good",
  CACHED: "good",
  FAILED: "bad",
  SKIPPED: "plain",
  HALTED: "stopped",
};

/** A step's duration so far (or in all, once it ended). */
export function stepDuration(step, now) {
  if (step.duration_s !== null && step.duration_s !== undefined) return duration(step.duration_s);
  if (step.started_at && !step.finished_at) return duration((now - Date.parse(step.started_at)) / 1000);
  return "";
}

/** The line under the state: the fan-out's items, or "cached", or the duration. */
export function stepDetail(step, now) {
  const parts = [];
  const took = stepDuration(step, now);
  if (took) parts.push(took);
  if (step.fan_out) {
    const { done, total } = progress(step.tasks || []);
    parts.push(`${done}/${total} items`);
  }
  if (step.cached) parts.push("cached");
  return parts.join(" · ");
}

export function PipelineGraph({ steps, now }) {
  const drawn = layout(steps);
  const byName = new Map(steps.map((s) => [s.name, s]));
  const label = `Pipeline graph`;
  return html`<div class="dag-box" tabindex="0" role="region" aria-label="Pipeline graph, scrolls sideways on a small screen">
    <svg class="dag" role="img" aria-label=${label} width=${drawn.width} height=${drawn.height}
      viewBox=${`0 0 ${drawn.width} ${drawn.height}`}>
      <defs>
        <marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" class="dag-arrow" />
        </marker>
      </defs>
      ${drawn.edges.map(
        (edge) => html`<path key=${`${edge.from}>${edge.to}`} class=${`dag-edge${
          byName.get(edge.from)?.state === "SUCCEEDED" || byName.get(edge.from)?.state === "CACHED" ? " done" : ""
        }`} d=${edge.d} marker-end="url(#dag-arrow)" />`,
      )}
      ${drawn.nodes.map((node) => {
        const step = byName.get(node.name);
        const state = step.state || "WAITING";
        const kind = step.exit_handler ? "on exit" : step.kind;
        const items = step.fan_out ? progress(step.tasks || []) : null;
        return html`<g key=${node.name} class=${`dag-node tone-${TONE[state] || "plain"} state-${state.toLowerCase()}`}
          transform=${`translate(${node.x},${node.y})`}>
          <title>${`${step.name}: ${state}`}</title>
          <rect width=${node.width} height=${node.height} rx="8" />
          <text x="10" y="20" class="dag-name">${clip(step.name, 24)}</text>
          <text x="10" y="41" class="dag-state">${state}</text>
          <text x=${node.width - 10} y="41" class="dag-kind" text-anchor="end">${clip(kind, 15)}</text>
          <text x="10" y="62" class="dag-detail">${clip(stepDetail(step, now), 28)}</text>
          ${items && items.total > 0 &&
          html`<rect class="dag-track" x="10" y=${node.height - 9} width=${node.width - 20} height="4" rx="2" />
            <rect class="dag-fill" x="10" y=${node.height - 9} width=${((node.width - 20) * items.done) / items.total} height="4" rx="2" />`}
        </g>`;
      })}
    </svg>
  </div>`;
}
