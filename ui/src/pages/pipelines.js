// #/pipelines: the caller's pipeline runs, newest first, and their schedules; live while a run
// is under way.
import { api } from "../api.js";
import { Badge, ErrorNote, Loading, TableBox } from "../components.js";
import { count, duration, when } from "../format.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { RUN_ACTIVE, STEP_ENDED } from "../states.js";

export const LIVE_MS = 2000;
const IDLE_MS = 15_000;

const toMs = (at) => (at ? Date.parse(at) : NaN);

/** How long a run has taken: from its creation to its end, or to now while it goes on. */
export function runDuration(run, now = Date.now()) {
  if (run.duration_s !== null && run.duration_s !== undefined) return duration(run.duration_s);
  const start = toMs(run.created_at);
  return Number.isNaN(start) || !RUN_ACTIVE.has(run.state) ? "—" : duration((now - start) / 1000);
}

/** "3 of 5" ended, with the failed, halted and running ones said. */
export function stepsText(run) {
  const by = run.steps_by_state || {};
  const done = Object.entries(by)
    .filter(([state]) => STEP_ENDED.has(state))
    .reduce((sum, [, n]) => sum + n, 0);
  const notes = [
    by.FAILED && `${count(by.FAILED)} failed`,
    by.HALTED && `${count(by.HALTED)} halted`,
    by.RUNNING && `${count(by.RUNNING)} running`,
  ].filter(Boolean);
  return `${count(done)} of ${count(run.steps_total)}${notes.length ? ` (${notes.join(", ")})` : ""}`;
}

function Runs({ runs, now }) {
  if (runs.length === 0) {
    return html`<p>No pipeline runs yet. Start one with <code>loom pipelines run pipeline.yml code/</code>.</p>`;
  }
  return html`<${TableBox} label="Pipeline runs table">
    <table>
      <caption>Your pipeline runs, newest first</caption>
      <thead><tr>
        <th scope="col">Run</th><th scope="col">Pipeline</th><th scope="col">State</th>
        <th scope="col">Started</th><th scope="col">Duration</th><th scope="col">Steps done</th>
        <th scope="col" class="num">Cached</th><th scope="col">Schedule</th>
      </tr></thead>
      <tbody>
        ${runs.map(
          (run) => html`<tr key=${run.id}>
            <th scope="row"><a href=${href("pipelines", run.id)}>${run.id}</a></th>
            <td>${run.name}</td>
            <td><${Badge} state=${run.state} />${run.message && html`<div class="reason">${run.message}</div>`}</td>
            <td>${when(run.started_at || run.created_at)}</td>
            <td>${runDuration(run, now)}</td>
            <td>${stepsText(run)}</td>
            <td class="num">${count(run.cached || 0)}</td>
            <td>${run.schedule || "—"}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  <//>`;
}

function Schedules() {
  const { data, error, reload } = useResource((signal) => api("/v1/pipelines/schedules", { signal }), []);
  useInterval(reload, 30_000);
  return html`<section>
    <h2>Schedules</h2>
    <${ErrorNote} error=${error} />
    ${data && data.schedules.length === 0 &&
    html`<p class="muted">No schedules. <code>loom pipelines schedule pipeline.yml code/ --name NAME --cron "0 3 * * *"</code> starts a run at each time.</p>`}
    ${data && data.schedules.length > 0 &&
    html`<${TableBox} label="Schedules table">
      <table>
        <caption>Schedules</caption>
        <thead><tr>
          <th scope="col">Name</th><th scope="col">Pipeline</th><th scope="col">Cron (UTC)</th>
          <th scope="col">Enabled</th><th scope="col">Next run</th><th scope="col">Last run</th>
          <th scope="col" class="num">Runs</th>
        </tr></thead>
        <tbody>
          ${data.schedules.map(
            (s) => html`<tr key=${s.id}>
              <th scope="row">${s.name}</th>
              <td>${s.pipeline}</td>
              <td><code>${s.cron}</code></td>
              <td>${s.enabled ? "yes" : "no (paused)"}</td>
              <td>${when(s.next_run_at)}</td>
              <td>${s.last_run_id
                ? html`<a href=${href("pipelines", s.last_run_id)}>${s.last_run_id}</a><div class="reason">${when(s.last_run_at)}</div>`
                : "—"}</td>
              <td class="num">${count(s.runs)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>`}
  </section>`;
}

export function PipelinesPage() {
  useTitle("Pipelines");
  const { data, error, loading, reload } = useResource((signal) => api("/v1/pipelines/runs", { signal }), []);
  const active = Boolean(data?.runs.some((run) => RUN_ACTIVE.has(run.state)));
  useInterval(reload, active ? LIVE_MS : IDLE_MS);
  const now = Date.now();
  return html`<h1 tabindex="-1">Pipelines</h1>
    <p class="lead">Runs of pipelines: DAGs of jobs, experiments, model selections and deployments.</p>
    <${ErrorNote} error=${error} />
    <section>
      <h2>Runs</h2>
      ${loading && html`<${Loading} what="Loading pipeline runs" />`}
      ${data && html`<${Runs} runs=${data.runs} now=${now} />`}
    </section>
    <${Schedules} />`;
}
