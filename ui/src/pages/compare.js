// #/compare/<id>,<id>…: 2 to 10 runs side by side — their params in columns, the rows whose
// values differ marked; every metric as one chart with a line per run (runs of the same name
// told apart by their ids).
import { useMemo, useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, LazyChart, Loading, TableBox } from "../components.js";
import { metric } from "../format.js";
import { useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { compareLines, labels } from "../runs.js";
import { runHref } from "./runs.js";

function Params({ answer, names }) {
  const [onlyDiffering, setOnlyDiffering] = useState(false);
  const rows = answer.params.filter((p) => p.differ || !onlyDiffering);
  const differing = answer.params.filter((p) => p.differ).length;
  return html`<section>
    <h2>Params</h2>
    <p>${differing} of ${answer.params.length} params differ between these runs.</p>
    <label class="check"><input type="checkbox" checked=${onlyDiffering}
      onChange=${(e) => setOnlyDiffering(e.currentTarget.checked)} /> Only those that differ</label>
    <${TableBox} label="Params side by side">
      <table class="compare-params">
        <caption class="sr-only">Each param's value in each run; the rows marked “differs” are not the same in all of them</caption>
        <thead><tr><th scope="col">Param</th>${names.map((name) => html`<th scope="col">${name}</th>`)}</tr></thead>
        <tbody>
          ${rows.map(
            (p) => html`<tr key=${p.key} class=${p.differ ? "differ" : ""}>
              <th scope="row">${p.key}${p.differ && html` <span class="tag">differs</span>`}</th>
              ${p.values.map((v) => html`<td>${v ?? "—"}</td>`)}
            </tr>`,
          )}
        </tbody>
      </table>
    <//>
  </section>`;
}

function Metrics({ answer, names }) {
  const charts = useMemo(() => compareLines(answer), [answer]);
  const keys = Object.keys(charts).sort();
  return html`<section>
    <h2>Metrics</h2>
    ${keys.length === 0 && html`<p class="muted">None of these runs logged a metric.</p>`}
    <div class="charts">
      ${keys.map(
        (key) => html`<figure key=${key} class="chart-card">
          <figcaption>${key}</figcaption>
          <${LazyChart} chart="MetricChart" lines=${charts[key]}
            label=${`Chart of ${key}: a line for each of ${charts[key].map((l) => l.name).join(", ")}. The last values are in the table below.`} />
          <${TableBox} label=${`Last ${key} values`}>
            <table>
              <thead><tr><th scope="col">Run</th><th scope="col" class="num">Last value</th></tr></thead>
              <tbody>
                ${answer.runs.map(
                  (run, i) => html`<tr><th scope="row">${names[i]}</th><td class="num">${!(key in run.metrics) ? "—" : run.metrics[key] === null ? "NaN" : metric(run.metrics[key])}</td></tr>`,
                )}
              </tbody>
            </table>
          <//>
        </figure>`,
      )}
    </div>
  </section>`;
}

export function ComparePage({ ids }) {
  const wanted = (ids || "").split(",").filter(Boolean);
  const { data: answer, error } = useResource(
    (signal) => api(`/v1/runs/compare${query({ ids: wanted })}`, { signal }),
    [ids],
  );
  useTitle(`Comparing ${wanted.length} runs`);
  const names = answer ? labels(answer.runs) : [];
  return html`<h1 tabindex="-1">Comparing ${wanted.length} runs</h1>
    <p><a href=${href("runs")}>All runs</a></p>
    <${ErrorNote} error=${error} />
    ${!answer && !error && html`<${Loading} what="Loading the runs" />`}
    ${answer &&
    html`<ul class="compared-runs" aria-label="Runs compared">
        ${answer.runs.map(
          (run, i) => html`<li key=${run.id}><a href=${runHref(run)}>${names[i]}</a> <${Badge} state=${run.status} />
            ${" "}<span class="muted">${run.project || ""}</span></li>`,
        )}
      </ul>
      <${Params} answer=${answer} names=${names} />
      <${Metrics} answer=${answer} names=${names} />`}`;
}
