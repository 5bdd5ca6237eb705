// #/experiments: the caller's hyperparameter searches, newest first; live while one runs.
import { api } from "../api.js";
import { Badge, ErrorNote, Loading, TableBox } from "../components.js";
import { count, metric, when } from "../format.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { EXPERIMENT_ACTIVE } from "../states.js";
import { ended, objectiveText } from "../trials.js";

export const LIVE_MS = 2500;
const IDLE_MS = 15_000;

/** "5 of 8", and how many run now. */
export function trialsText(e) {
  const done = ended(e);
  const running = e.trials - done;
  const max = e.max_trial_count ? ` of ${count(e.max_trial_count)}` : "";
  return `${count(done)}${max}${running > 0 ? ` (${count(running)} running)` : ""}`;
}

export function ExperimentsPage() {
  useTitle("Experiments");
  const { data, error, loading, reload } = useResource((signal) => api("/v1/experiments", { signal }), []);
  const active = Boolean(data?.experiments.some((e) => EXPERIMENT_ACTIVE.has(e.state)));
  useInterval(reload, active ? LIVE_MS : IDLE_MS);
  return html`<h1 tabindex="-1">Experiments</h1>
    <p class="lead">Hyperparameter searches: each trial is a job with one point of the search space.
      Create one with <code>loom experiments create experiment.yml code/</code>.</p>
    <${ErrorNote} error=${error} />
    ${loading && html`<${Loading} what="Loading experiments" />`}
    ${data && data.experiments.length === 0 && html`<p>No experiments yet.</p>`}
    ${data && data.experiments.length > 0 &&
    html`<${TableBox} label="Experiments table">
      <table>
        <caption>Your experiments, newest first</caption>
        <thead><tr>
          <th scope="col">Name</th><th scope="col">State</th><th scope="col">Algorithm</th>
          <th scope="col">Objective</th><th scope="col">Trials done</th>
          <th scope="col" class="num">Best value</th><th scope="col">Created</th>
        </tr></thead>
        <tbody>
          ${data.experiments.map(
            (e) => html`<tr key=${e.id}>
              <th scope="row"><a href=${href("experiments", e.name)}>${e.name}</a></th>
              <td><${Badge} state=${e.state} />${e.reason && html`<div class="reason">${e.reason}</div>`}</td>
              <td>${e.algorithm || "—"}</td>
              <td>${objectiveText(e.objective, metric)}</td>
              <td>${trialsText(e)}</td>
              <td class="num">${e.best_trial ? html`${metric(e.best_trial.objective)}
                <div class="reason">trial ${e.best_trial.number}</div>` : "—"}</td>
              <td>${when(e.created_at)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>`}`;
}
