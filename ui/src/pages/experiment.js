// #/experiments/<name>: a hyperparameter search: its state, best trial, the objective over
// trials, the trials' parameters as parallel axes, the trials table, and halt/resume/delete.
// Live: read again every 2.5 s while it runs, and at once when one of its trials' jobs moves.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, api, path } from "../api.js";
import { Badge, ConfirmDialog, ErrorNote, Field, LazyChart, Loading, TableBox, orDash } from "../components.js";
import { count, duration, metric, when } from "../format.js";
import { useDebouncedCall, useInterval, useNow, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { openStream } from "../sse.js";
import { EXPERIMENT_ACTIVE, EXPERIMENT_ENDED, TRIAL_ACTIVE } from "../states.js";
import { ended, goalType, objectiveSeries, objectiveText, paramText, parallelData, trialNote } from "../trials.js";
import { LIVE_MS } from "./experiments.js";

const IDLE_MS = 15_000;

const ACTIONS = {
  halt: {
    label: "Halt",
    title: "Halt this experiment?",
    text: "No new trial starts, and its running trials' jobs are halted. Resume goes on where it was.",
  },
  resume: {
    label: "Resume",
    title: "Resume this experiment?",
    text: "Its halted trials resume from their checkpoints and the search goes on proposing trials.",
  },
  resumeEnded: {
    label: "Resume",
    title: "Resume this experiment?",
    text: "It has ended; the search goes on proposing trials up to the new budget.",
  },
  delete: {
    label: "Delete",
    title: "Delete this experiment?",
    text: "Its trials and their jobs are removed (stopped first if they run); the models they registered stay. This cannot be undone.",
  },
};

const specOf = (experiment) => experiment.spec?.spec || experiment.spec || {};

/** Whether an ended experiment may resume: Katib's resumePolicy LongRunning (or FromVolume). */
const resumable = (experiment) =>
  experiment.state === "HALTED" ||
  (EXPERIMENT_ENDED.has(experiment.state) && ["LongRunning", "FromVolume"].includes(specOf(experiment).resumePolicy));

/** A trial's parameters, one a line; `exact` shows them as the trial got them, else short. */
function Parameters({ values, exact = false }) {
  const entries = Object.entries(values || {});
  if (entries.length === 0) return "—";
  return html`<ul class="plain">${entries.map(
    ([name, value]) => html`<li><span class="name">${name}</span> ${exact ? value : paramText(value, metric)}</li>`,
  )}</ul>`;
}

function Actions({ experiment, onDone }) {
  const [asking, setAsking] = useState(null);
  const [budget, setBudget] = useState("");
  const [budgetError, setBudgetError] = useState("");
  const active = EXPERIMENT_ACTIVE.has(experiment.state);
  const allowed = [active && "halt", resumable(experiment) && "resume", "delete"].filter(Boolean);
  const endedNow = EXPERIMENT_ENDED.has(experiment.state);
  const act = async (action) => {
    const where = `/v1/experiments/${path(experiment.name)}`;
    if (action === "delete") {
      await api(where, { method: "DELETE" });
      go("experiments");
      return;
    }
    const json = { action };
    if (action === "resume" && budget.trim()) {
      const n = Number(budget);
      if (!Number.isInteger(n) || n < 1) {
        setBudgetError("A whole number, 1 or more");
        throw new Error("The new trial budget is not a whole number");
      }
      json.max_trial_count = n;
    }
    setBudgetError("");
    await api(where, { method: "PATCH", json });
    onDone();
  };
  const open = (action) => {
    setBudget(action === "resume" && endedNow ? String((experiment.max_trial_count || experiment.trials) + 4) : "");
    setBudgetError("");
    setAsking(action);
  };
  const spec = asking && ACTIONS[asking === "resume" && endedNow ? "resumeEnded" : asking];
  return html`<div class="actions" role="group" aria-label="Experiment actions">
    ${allowed.map(
      (action) => html`<button type="button" class=${action === "delete" ? "danger" : ""} onClick=${() => open(action)}>
        ${ACTIONS[action].label}</button>`,
    )}
    ${spec &&
    html`<${ConfirmDialog} title=${spec.title} onConfirm=${() => act(asking)} onClose=${() => setAsking(null)}>
      <p><strong>${experiment.name}</strong>: ${spec.text}</p>
      ${asking === "resume" && endedNow &&
      html`<${Field} id="resume-budget" label="New trial budget" error=${budgetError}
        hint=${`It ended (${experiment.reason || experiment.state}) after ${count(experiment.trials)} trials; a larger budget lets it propose more.`}>
        ${(attrs) => html`<input ...${attrs} type="number" min="1" step="1" inputmode="numeric" value=${budget}
          onInput=${(e) => setBudget(e.currentTarget.value)} />`}
      <//>`}
    <//>`}
  </div>`;
}

/** The model version the best trial's job registered: the experiment's `best_model` once it
 * ended, else looked up in the registry under the trial spec's model name. */
function BestModel({ experiment, jobId }) {
  const trialSpec = specOf(experiment).trialTemplate?.trialSpec || {};
  const name = trialSpec.model_name || trialSpec.name;
  const known = experiment.best_model;
  const { data } = useResource(
    async (signal) => {
      if (known || !name || !jobId) return null;
      try {
        const model = await api(`/v1/models/${path(name)}`, { signal });
        const version = model.version_list.find((v) => v.provenance?.job_id === jobId);
        return version ? `${name}@${version.version}` : null;
      } catch (caught) {
        if (caught instanceof ApiError && caught.status === 404) return null;
        throw caught;
      }
    },
    [known, name, jobId],
  );
  const found = known || data;
  if (!found) return html`<span class="muted">none registered</span>`;
  const [model, version] = found.split("@");
  return html`<a href=${href("models", model)}>Model ${model}, version ${version}</a>`;
}

function BestTrial({ experiment, trials }) {
  const best = experiment.best_trial;
  const trial = best && trials.find((t) => t.number === best.number);
  const metricName = specOf(experiment).objective?.objectiveMetricName || "objective";
  return html`<section>
    <h2>Best trial</h2>
    ${!best
      ? html`<p class="muted">No trial has succeeded with an objective yet.</p>`
      : html`<dl class="facts">
          <div><dt>Trial</dt><dd>${best.number}</dd></div>
          <div><dt>${metricName} (objective)</dt><dd>${metric(best.objective)}</dd></div>
          <div><dt>Job</dt><dd>${trial?.job_id ? html`<a href=${href("jobs", trial.job_id)}>${trial.job_id}</a>` : "—"}</dd></div>
          <div><dt>Model version</dt><dd><${BestModel} experiment=${experiment} jobId=${trial?.job_id} /></dd></div>
          <div class="wide"><dt>Parameters</dt><dd><${Parameters} values=${best.parameters} exact /></dd></div>
        </dl>`}
  </section>`;
}

function Charts({ experiment, trials }) {
  const spec = specOf(experiment);
  const type = goalType(spec.objective);
  const metricName = spec.objective?.objectiveMetricName || "objective";
  // Redrawn only when a trial changed (the page reads the experiment every few seconds).
  const key = JSON.stringify(trials);
  const series = useMemo(() => objectiveSeries(trials, type), [key, type]);
  const data = useMemo(() => parallelData(trials, spec.parameters || [], metricName), [key, JSON.stringify(spec.parameters)]);
  const names = data.axes.slice(0, -1).map((a) => a.name);
  const scored = series.succeeded.length + series.others.length;
  return html`<section>
    <h2>Charts</h2>
    ${trials.length === 0
      ? html`<p class="muted">No trials yet. The charts appear as trials report ${metricName}.</p>`
      : html`<div class="charts">
          <figure class="chart-card">
            <figcaption>Objective over trials</figcaption>
            <${LazyChart} chart="ObjectiveChart" series=${series} metricName=${metricName}
              label=${`Objective over trials: ${metricName} of ${scored} of ${trials.length} trials by trial number, and the best so far (${type}). The values are in the Trials table below.`} />
          </figure>
          <figure class="chart-card">
            <figcaption>Parameters of the trials</figcaption>
            <${LazyChart} chart="ParametersChart" data=${data} best=${experiment.best_trial?.number}
              label=${`Parameters of the trials: ${[...names, metricName].join(", ")}, one line per trial, the objective ${metricName} on the last axis and the best trial drawn thick and dashed. The values are in the Trials table below.`} />
          </figure>
        </div>`}
  </section>`;
}

function Trials({ experiment, trials, now }) {
  const best = experiment.best_trial?.number;
  const metricName = specOf(experiment).objective?.objectiveMetricName || "objective";
  const sorted = [...trials].sort((a, b) => b.number - a.number);
  return html`<section>
    <h2>Trials</h2>
    ${trials.length === 0
      ? html`<p class="muted">No trial has been proposed yet.</p>`
      : html`<${TableBox} label="Trials table">
          <table>
            <caption>Trials</caption>
            <thead><tr>
              <th scope="col" class="num">Trial</th><th scope="col">State</th><th scope="col">Parameters</th>
              <th scope="col" class="num">${metricName} (objective)</th><th scope="col">Other metrics</th>
              <th scope="col">Duration</th><th scope="col">Job</th>
            </tr></thead>
            <tbody>
              ${sorted.map((t) => {
                const note = trialNote(t);
                const others = Object.entries(t.metrics || {}).filter(([name]) => name !== metricName);
                const running = TRIAL_ACTIVE.has(t.state) && t.started_at;
                return html`<tr key=${t.number}>
                  <th scope="row" class="num">${t.number}${t.number === best && html`<div class="reason">best</div>`}</th>
                  <td><${Badge} state=${t.state} />${note && html`<div class="reason">${note}</div>`}</td>
                  <td><${Parameters} values=${t.parameters} /></td>
                  <td class="num">${metric(t.objective)}${t.reports > 0 && html`<div class="reason">${count(t.reports)} ${t.reports === 1 ? "report" : "reports"}</div>`}</td>
                  <td>${others.length
                    ? html`<ul class="plain">${others.map(([name, value]) => html`<li><span class="name">${name}</span> ${metric(value)}</li>`)}</ul>`
                    : "—"}</td>
                  <td>${running ? duration((now - Date.parse(t.started_at)) / 1000) : duration(t.duration_s)}</td>
                  <td>${t.job_id ? html`<a href=${href("jobs", t.job_id)}>${t.job_id}</a>` : "—"}</td>
                </tr>`;
              })}
            </tbody>
          </table>
        <//>`}
  </section>`;
}

function Summary({ experiment }) {
  const spec = specOf(experiment);
  const done = ended(experiment);
  return html`<dl class="facts">
    <div><dt>Objective</dt><dd>${objectiveText(spec.objective || experiment.objective, metric)}</dd></div>
    <div><dt>Algorithm</dt><dd>${orDash(experiment.algorithm)}</dd></div>
    <div><dt>Early stopping</dt><dd>${orDash(spec.earlyStopping?.algorithmName)}</dd></div>
    <div><dt>Trials done</dt><dd>${count(done)}${experiment.max_trial_count ? ` of ${count(experiment.max_trial_count)}` : ""}</dd></div>
    <div><dt>Running now</dt><dd>${count(experiment.trials - done)}${spec.parallelTrialCount ? ` (at most ${spec.parallelTrialCount})` : ""}</dd></div>
    <div><dt>Created</dt><dd>${when(experiment.created_at)}</dd></div>
    <div><dt>Finished</dt><dd>${when(experiment.finished_at)}</dd></div>
    <div><dt>Experiment id</dt><dd><code>${experiment.id}</code></dd></div>
  </dl>`;
}

export function ExperimentPage({ name }) {
  const { data, error, reload } = useResource((signal) => api(`/v1/experiments/${path(name)}`, { signal }), [name]);
  useTitle(`Experiment ${name}`);
  const active = Boolean(
    data && (EXPERIMENT_ACTIVE.has(data.state) || data.trial_list.some((t) => TRIAL_ACTIVE.has(t.state))),
  );
  const now = useNow(1000, active);
  useInterval(reload, active ? LIVE_MS : IDLE_MS, Boolean(data));

  // A move of one of its trials' jobs (or, while it runs, of any job: a new trial) reads it again.
  const jobs = useRef(new Set());
  const live = useRef(false);
  jobs.current = new Set((data?.trial_list || []).map((t) => t.job_id));
  live.current = active;
  const refresh = useDebouncedCall(reload, 300);
  useEffect(() => {
    const stream = openStream("/v1/events", {
      onEvent: (type, raw) => {
        if (type !== "job") return;
        let event = {};
        try {
          event = JSON.parse(raw);
        } catch {
          return;
        }
        if (live.current || jobs.current.has(event.job_id)) refresh();
      },
    });
    return () => stream.close();
  }, [name]);

  if (!data) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">${name}</h1>
      ${missing
        ? html`<p role="alert">There is no experiment ${name}, or it is not yours. <a href=${href("experiments")}>All experiments</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the experiment" />`}`;
  }
  const trials = data.trial_list;
  return html`<div class="page-head">
      <h1 tabindex="-1">${data.name}</h1>
      <${Actions} experiment=${data} onDone=${reload} />
    </div>
    <p class="job-state" role="status">
      <span class="sr-only">State: </span><${Badge} state=${data.state} />
      ${data.reason && html` <span class="code">${data.reason}</span>`}
      ${data.message && html` <span class="message">${data.message}</span>`}
    </p>
    <${ErrorNote} error=${error} />
    <${Summary} experiment=${data} />
    <${BestTrial} experiment=${data} trials=${trials} />
    <${Charts} experiment=${data} trials=${trials} />
    <${Trials} experiment=${data} trials=${trials} now=${now} />`;
}
