// #/pipelines/<run id>: a pipeline run: its state, its DAG drawn, each step in a table (state,
// times, cache hits, the jobs, experiments, deployments and sub-runs it made, what it output:
// values and artifacts), and halt/retry/delete. A sub-pipeline's run (a KFP DAG, an Argo DAG
// template) has a page of its own, linked both ways. Live: read again every 2 s while it runs.
import { useState } from "preact/hooks";
import { ApiError, api, path } from "../api.js";
import { Badge, ConfirmDialog, ErrorNote, Loading, TableBox } from "../components.js";
import { count, json, when } from "../format.js";
import { useInterval, useNow, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { RUN_ACTIVE } from "../states.js";
import { progress } from "../dag.js";
import { PipelineGraph, stepDuration } from "./pipeline-graph.js";
import { LIVE_MS, runDuration, stepsText } from "./pipelines.js";

const IDLE_MS = 15_000;

const ACTIONS = {
  halt: {
    label: "Halt",
    title: "Halt this pipeline run?",
    text: "Its running steps' jobs are halted and no new step starts. Retry runs the halted steps again.",
  },
  retry: {
    label: "Retry",
    title: "Retry this pipeline run?",
    text: "Its failed, halted and skipped steps run again; the steps that succeeded keep their outputs.",
  },
  delete: {
    label: "Delete",
    title: "Delete this pipeline run?",
    text: "It is halted if it runs, and its jobs and experiments are removed; registered models and deployments stay. This cannot be undone.",
  },
};

function Actions({ run, onDone }) {
  const [asking, setAsking] = useState(null);
  const active = RUN_ACTIVE.has(run.state);
  // What retry runs again: failed, halted and skipped steps, once the run failed or was halted.
  // Not while a halted run's jobs are still stopping (the server would retry only the others).
  const stopping = run.steps.some((s) => (s.tasks || []).some((t) => t.state === "RUNNING"));
  const retriable = ["FAILED", "HALTED"].includes(run.state) && !stopping;
  const allowed = [active && "halt", retriable && "retry", "delete"].filter(Boolean);
  const act = async (action) => {
    const where = `/v1/pipelines/runs/${path(run.id)}`;
    if (action === "delete") {
      await api(where, { method: "DELETE" });
      go("pipelines");
      return;
    }
    await api(where, { method: "PATCH", json: { action } });
    onDone();
  };
  const spec = asking && ACTIONS[asking];
  return html`<div class="actions" role="group" aria-label="Pipeline run actions">
    ${allowed.map(
      (action) => html`<button type="button" class=${action === "delete" ? "danger" : ""} onClick=${() => setAsking(action)}>
        ${ACTIONS[action].label}</button>`,
    )}
    ${spec &&
    html`<${ConfirmDialog} title=${spec.title} onConfirm=${() => act(asking)} onClose=${() => setAsking(null)}>
      <p><strong>${run.name} · ${run.id}</strong>: ${spec.text}</p>
    <//>`}
    ${run.state === "HALTED" && stopping && html`<span class="muted">stopping its steps…</span>`}
  </div>`;
}

/** An item of a fan-out, short: its value, or its index. */
const itemText = (task) => {
  if (task.item === null || task.item === undefined) return `#${task.index}`;
  const text = typeof task.item === "object" ? JSON.stringify(task.item) : String(task.item);
  return `#${task.index} (${text.length > 24 ? `${text.slice(0, 23)}…` : text})`;
};

/** What a task made, as a link: a job, an experiment, a deployment, a sub-run or a model version. */
function Made({ step, task }) {
  const ref = task.job_id;
  if (step.kind === "pipeline" && task.run_id) return html`<a href=${href("pipelines", task.run_id)}>run ${task.run_id}</a>`;
  if (step.kind === "experiment" && ref) return html`<a href=${href("experiments", ref)}>experiment ${ref}</a>`;
  if (step.kind === "deploy" && ref) return html`<a href=${href("deployments", ref)}>deployment ${ref}</a>`;
  if (step.kind === "select") {
    const model = task.outputs?.model;
    if (!model) return null;
    const [name, version] = String(model).split("@");
    return html`<a href=${href("models", name)}>model ${name}, version ${version}</a>`;
  }
  if (ref) return html`<a href=${href("jobs", ref)}>${ref}</a>`;
  return null;
}

function Links({ step }) {
  const tasks = step.tasks || [];
  const shown = tasks.map((task) => ({ task, link: html`<${Made} step=${step} task=${task} />` }))
    .filter(({ task }) => task.job_id || task.run_id || task.outputs?.model);
  if (shown.length === 0) return "—";
  if (!step.fan_out && shown.length === 1) return shown[0].link;
  return html`<ul class="plain">
    ${shown.map(({ task, link }) => html`<li key=${task.index}><span class="name">${itemText(task)}</span> ${link}
      ${task.state !== step.state && html` <${Badge} state=${task.state} />`}</li>`)}
  </ul>`;
}

/** A short text of a value: JSON, cut at 60 characters. */
const short = (value) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
};

