// The job page's metrics: one chart per group (train, test, …), live from the job's stream,
// smoothed or on a log scale, with other jobs' curves overlaid for comparison.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, api, path, query } from "../api.js";
import { ErrorNote, LazyChart, TableBox } from "../components.js";
import { metric } from "../format.js";
import { useInterval } from "../hooks.js";
import { html } from "../html.js";
import { openStream } from "../sse.js";
import { labels } from "../runs.js";
import { isLive } from "../states.js";

const FLUSH_MS = 500;

/** Points from the stream, as { group: { "name\0learner": [[step, value]] } }. */
function addPoint(store, point) {
  const x = point.step ?? point.seq;
  const group = (store[point.group || "metrics"] ||= {});
  for (const [name, value] of Object.entries(point.values || {})) {
    (group[`${name}\u0000${point.learner}`] ||= []).push([x, typeof value === "number" ? value : null]);
  }
}

/** The `form=series` answer in the same shape (its learners merged). */
function fromSeries(series) {
  const store = {};
  for (const [group, names] of Object.entries(series)) {
    store[group] = {};
    for (const [name, { steps, values }] of Object.entries(names)) {
      store[group][`${name}\u0000`] = steps.map((x, i) => [x, values[i]]);
    }
  }
  return store;
}

/** The lines of one group over every job shown: "job · metric", and "#n" (the learner) when
 * several learners logged it. */
function linesOf(group, runs) {
  const lines = [];
  const titles = labels(runs); // two jobs of one name: the start of each id tells them apart
  runs.forEach((run, job) => {
    const keys = Object.keys(run.store[group] || {});
    const learners = new Set(keys.map((k) => k.split("\u0000")[1]));
    for (const key of keys) {
      const [name, learner] = key.split("\u0000");
      const suffix = learners.size > 1 ? ` #${learner}` : "";
      lines.push({ name: `${titles[job]} · ${name}${suffix}`, id: run.id, job, points: run.store[group][key] });
    }
  });
  return lines;
}

function Latest({ group, lines }) {
  return html`<details class="latest">
    <summary>Latest ${group} values</summary>
    <${TableBox} label=${`Latest ${group} values`}>
      <table>
        <thead><tr><th scope="col">Series</th><th scope="col" class="num">Step</th><th scope="col" class="num">Value</th><th scope="col" class="num">Points</th></tr></thead>
        <tbody>
          ${lines.map((line) => {
            const [x, y] = line.points[line.points.length - 1] || [];
            return html`<tr><th scope="row">${line.name}</th><td class="num">${metric(x)}</td>
              <td class="num">${metric(y)}</td><td class="num">${line.points.length}</td></tr>`;
          })}
        </tbody>
      </table>
    <//>
  </details>`;
}

