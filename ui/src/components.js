// Pieces every page uses: state badges, error notes, scrollable tables, confirmation
// dialogs, downloads that carry the token, labelled form fields.
import { useEffect, useRef, useState } from "preact/hooks";
import { download } from "./api.js";
import { html } from "./html.js";
import { href } from "./router.js";

const TONE = {
  QUEUED: "waiting",
  PENDING: "active",
  DOWNLOADING: "active",
  PROCESSING: "active",
  STORING: "active",
  COMPLETED: "good",
  FAILED: "bad",
  HALTED: "stopped",
  // experiments, trials, pipeline runs and steps
  CREATED: "waiting",
  WAITING: "waiting",
  RUNNING: "active",
  SUCCEEDED: "good",
  CACHED: "good",
  SKIPPED: "plain",
  KILLED: "stopped",
  FINISHED: "good", // a tracked run's (MLflow's statuses)
  SCHEDULED: "waiting",
  EARLY_STOPPED: "stopped",
  METRICS_UNAVAILABLE: "bad",
  ready: "good",
  starting: "active",
  scaling: "active",
  updating: "active",
  degraded: "stopped",
  down: "bad",
  failed: "bad",
  // a deployment's detector
  "building its environment": "active",
  watching: "good",
  failing: "bad",
};

/** A state as text in a tinted box: the colour only repeats what the word says. */
export function Badge({ state }) {
  const text = state || "unknown";
  return html`<span class=${`badge tone-${TONE[text] || "plain"}`}>${text}</span>`;
}

export function ErrorNote({ error, id }) {
  if (!error) return null;
  const message = typeof error === "string" ? error : error.message;
  return html`<p class="error" role="alert" id=${id}>${message}</p>`;
}

export function Loading({ what = "Loading" }) {
  return html`<p class="muted" role="status">${what}…</p>`;
}

/** A table that scrolls sideways inside its box on a narrow screen (and by keyboard). */
export function TableBox({ label, children }) {
  return html`<div class="table-box" role="region" aria-label=${label} tabindex="0">${children}</div>`;
}

/** A link to an API file; clicking downloads it with the token. */
export function DownloadLink({ href, filename, children, fetchBlob }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const click = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await (fetchBlob ? fetchBlob() : download(href, filename));
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return html`<span class="download">
    <a href=${href} onClick=${click} aria-busy=${busy ? "true" : undefined}>${children}</a>
    ${busy && html`<span class="muted"> preparing…</span>`}
    ${error && html`<span class="error" role="alert"> ${error.message}</span>`}
  </span>`;
}

/**
 * Asks before doing something that cannot be undone. A native modal <dialog>: it keeps focus
 * inside, closes on Escape, and gives focus back to what opened it.
 */
export function ConfirmDialog({ title, children, onConfirm, onClose }) {
  const ref = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  useEffect(() => {
    const opener = document.activeElement;
    ref.current.showModal();
    return () => opener?.focus?.();
  }, []);
  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
      onClose();
    } catch (caught) {
      setError(caught);
      setBusy(false);
    }
  };
  const cancel = (event) => {
    event.preventDefault();
    onClose();
  };
  return html`<dialog ref=${ref} aria-labelledby="dialog-title" onCancel=${cancel}>
    <h2 id="dialog-title">${title}</h2>
    <div>${children}</div>
    <${ErrorNote} error=${error} />
    <div class="actions">
      <button type="button" class="danger" onClick=${confirm} disabled=${busy}>Confirm</button>
      <button type="button" onClick=${onClose} autofocus>Cancel</button>
    </div>
  </dialog>`;
}

/** A labelled control with its error beside it, tied with aria-invalid and aria-describedby. */
export function Field({ id, label, error, hint, children }) {
  const described = [hint && `${id}-hint`, error && `${id}-error`].filter(Boolean).join(" ");
  const control = children({
    id,
    "aria-invalid": error ? "true" : undefined,
    "aria-describedby": described || undefined,
  });
  return html`<div class=${`field${error ? " invalid" : ""}`}>
    <label for=${id}>${label}</label>
    ${control}
    ${hint && html`<p class="hint" id=${`${id}-hint`}>${hint}</p>`}
    ${error && html`<p class="field-error" id=${`${id}-error`}>${error}</p>`}
  </div>`;
}

/** "n/a" in the table cells where a value is missing. */
export const orDash = (value) => (value === null || value === undefined || value === "" ? "—" : value);

// ECharts is most of the code: it loads with the first page that draws a chart.
let charts = null;
export const loadCharts = () => (charts ||= import("./charts.js"));

/** A chart of charts.js (`chart` names its component), loaded when first shown. Until then an
 * empty box of the same size and label stands in. */
export function LazyChart({ chart, ...props }) {
  const [module, setModule] = useState(null);
  const [failed, setFailed] = useState(null);
  useEffect(() => {
    loadCharts().then(setModule, setFailed);
  }, []);
  if (failed) return html`<p class="error" role="alert">The chart could not load: ${failed.message}</p>`;
  if (!module) return html`<div class="chart" role="img" aria-label=${props.label}></div>`;
  const Chart = module[chart];
  return html`<${Chart} ...${props} />`;
}

/** A bar that shows a share (0–1); hidden from screen readers: the text beside it says it. */
export function Bar({ share, tone = "" }) {
  const percent = Math.round(Math.min(1, Math.max(0, share || 0)) * 100);
  return html`<span class=${`bar ${tone}`} aria-hidden="true"><span style=${{ width: `${percent}%` }}></span></span>`;
}

/** What made a job (its `lineage`): a link to the experiment of its trial, or to the pipeline
 * run of its step; nothing when its owner submitted it. */
export function Lineage({ lineage }) {
  if (lineage?.kind === "experiment" && lineage.experiment) {
    return html`<a href=${href("experiments", lineage.experiment)}>Trial ${lineage.trial} of experiment ${lineage.experiment}</a>`;
  }
  if (lineage?.kind === "pipeline" && lineage.run) {
    const item = lineage.index ? ` (item ${lineage.index})` : "";
    return html`<a href=${href("pipelines", lineage.run)}>Step ${lineage.step}${item} of pipeline ${lineage.pipeline}, run ${lineage.run}</a>`;
  }
  return null;
}
