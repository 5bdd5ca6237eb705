// #/capacity: what the platform has and what is in use, in all and per node, and the queue:
// the jobs that wait, in order, with why each waits. Every 5 s, and at once when a job moves.
import { api, query } from "../api.js";
import { Bar, ErrorNote, Loading, TableBox, orDash } from "../components.js";
import { bytes, count, duration, when } from "../format.js";
import { useJobEvents, useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";

const REFRESH_MS = 5000;
const QUEUE_LIMIT = 500;

/** A share of a total, 0–1 (0 when there is no total). */
export const share = (used, total) => (total > 0 ? Math.min(1, Math.max(0, used / total)) : 0);

const percent = (used, total) => (total > 0 ? ` (${Math.round(share(used, total) * 100)}%)` : "");

/** "1.5 of 4 in use (38%)", a bar beside it; "—" where the amount in use is not known. */
function Use({ used, total, show = count }) {
  if (!total) return html`<span>none</span>`;
  if (used === null || used === undefined) return html`<span>${show(total)} in all</span>`;
  const tone = share(used, total) >= 0.9 ? "full" : "";
  return html`<span class="use"><span>${show(used)} of ${show(total)}${percent(used, total)}</span> <${Bar} share=${share(used, total)} tone=${tone} /></span>`;
}

const cpus = (n) => count(Math.round(n * 100) / 100);

function Totals({ data }) {
  const { capacity: has, in_use: used } = data;
  return html`<section>
    <h2>In all</h2>
    <dl class="facts meters">
      <div><dt>CPUs in use</dt><dd><${Use} used=${used.cpus} total=${has.cpus} show=${cpus} /></dd></div>
      <div><dt>Memory in use</dt><dd><${Use} used=${used.memory} total=${has.memory} show=${bytes} /></dd></div>
      <div><dt>GPUs in use</dt><dd><${Use} used=${used.gpus} total=${has.gpus} />
        ${used.gpu_ids?.length > 0 && html`<div class="reason">devices ${used.gpu_ids.join(", ")}</div>`}</dd></div>
      <div><dt>Jobs queued</dt><dd>${count(data.queued_jobs)}</dd></div>
      <div><dt>Launcher</dt><dd>${data.launcher}</dd></div>
      ${data.isolation && html`<div class="wide"><dt>Isolation</dt><dd>${data.isolation.description || (data.isolation.confined ? "confined" : "none")}</dd></div>`}
    </dl>
  </section>`;
}

/** The nodes: a cluster's as its launcher lists them, or this one machine. */
export function nodesOf(data) {
  if (Array.isArray(data.nodes) && data.nodes.length) {
    return data.nodes.map((n) => ({
      name: n.node || n.id,
      alive: n.alive,
      cpus: [n.free_cpus === undefined ? null : n.cpus - n.free_cpus, n.cpus],
      memory: [n.free_memory === undefined ? null : n.memory - n.free_memory, n.memory],
      gpus: [n.free_gpus === undefined ? null : n.gpus - n.free_gpus, n.gpus],
    }));
  }
  const { capacity: has, in_use: used } = data;
  return [
    {
      name: `This machine (${data.launcher} launcher)`,
      alive: true,
      cpus: [used.cpus, has.cpus],
      memory: [used.memory, has.memory],
      gpus: [used.gpus, has.gpus],
    },
  ];
}

function Nodes({ data }) {
  const nodes = nodesOf(data);
  return html`<section>
    <h2>Nodes</h2>
    <${TableBox} label="Nodes table">
      <table>
        <caption>Each node: what is in use of what it has</caption>
        <thead><tr>
          <th scope="col">Node</th><th scope="col">Alive</th><th scope="col">CPUs in use</th>
          <th scope="col">Memory in use</th><th scope="col">GPUs in use</th>
        </tr></thead>
        <tbody>
          ${nodes.map(
            (n) => html`<tr key=${n.name}>
              <th scope="row">${n.name}</th>
              <td>${n.alive ? "yes" : html`<strong>no</strong>`}</td>
              <td><${Use} used=${n.cpus[0]} total=${n.cpus[1]} show=${cpus} /></td>
              <td><${Use} used=${n.memory[0]} total=${n.memory[1]} show=${bytes} /></td>
              <td><${Use} used=${n.gpus[0]} total=${n.gpus[1]} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>
  </section>`;
}

function Queue({ admin, jobs, total, now }) {
  const ordered = [...jobs].sort(
    (a, b) => Date.parse(a.submitted_at) - Date.parse(b.submitted_at) || a.id.localeCompare(b.id),
  );
  return html`<section>
    <h2>The queue</h2>
    <p class="hint">${admin ? "Everyone's" : "Your"} queued jobs, first submitted first. A job of a higher
      priority goes before the others; each says why it waits.</p>
    ${ordered.length === 0
      ? html`<p>No job waits.</p>`
      : html`<${TableBox} label="Queue table">
          <table>
            <caption>Queued jobs, in order${total > ordered.length ? ` (the first ${count(ordered.length)} of ${count(total)})` : ""}</caption>
            <thead><tr>
              <th scope="col" class="num">Place</th><th scope="col">Job</th><th scope="col">Why it waits</th>
              <th scope="col">Waiting</th>
              ${admin && html`<th scope="col">Owner</th>`}
              <th scope="col" class="num">Learners</th><th scope="col">Submitted</th>
            </tr></thead>
            <tbody>
              ${ordered.map(
                (job, i) => html`<tr key=${job.id}>
                  <td class="num">${i + 1}</td>
                  <th scope="row"><a href=${href("jobs", job.id)}>${job.name}</a></th>
                  <td class="why">${orDash(job.queue_reason)}</td>
                  <td>${duration((now - Date.parse(job.submitted_at)) / 1000)}</td>
                  ${admin && html`<td>${orDash(job.owner)}</td>`}
                  <td class="num">${job.learners}</td>
                  <td>${when(job.submitted_at)}</td>
                </tr>`,
              )}
            </tbody>
          </table>
        <//>`}
  </section>`;
}

export function CapacityPage({ user }) {
  useTitle("Capacity");
  const admin = Boolean(user.admin);
  const { data, error, loading, reload } = useResource(async (signal) => {
    const params = { state: "QUEUED", limit: QUEUE_LIMIT, all: admin ? "true" : "" };
    const [capacity, queued] = await Promise.all([
      api("/v1/capacity", { signal }),
      api(`/v1/jobs${query(params)}`, { signal }),
    ]);
    return { capacity, queued };
  }, [admin]);
  useInterval(reload, REFRESH_MS);
  useJobEvents(reload, admin);
  const now = Date.now();
  return html`<h1 tabindex="-1">Capacity</h1>
    <p class="lead">What the platform has, what running jobs hold, and the jobs that wait their turn.</p>
    <${ErrorNote} error=${error} />
    ${loading && html`<${Loading} what="Loading the capacity" />`}
    ${data &&
    html`<${Totals} data=${data.capacity} />
      <${Nodes} data=${data.capacity} />
      <${Queue} admin=${admin} jobs=${data.queued.jobs} total=${data.queued.total} now=${now} />`}`;
}