/** A job by name (the newest of that name) or by id. */
async function findJob(wanted, admin) {
  const page = await api(`/v1/jobs${query({ name: wanted, limit: 20, all: admin ? "true" : "" })}`);
  const named = page.jobs.find((job) => job.name === wanted);
  if (named) return named;
  try {
    return await api(`/v1/jobs/${path(wanted)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      throw new Error(`No job has the id or name “${wanted}”`);
    }
    throw error;
  }
}

function Compare({ compared, onAdd, onRemove }) {
  const [wanted, setWanted] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const add = async (event) => {
    event.preventDefault();
    if (!wanted.trim()) return setError("Enter a job id or name");
    setBusy(true);
    setError(null);
    try {
      await onAdd(wanted.trim());
      setWanted("");
    } catch (caught) {
      setError(caught.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="compare inline" onSubmit=${add}>
    <div class=${`field${error ? " invalid" : ""}`}>
      <label for="compare-job">Compare with job</label>
      <input id="compare-job" value=${wanted} placeholder="job id or name"
        onInput=${(e) => setWanted(e.currentTarget.value)}
        aria-invalid=${error ? "true" : undefined} aria-describedby=${error ? "compare-error" : undefined} />
      ${error && html`<p class="field-error" id="compare-error" role="alert">${error}</p>`}
    </div>
    <button type="submit" disabled=${busy}>Add</button>
    ${compared.length > 0 &&
    html`<ul class="compared" aria-label="Jobs compared">
      ${compared.map(
        (run) => html`<li key=${run.id}>${run.name}
          <button type="button" class="small" onClick=${() => onRemove(run.id)} aria-label=${`Remove ${run.name} from the comparison`}>Remove</button></li>`,
      )}
    </ul>`}
  </form>`;
}

export function Metrics({ job, admin, generation }) {
  const store = useRef({});
  const [version, setVersion] = useState(0);
  const [error, setError] = useState(null);
  const [smoothing, setSmoothing] = useState(0);
  const [logScale, setLogScale] = useState(false);
  const [compared, setCompared] = useState([]);

  useEffect(() => {
    store.current = {};
    let pending = null;
    const stream = openStream(`/v1/jobs/${path(job.id)}/metrics?follow=true&lines=false`, {
      onEvent: (type, data) => {
        if (type !== "metric") return;
        addPoint(store.current, JSON.parse(data));
        pending ||= setTimeout(() => {
          pending = null;
          setVersion((v) => v + 1);
        }, FLUSH_MS);
      },
      onState: (state, detail) => setError(state === "failed" ? detail : null),
    });
    return () => {
      clearTimeout(pending);
      stream.close();
    };
  }, [job.id, generation]);

  const load = async (wanted) => {
    const found = await findJob(wanted, admin);
    const { series } = await api(`/v1/jobs/${path(found.id)}/metrics?form=series`);
    return { id: found.id, name: found.name, state: found.state, store: fromSeries(series) };
  };
  const add = async (wanted) => {
    const run = await load(wanted);
    if (run.id === job.id) throw new Error("That is this job: its curves are shown already");
    setCompared((runs) => [...runs.filter((r) => r.id !== run.id), run]);
  };
  const refreshCompared = async () => {
    const fresh = await Promise.all(compared.map((run) => (isLive(run.state) ? load(run.id) : run)));
    setCompared(fresh);
  };
  useInterval(refreshCompared, 10_000, compared.some((run) => isLive(run.state)));

  const runs = useMemo(
    () => [{ id: job.id, name: job.name, store: store.current }, ...compared],
    [version, compared, job.name],
  );
  const groups = [...new Set(runs.flatMap((run) => Object.keys(run.store)))].sort();
  const charts = useMemo(() => groups.map((group) => [group, linesOf(group, runs)]), [runs]);

  return html`<section>
    <h2>Metrics</h2>
    <div class="toolbar">
      <div class="field">
        <label for="smoothing">Smoothing</label>
        <span class="range">
          <input id="smoothing" type="range" min="0" max="0.99" step="0.01" value=${smoothing}
            aria-valuetext=${smoothing.toFixed(2)}
            onInput=${(e) => setSmoothing(Number(e.currentTarget.value))} />
          <output for="smoothing">${smoothing.toFixed(2)}</output>
        </span>
      </div>
      <label class="check"><input type="checkbox" checked=${logScale}
        onChange=${(e) => setLogScale(e.currentTarget.checked)} /> Log scale</label>
    </div>
    <${Compare} compared=${compared} onAdd=${add} onRemove=${(id) => setCompared((r) => r.filter((x) => x.id !== id))} />
    <${ErrorNote} error=${error} />
    ${charts.length === 0 && html`<p class="muted">No metrics yet. Metrics appear here as the job logs them.</p>`}
    <div class="charts">
      ${charts.map(
        ([group, lines]) => html`<figure key=${group} class="chart-card">
          <figcaption>${group}</figcaption>
          <${LazyChart} chart="MetricChart" lines=${lines} smoothing=${smoothing} logScale=${logScale}
            label=${`Chart of the ${group} metrics: ${lines.map((l) => l.name).join(", ")}. The latest values are in the table below it.`} />
          <${Latest} group=${group} lines=${lines} />
        </figure>`,
      )}
    </div>
  </section>`;
}
