// #/runs/<id>: one run — its facts, params, tags and latest metrics, each metric's history as a
// chart, the runs it started, and its job when it is one or was started by one.
import { ApiError, api, path } from "../api.js";
import { Badge, ErrorNote, LazyChart, Loading, TableBox, orDash } from "../components.js";
import { metric, when } from "../format.js";
import { useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { runHref } from "./runs.js";

/** A two-column table of names and values (params, tags, metrics), or a line saying none. */
export function Pairs({ title, pairs, format = (v) => v }) {
  const entries = Object.entries(pairs || {}).sort(([a], [b]) => a.localeCompare(b));
  return html`<section>
    <h2>${title}</h2>
    ${entries.length === 0
      ? html`<p class="muted">None.</p>`
      : html`<${TableBox} label=${title}>
          <table>
            <thead><tr><th scope="col">Name</th><th scope="col">Value</th></tr></thead>
            <tbody>${entries.map(([k, v]) => html`<tr key=${k}><th scope="row">${k}</th><td>${format(v)}</td></tr>`)}</tbody>
          </table>
        <//>`}
  </section>`;
}

function History({ run, name }) {
  const { data, error } = useResource(
    (signal) => api(`/v1/runs/${path(run.id)}/metrics/${path(name)}`, { signal }),
    [run.id, name],
  );
  if (error) return html`<${ErrorNote} error=${error} />`;
  if (!data) return html`<div class="chart" role="img" aria-label=${`Chart of ${name}, loading`}></div>`;
  const lines = [{ name: run.name, job: 0, points: data.steps.map((s, i) => [s, data.values[i]]) }];
  return html`<${LazyChart} chart="MetricChart" lines=${lines}
    label=${`Chart of ${name} over ${data.steps.length} steps; the latest value is in the table of metrics.`} />`;
}

function Charts({ run }) {
  const names = Object.keys(run.metrics).sort();
  if (names.length === 0) return null;
  return html`<section>
    <h2>Metric history</h2>
    <div class="charts">
      ${names.map((name) => html`<figure key=${name} class="chart-card"><figcaption>${name}</figcaption><${History} run=${run} name=${name} /></figure>`)}
    </div>
  </section>`;
}

function Children({ runs }) {
  if (!runs?.length) return null;
  return html`<section>
    <h2>Runs it started</h2>
    <ul class="links">
      ${runs.map((child) => html`<li key=${child.id}><a href=${runHref(child)}>${child.name}</a> <${Badge} state=${child.status} /></li>`)}
    </ul>
    ${runs.length >= 2 && html`<p><a href=${href("compare", runs.slice(0, 10).map((r) => r.id).join(","))}>Compare them</a></p>`}
  </section>`;
}

export function RunPage({ id }) {
  const { data: run, error } = useResource((signal) => api(`/v1/runs/${path(id)}`, { signal }), [id]);
  useTitle(run ? run.name : `Run ${id}`);
  if (!run) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">Run ${id}</h1>
      ${missing
        ? html`<p role="alert">There is no run ${id}, or it is not yours. <a href=${href("runs")}>All runs</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the run" />`}`;
  }
  return html`<h1 tabindex="-1">${run.name}</h1>
    <p class="job-state" role="status"><span class="sr-only">State: </span><${Badge} state=${run.status} />
      ${run.stage === "deleted" && html` <span class="message">deleted</span>`}</p>
    <dl class="facts">
      <div><dt>Project</dt><dd>${orDash(run.project || run.project_id)}</dd></div>
      <div><dt>User</dt><dd>${orDash(run.user)}</dd></div>
      <div><dt>Started</dt><dd>${when(run.start_time)}</dd></div>
      <div><dt>Ended</dt><dd>${when(run.end_time)}</dd></div>
      <div><dt>Run id</dt><dd><code>${run.id}</code></dd></div>
      ${run.job_id && html`<div><dt>Job</dt><dd><a href=${href("jobs", run.job_id)}>${run.is_job ? "This run is a job" : run.job_id}</a></dd></div>`}
      ${run.parent_id && html`<div><dt>Started by</dt><dd><a href=${href("runs", run.parent_id)}>${run.parent_id}</a></dd></div>`}
    </dl>
    <div class="two-columns">
      <${Pairs} title="Params" pairs=${run.params} />
      <${Pairs} title="Latest metrics" pairs=${run.metrics} format=${(v) => (v === null ? "NaN" : metric(v))} />
    </div>
    <${Pairs} title="Tags" pairs=${run.tags} />
    <${Children} runs=${run.children} />
    <${Charts} run=${run} />`;
}
