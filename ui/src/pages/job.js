// #/jobs/<id>: a job's state, timeline, learners, live logs and metrics, results, and the
// actions its state allows (halt, resume, delete), each confirmed first.
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, path } from "../api.js";
import { Badge, ConfirmDialog, DownloadLink, ErrorNote, Lineage, Loading, TableBox, orDash } from "../components.js";
import { bytes, plural, ran, when } from "../format.js";
import { useDebouncedCall, useInterval, useNow, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { HALTABLE, isLive } from "../states.js";
import { Logs } from "./job-logs.js";
import { Metrics } from "./job-metrics.js";
import { jobTitle } from "../runs.js";
import { Pairs } from "./run.js";

const ACTIONS = {
  halt: {
    label: "Halt",
    title: "Halt this job?",
    text: "Its learners are stopped; a checkpoint they wrote is kept, and Resume starts them again from it.",
  },
  resume: { label: "Resume", title: "Resume this job?", text: "It is queued again and restarts from its checkpoints." },
  delete: {
    label: "Delete",
    title: "Delete this job?",
    text: "It is stopped if it runs, and its logs, metrics, code and results are removed. This cannot be undone.",
  },
};

function Summary({ job, now }) {
  const framework = job.manifest?.framework || {};
  const r = job.resources || {};
  return html`<dl class="facts">
    <div><dt>Owner</dt><dd>${job.owner}</dd></div>
    <div><dt>Framework</dt><dd>${orDash([framework.name, framework.version].filter(Boolean).join(" "))}</dd></div>
    <div><dt>Learners</dt><dd>${job.learners}</dd></div>
    <div><dt>Each learner</dt><dd>${plural(r.cpus, "CPU")}, ${plural(r.gpus, "GPU")}, ${bytes(r.memory)}</dd></div>
    <div><dt>Submitted</dt><dd>${when(job.submitted_at)}</dd></div>
    <div><dt>Started</dt><dd>${when(job.started_at)}</dd></div>
    <div><dt>Finished</dt><dd>${when(job.finished_at)}</dd></div>
    <div><dt>Duration</dt><dd>${ran(job, now)}</dd></div>
    <div><dt>Attempt</dt><dd>${job.attempt}</dd></div>
    <div><dt>Job id</dt><dd><code>${job.id}</code></dd></div>
    ${job.lineage?.kind && html`<div class="wide"><dt>Made by</dt><dd><${Lineage} lineage=${job.lineage} /></dd></div>`}
    ${framework.command && html`<div class="wide"><dt>Command</dt><dd><code>${framework.command}</code></dd></div>`}
  </dl>`;
}

function Timeline({ history }) {
  return html`<section>
    <h2>Timeline</h2>
    <ol class="timeline">
      ${history.map(
        (event) => html`<li>
          <time datetime=${event.at}>${when(event.at)}</time>
          <${Badge} state=${event.state} />
          ${event.message && html`<span class="message">${event.message}</span>`}
        </li>`,
      )}
    </ol>
  </section>`;
}

/** One row per learner: its latest attempt, and how many attempts it has had. */
function Learners({ status }) {
  const byLearner = new Map();
  for (const row of status) {
    const seen = byLearner.get(row.learner);
    const attempts = (seen?.attempts || 0) + 1;
    const latest = !seen || row.attempt >= seen.row.attempt ? row : seen.row;
    byLearner.set(row.learner, { row: latest, attempts });
  }
  const rows = [...byLearner.values()].sort((a, b) => a.row.learner - b.row.learner);
  return html`<section>
    <h2>Learners</h2>
    ${rows.length === 0
      ? html`<p class="muted">No learner has started yet.</p>`
      : html`<${TableBox} label="Attempts table">
          <table>
            <caption class="sr-only">Each learner's latest attempt</caption>
            <thead><tr>
              <th scope="col">Learner</th><th scope="col">State</th><th scope="col" class="num">Attempts</th>
              <th scope="col" class="num">Exit code</th><th scope="col">Message</th>
            </tr></thead>
            <tbody>
              ${rows.map(
                ({ row, attempts }) => html`<tr key=${row.learner}>
                  <th scope="row">${row.learner}</th>
                  <td><${Badge} state=${row.state} /></td>
                  <td class="num">${attempts}</td>
                  <td class="num">${orDash(row.exit_code)}</td>
                  <td>${[row.error_code, row.message].filter(Boolean).join(": ") || "—"}</td>
                </tr>`,
              )}
            </tbody>
          </table>
        <//>`}
  </section>`;
}

/** The model version this job registered, found in the registry under the job's model name. */
function RegisteredModel({ job }) {
  const name = job.manifest?.model_name || job.name;
  const { data, error, loading } = useResource(async (signal) => {
    try {
      const model = await api(`/v1/models/${path(name)}`, { signal });
      return model.version_list.find((v) => v.provenance?.job_id === job.id) || null;
    } catch (caught) {
      if (caught instanceof ApiError && caught.status === 404) return null;
      throw caught;
    }
  }, [name, job.id, job.state]);
  if (loading) return null;
  if (error) return html`<li class="muted">The model registry did not answer: ${error.message}</li>`;
  if (!data) return html`<li class="muted">No model registered (the job wrote nothing to <code>$RESULT_DIR/model/</code>).</li>`;
  return html`<li><a href=${href("models", name)}>Model ${name}, version ${data.version}</a></li>`;
}

/** What the job's code logged: its own params and tags, and the runs it started with MLflow's
 * client (each with its params and last metrics), which open in the run pages. */
function Tracked({ job }) {
  const runs = job.runs || [];
  return html`<div class="two-columns">
      <${Pairs} title="Params" pairs=${job.params} />
      <${Pairs} title="Tags" pairs=${job.tags} />
    </div>
    ${runs.length > 0 &&
    html`<section>
      <h2>Runs it started</h2>
      <${TableBox} label="Runs the job started">
        <table>
          <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Params</th><th scope="col">Last metrics</th></tr></thead>
          <tbody>
            ${runs.map(
              (run) => html`<tr key=${run.id}>
                <th scope="row"><a href=${href("runs", run.id)}>${run.name}</a></th>
                <td><${Badge} state=${run.status} /></td>
                <td>${Object.entries(run.params).map(([k, v]) => `${k}=${v}`).join(", ") || "—"}</td>
                <td>${Object.entries(run.metrics).map(([k, v]) => `${k}=${v === null ? "NaN" : v}`).join(", ") || "—"}</td>
              </tr>`,
            )}
          </tbody>
        </table>
      <//>
      ${runs.length >= 2 && html`<p><a href=${href("compare", runs.slice(0, 10).map((r) => r.id).join(","))}>Compare these runs</a></p>`}
    </section>`}`;
}

function Results({ job }) {
  const id = path(job.id);
  return html`<section>
    <h2>Results</h2>
    <ul class="links">
      <li><${DownloadLink} href=${`/v1/jobs/${id}/results`} filename=${`${job.id}-results.zip`}>Download results<//></li>
      <li><${DownloadLink} href=${`/v1/jobs/${id}/definition`} filename=${`${job.id}-model.zip`}>Download code<//></li>
      ${job.state === "COMPLETED" && html`<${RegisteredModel} job=${job} />`}
    </ul>
  </section>`;
}

function Actions({ job, onDone }) {
  const [asking, setAsking] = useState(null);
  const allowed = [HALTABLE.has(job.state) && "halt", job.state === "HALTED" && "resume", "delete"].filter(Boolean);
  const act = async (action) => {
    if (action === "delete") {
      await api(`/v1/jobs/${path(job.id)}`, { method: "DELETE" });
      go("jobs");
      return;
    }
    await api(`/v1/jobs/${path(job.id)}`, { method: "PATCH", json: { action } });
    onDone();
  };
  const spec = asking && ACTIONS[asking];
  return html`<div class="actions" role="group" aria-label="Job actions">
    ${allowed.map(
      (action) => html`<button type="button" class=${action === "delete" ? "danger" : ""}
        onClick=${() => setAsking(action)} disabled=${action === "halt" && job.halt_requested}>
        ${ACTIONS[action].label}</button>`,
    )}
    ${spec &&
    html`<${ConfirmDialog} title=${spec.title} onConfirm=${() => act(asking)} onClose=${() => setAsking(null)}>
      <p><strong>${job.name}</strong>: ${spec.text}</p>
    <//>`}
  </div>`;
}

export function JobPage({ id, user }) {
  const { data: job, error, reload } = useResource((signal) => api(`/v1/jobs/${path(id)}`, { signal }), [id]);
  // The state the streams told last; a fresh read of the job replaces it.
  const [live, setLive] = useState(null);
  // The streams end with the job; a resumed job (here or elsewhere) starts them again.
  const [ended, setEnded] = useState(false);
  const [generation, setGeneration] = useState(0);
  useTitle(job ? jobTitle(job) : `Job ${id}`);
  const state = live?.state || job?.state;
  const now = useNow(1000, isLive(state));
  const refresh = useDebouncedCall(reload, 300);
  useInterval(reload, isLive(state) ? 5000 : 15_000, Boolean(job));
  useEffect(() => {
    setLive(null);
    if (job && ended && isLive(job.state)) {
      setEnded(false);
      setGeneration((g) => g + 1);
    }
  }, [job]);

  if (!job) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">Job ${id}</h1>
      ${missing
        ? html`<p role="alert">There is no job ${id}, or it is not yours. <a href=${href("jobs")}>All jobs</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the job" />`}`;
  }

  const onState = (state, message, last) => {
    setLive({ state, message });
    if (last) setEnded(true);
    refresh();
  };
  const message = live ? live.message : job.queue_reason || job.status_message;
  const title = jobTitle(job);
  return html`<div class="page-head">
      <h1 tabindex="-1">${title}${title !== job.name && html` <span class="muted subtitle">(job ${job.name})</span>`}</h1>
      <${Actions} job=${job} onDone=${reload} />
    </div>
    <p class="job-state" role="status">
      <span class="sr-only">State: </span><${Badge} state=${state} />
      ${job.error_code && state === "FAILED" && html` <span class="code">${job.error_code}</span>`}
      ${message && html` <span class="message">${message}</span>`}
    </p>
    <${ErrorNote} error=${error} />
    <${Summary} job=${job} now=${now} />
    <${Tracked} job=${job} />
    <div class="two-columns">
      <${Timeline} history=${job.history} />
      <${Learners} status=${job.learner_status} />
    </div>
    <${Logs} job=${job} onState=${onState} generation=${generation} />
    <${Metrics} job=${job} admin=${Boolean(user.admin)} generation=${generation} />
    <${Results} job=${job} />`;
}
