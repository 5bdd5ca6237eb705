// #/jobs: a page of jobs, newest first, filtered by state, name and (admins) owner; live.
import { useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, Loading, TableBox, orDash } from "../components.js";
import { bytes, count, ran, total, when } from "../format.js";
import { useDebounced, useJobEvents, useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { jobTitle } from "../runs.js";
import { STATES, isLive } from "../states.js";

const PAGE_SIZE = 25;
const POLL_MS = 10_000;

function Capacity() {
  const { data, reload } = useResource((signal) => api("/v1/capacity", { signal }), []);
  useInterval(reload, POLL_MS);
  if (!data) return null;
  const { capacity: has, in_use: used } = data;
  return html`<p class="capacity">
    <span>CPUs in use: ${count(used.cpus)} of ${count(has.cpus)}</span>
    <span>GPUs in use: ${count(used.gpus)} of ${count(has.gpus)}</span>
    <span>Memory in use: ${bytes(used.memory)} of ${bytes(has.memory)}</span>
    <span>Jobs queued: ${count(data.queued_jobs)}</span>
  </p>`;
}

function Filters({ admin, state, setState, name, setName, owner, setOwner }) {
  return html`<form class="filters" role="search" aria-label="Filter jobs" onSubmit=${(e) => e.preventDefault()}>
    <div class="field">
      <label for="filter-state">State</label>
      <select id="filter-state" value=${state} onChange=${(e) => setState(e.currentTarget.value)}>
        <option value="">All</option>
        ${STATES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
    </div>
    <div class="field">
      <label for="filter-name">Name</label>
      <input id="filter-name" type="search" value=${name} onInput=${(e) => setName(e.currentTarget.value)} />
    </div>
    ${admin &&
    html`<div class="field">
      <label for="filter-owner">Owner</label>
      <input id="filter-owner" type="search" autocomplete="off" value=${owner}
        onInput=${(e) => setOwner(e.currentTarget.value)} />
    </div>`}
  </form>`;
}

function JobRow({ job, admin, now }) {
  return html`<tr>
    <th scope="row"><a href=${href("jobs", job.id)}>${jobTitle(job)}</a></th>
    <td>
      <${Badge} state=${job.state} />
      ${job.queue_reason && html`<div class="reason">${job.queue_reason}</div>`}
      ${!job.queue_reason && job.state === "FAILED" && job.error_code &&
      html`<div class="reason">${job.error_code}</div>`}
    </td>
    ${admin && html`<td>${orDash(job.owner)}</td>`}
    <td>${orDash(job.framework)}</td>
    <td class="num">${job.learners}</td>
    <td>${when(job.submitted_at)}</td>
    <td>${when(job.started_at)}</td>
    <td>${ran(job, now)}</td>
  </tr>`;
}

export function JobsPage({ user }) {
  useTitle("Jobs");
  const admin = Boolean(user.admin);
  const [state, setState] = useState("");
  const [name, setName] = useState("");
  const [owner, setOwner] = useState("");
  const filters = { state, name: useDebounced(name.trim(), 300), owner: useDebounced(owner.trim(), 400) };
  const key = JSON.stringify(filters);
  // Keyset paging: a stack of the cursors that led to each page, reset by a new filter.
  const [stack, setStack] = useState({ key, cursors: [null] });
  const cursors = stack.key === key ? stack.cursors : [null];
  const cursor = cursors[cursors.length - 1];

  const { data, error, loading, reload } = useResource(
    (signal) => {
      const everyone = admin && !filters.owner;
      const params = { limit: PAGE_SIZE, cursor, ...filters, all: everyone ? "true" : "" };
      return api(`/v1/jobs${query(params)}`, { signal });
    },
    [key, cursor],
  );

  // Live: a state change of any job refreshes the page shown (once per burst).
  useJobEvents(reload, admin);
  const active = Boolean(data?.jobs.some((job) => isLive(job.state)));
  useInterval(reload, POLL_MS, active);

  const page = cursors.length;
  const next = () => setStack({ key, cursors: [...cursors, data.next_cursor] });
  const previous = () => setStack({ key, cursors: cursors.slice(0, -1) });
  const now = Date.now();

  return html`<h1 tabindex="-1">Jobs</h1>
    <${Capacity} />
    <${Filters} ...${{ admin, state, setState, name, setName, owner, setOwner }} />
    <${ErrorNote} error=${error} />
    ${loading && !data && html`<${Loading} what="Loading jobs" />`}
    ${data &&
    html`<p class="total" aria-live="polite">
        ${data.total === 0 ? "No jobs match." : html`Page ${page} · ${total(data)} ${data.total === 1 ? "job" : "jobs"}`}
        ${data.total === 0 && !filters.state && !filters.name && html` <a href=${href("submit")}>Start one</a>.`}
      </p>
      <${TableBox} label="Jobs table">
        <table>
          <caption>${admin && !filters.owner ? "Everyone's jobs" : "Jobs"}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">State</th>
              ${admin && html`<th scope="col">Owner</th>`}
              <th scope="col">Framework</th>
              <th scope="col" class="num">Learners</th>
              <th scope="col">Submitted</th>
              <th scope="col">Started</th>
              <th scope="col">Duration</th>
            </tr>
          </thead>
          <tbody>
            ${data.jobs.map((job) => html`<${JobRow} key=${job.id} job=${job} admin=${admin} now=${now} />`)}
          </tbody>
        </table>
      <//>
      <div class="pager">
        <button type="button" onClick=${previous} disabled=${page === 1}>Previous page</button>
        <button type="button" onClick=${next} disabled=${!data.next_cursor}>Next page</button>
      </div>`}`;
}
