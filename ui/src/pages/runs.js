// #/runs: tracked runs (every job is one, and so is every run logged with MLflow's client) in
// a table whose params and metrics columns are chosen, sorted by a header and filtered with
// MLflow's grammar; runs chosen from it open in the comparison.
import { useEffect, useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, Loading, TableBox } from "../components.js";
import { when } from "../format.js";
import { useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { MAX_COMPARED, canCompare, cell, columnsOf, defaultColumns, nextOrder, sortOf } from "../runs.js";

const PAGE = 100;
const SAVED = "loom.runs.columns";
const EXAMPLE = "metrics.loss < 0.5 and params.lr = '0.1'";

const saved = () => {
  try {
    return JSON.parse(localStorage.getItem(SAVED) || "null");
  } catch {
    return null;
  }
};

/** Where a run's name leads: a job's page for a job, the run's own page otherwise. */
export const runHref = (run) => (run.is_job ? href("jobs", run.id) : href("runs", run.id));

function Search({ projects, wanted, onSearch }) {
  const [filter, setFilter] = useState(wanted.filter);
  const [project, setProject] = useState(wanted.project);
  const submit = (event) => {
    event.preventDefault();
    onSearch({ filter: filter.trim(), project });
  };
  return html`<form class="filters" role="search" aria-label="Runs" onSubmit=${submit}>
    <div class="field">
      <label for="runs-project">Project</label>
      <select id="runs-project" value=${project} onChange=${(e) => setProject(e.currentTarget.value)}>
        <option value="">All projects</option>
        ${projects.map((p) => html`<option value=${p.id}>${p.name}</option>`)}
      </select>
    </div>
    <div class="field grow">
      <label for="runs-filter">Filter</label>
      <input id="runs-filter" type="search" value=${filter} placeholder=${EXAMPLE} spellcheck="false"
        aria-describedby="runs-filter-hint" onInput=${(e) => setFilter(e.currentTarget.value)} />
      <p class="hint" id="runs-filter-hint">MLflow's grammar: <code>metrics.</code>, <code>params.</code>,
        ${" "}<code>tags.</code> and attributes such as <code>status = 'FINISHED'</code>, joined with AND.</p>
    </div>
    <button type="submit">Search</button>
  </form>`;
}

function Columns({ offered, chosen, onChange }) {
  const toggle = (column) =>
    onChange(chosen.includes(column) ? chosen.filter((c) => c !== column) : [...chosen, column]);
  const group = (title, columns) =>
    columns.length > 0 &&
    html`<fieldset>
      <legend>${title}</legend>
      ${columns.map(
        (column) => html`<label class="check" key=${column}><input type="checkbox"
          checked=${chosen.includes(column)} onChange=${() => toggle(column)} /> ${column.split(".").slice(1).join(".")}</label>`,
      )}
    </fieldset>`;
  return html`<details class="columns">
    <summary>Columns (${chosen.length} shown)</summary>
    ${group("Params", offered.params)} ${group("Metrics", offered.metrics)}
    ${offered.params.length + offered.metrics.length === 0 && html`<p class="muted">These runs have no params or metrics yet.</p>`}
  </details>`;
}

function Header({ column, label, order, onOrder }) {
  const sort = sortOf(order, column);
  return html`<th scope="col" aria-sort=${sort}>
    <button type="button" class="sort" onClick=${() => onOrder(nextOrder(order, column))}>
      ${label}
    </button>
  </th>`;
}

function RunsTable({ runs, columns, order, onOrder, chosen, onChoose }) {
  const head = (column, label, numeric) =>
    html`<${Header} column=${column} label=${label} order=${order} onOrder=${onOrder} numeric=${numeric} />`;
  return html`<${TableBox} label="Runs">
    <table class="runs">
      <caption class="sr-only">Runs, with the params and metrics chosen as columns</caption>
      <thead><tr>
        <th scope="col"><span class="sr-only">Chosen to compare</span></th>
        ${head("attributes.run_name", "Run")}
        <th scope="col">Project</th>
        ${head("attributes.status", "Status")}
        ${head("attributes.start_time", "Started")}
        ${columns.map((column) => head(column, column))}
      </tr></thead>
      <tbody>
        ${runs.map(
          (run) => html`<tr key=${run.id}>
            <td><input type="checkbox" checked=${chosen.includes(run.id)} aria-label=${`Compare ${run.name} (${run.id})`}
              onChange=${() => onChoose(run.id)} /></td>
            <th scope="row"><a href=${runHref(run)}>${run.name}</a>${run.parent_id && html`<span class="muted"> · child</span>`}</th>
            <td>${run.project || run.project_id}</td>
            <td><${Badge} state=${run.status} /></td>
            <td>${when(run.start_time)}</td>
            ${columns.map((column) => html`<td class=${column.startsWith("metrics.") ? "num" : ""}>${cell(run, column)}</td>`)}
          </tr>`,
        )}
      </tbody>
    </table>
  <//>`;
}

function RunList() {
  const [projects, setProjects] = useState([]);
  const [wanted, setWanted] = useState({ filter: "", project: "" });
  const [order, setOrder] = useState(null);
  const [runs, setRuns] = useState(null);
  const [next, setNext] = useState(null);
  const [error, setError] = useState(null);
  const [columns, setColumns] = useState(saved);
  const [chosen, setChosen] = useState([]);

  useEffect(() => {
    api("/v1/projects").then((found) => setProjects(found.projects), setError);
  }, []);
  const load = async (offset) => {
    const params = { filter: wanted.filter, project: wanted.project, order_by: order || "", max_results: PAGE, offset };
    const page = await api(`/v1/runs${query(params)}`);
    setRuns((shown) => (offset ? [...shown, ...page.runs] : page.runs));
    setNext(page.next_offset);
  };
  useEffect(() => {
    setError(null);
    load(0).catch((caught) => {
      setError(caught);
      setRuns((shown) => shown || []);
    });
  }, [wanted, order]);

  const shownColumns = columns || defaultColumns(runs || []);
  const pickColumns = (picked) => {
    setColumns(picked);
    localStorage.setItem(SAVED, JSON.stringify(picked));
  };
  const choose = (id) => setChosen((c) => (c.includes(id) ? c.filter((x) => x !== id) : [...c, id]));
  return html`<${Search} projects=${projects} wanted=${wanted} onSearch=${setWanted} />
    <${ErrorNote} error=${error} />
    ${runs === null
      ? html`<${Loading} what="Loading runs" />`
      : html`<${Columns} offered=${columnsOf(runs)} chosen=${shownColumns} onChange=${pickColumns} />
        <div class="toolbar">
          <button type="button" class="primary" disabled=${!canCompare(chosen)} onClick=${() => go("compare", chosen.join(","))}>
            Compare ${chosen.length} runs</button>
          <span class="hint">Choose 2 to ${MAX_COMPARED} runs to compare.</span>
        </div>
        ${runs.length === 0
          ? html`<p class="muted">No run matches. Every job is a run; so is a run logged with MLflow's client
              (<code>MLFLOW_TRACKING_URI</code> set to this server, <code>MLFLOW_TRACKING_TOKEN</code> to your token).</p>`
          : html`<${RunsTable} runs=${runs} columns=${shownColumns} order=${order} onOrder=${setOrder}
              chosen=${chosen} onChoose=${choose} />`}
        ${next !== null && html`<button type="button" onClick=${() => load(next).catch(setError)}>More runs</button>`}`}`;
}

export function RunsPage() {
  useTitle("Runs");
  return html`<h1 tabindex="-1">Runs</h1><${RunList} />`;
}