/** An artifact a task output: its name, type, URI (or path in its job's results) and metadata. */
function Artifact({ name, artifact }) {
  const metadata = Object.keys(artifact.metadata || {}).length ? ` ${short(artifact.metadata)}` : "";
  return html`<li><span class="name">${name}</span> ${artifact.type && html`<span class="muted">${artifact.type}</span>`}
    <code>${artifact.uri || artifact.path}</code>${metadata}
    ${artifact.job_id && html` (<a href=${href("jobs", artifact.job_id)}>its job's results</a>)`}</li>`;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** A step's values and artifacts: a KFP task's `{parameters, artifacts}`, an Argo task's
 * `{result, parameters, exit_code}`, a Loom step's own `outputs.json`, or a sub-run's outputs. */
function made(step, task) {
  const outputs = task.outputs || {};
  const given = step.kind === "pipeline" ? outputs : outputs.values || {};
  const values = [];
  const artifacts = [];
  for (const [key, value] of Object.entries(given)) {
    if (key === "run_id") continue;
    if (key === "artifacts" && isObject(value)) {
      for (const [name, listed] of Object.entries(value)) {
        for (const artifact of Array.isArray(listed) ? listed : [listed]) artifacts.push([name, artifact]);
      }
    } else if (key === "parameters" && isObject(value)) {
      values.push(...Object.entries(value));
    } else if (isObject(value) && (value.uri || value.job_id)) {
      artifacts.push([key, value]);
    } else if (value !== null && value !== "") {
      values.push([key, value]);
    }
  }
  return { values, artifacts };
}

/** What a step output, when it ran once and succeeded (a fan-out's items: their jobs' pages). */
function Outputs({ step }) {
  const tasks = step.tasks || [];
  const done = tasks.length === 1 && ["SUCCEEDED", "CACHED"].includes(tasks[0].state);
  const { values, artifacts } = done ? made(step, tasks[0]) : { values: [], artifacts: [] };
  if (values.length === 0 && artifacts.length === 0) return "—";
  return html`<ul class="plain">
    ${values.map(([k, v]) => html`<li key=${`v-${k}`}><span class="name">${k}</span> = <code>${short(v)}</code></li>`)}
    ${artifacts.map(([name, artifact]) => html`<${Artifact} key=${`a-${name}`} name=${name} artifact=${artifact} />`)}
  </ul>`;
}

function Steps({ steps, now }) {
  return html`<section>
    <h2>Steps</h2>
    <${TableBox} label="Steps table">
      <table>
        <caption>Steps</caption>
        <thead><tr>
          <th scope="col">Step</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Started</th>
          <th scope="col">Duration</th><th scope="col">Cached</th><th scope="col">Jobs and results</th>
          <th scope="col">Outputs</th>
        </tr></thead>
        <tbody>
          ${steps.map((step) => {
            const items = step.fan_out ? progress(step.tasks || []) : null;
            const after = step.after.length ? `after ${step.after.join(", ")}` : "";
            return html`<tr key=${step.name}>
              <th scope="row">${step.name}</th>
              <td>${step.kind}${step.fan_out && html`<div class="reason">for each item</div>`}
                ${step.exit_handler && html`<div class="reason">exit handler: runs last</div>`}
                ${step.trigger === "all_done" && html`<div class="reason">runs however its needs ended</div>`}
                ${step.trigger === "none_failed" && html`<div class="reason">runs unless a need failed</div>`}
                ${after && html`<div class="reason">${after}</div>`}</td>
              <td><${Badge} state=${step.state || "WAITING"} />
                ${items && html`<div class="reason">${items.done} of ${items.total} items done${items.running ? `, ${items.running} running` : ""}</div>`}
                ${step.message && html`<div class="reason">${step.message}</div>`}</td>
              <td>${when(step.started_at)}</td>
              <td>${stepDuration(step, now) || "—"}</td>
              <td>${step.cached ? "cached" : "no"}</td>
              <td><${Links} step=${step} /></td>
              <td><${Outputs} step=${step} /></td>
            </tr>`;
          })}
        </tbody>
      </table>
    <//>
  </section>`;
}

function Summary({ run, now }) {
  const parameters = Object.keys(run.parameters || {}).length ? json(run.parameters) : "";
  return html`<dl class="facts">
    <div><dt>Pipeline</dt><dd>${run.name}</dd></div>
    <div><dt>Run id</dt><dd><code>${run.id}</code></dd></div>
    <div><dt>Owner</dt><dd>${run.owner}</dd></div>
    <div><dt>Created</dt><dd>${when(run.created_at)}</dd></div>
    <div><dt>Finished</dt><dd>${when(run.finished_at)}</dd></div>
    <div><dt>Duration</dt><dd>${runDuration(run, now)}</dd></div>
    <div><dt>Steps done</dt><dd>${stepsText(run)}</dd></div>
    <div><dt>Cached</dt><dd>${count(run.cached || 0)}</dd></div>
    ${run.schedule && html`<div><dt>Schedule</dt><dd>${run.schedule}</dd></div>`}
    ${run.parent_id && html`<div><dt>Part of</dt><dd><a href=${href("pipelines", run.parent_id)}>run ${run.parent_id}</a></dd></div>`}
    ${parameters && html`<div class="wide"><dt>Parameters</dt><dd><pre class="params">${parameters}</pre></dd></div>`}
    ${run.outputs && Object.keys(run.outputs).length > 0 &&
    html`<div class="wide"><dt>Outputs</dt><dd><pre class="params">${json(run.outputs)}</pre></dd></div>`}
  </dl>`;
}

export function PipelinePage({ id }) {
  const { data: run, error, reload } = useResource((signal) => api(`/v1/pipelines/runs/${path(id)}?spec=false`, { signal }), [id]);
  useTitle(run ? `${run.name} · ${run.id}` : `Pipeline run ${id}`);
  const active = Boolean(run && RUN_ACTIVE.has(run.state));
  const now = useNow(1000, active);
  useInterval(reload, active ? LIVE_MS : IDLE_MS, Boolean(run));

  if (!run) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">Pipeline run ${id}</h1>
      ${missing
        ? html`<p role="alert">There is no pipeline run ${id}, or it is not yours. <a href=${href("pipelines")}>All pipeline runs</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the pipeline run" />`}`;
  }
  return html`<div class="page-head">
      <h1 tabindex="-1">${run.name} · ${run.id}</h1>
      <${Actions} run=${run} onDone=${reload} />
    </div>
    <p class="job-state" role="status">
      <span class="sr-only">State: </span><${Badge} state=${run.state} />
      ${run.message && html` <span class="message">${run.message}</span>`}
    </p>
    <${ErrorNote} error=${error} />
    <${Summary} run=${run} now=${now} />
    <section>
      <h2>Graph</h2>
      <p class="hint">Each box is a step, in columns by what it waits for; its state is written in it. The Steps table below says the same.</p>
      <${PipelineGraph} steps=${run.steps} now=${now} />
    </section>
    <${Steps} steps=${run.steps} now=${now} />`;
}
