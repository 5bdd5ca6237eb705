// Drift windows, on a deployment's page and a model version's factsheet: a chart over time
// (score, p-value, the windows that drifted, outliers) and the newest windows as a table, which
// says the same in words for those who cannot see the chart.
import { LazyChart, TableBox } from "../components.js";
import { featuresText } from "../drift.js";
import { count, metric, when } from "../format.js";
import { html } from "../html.js";
import { href } from "../router.js";

const TABLE_ROWS = 20;

/** `deployments`: a column naming each window's deployment (a version's history may span
 * several). */
export function DriftHistory({ windows, label, caption, deployments = false }) {
  if (!windows?.length) return html`<p class="muted">No window of requests has been tested yet.</p>`;
  const newest = [...windows].sort((a, b) => b.at - a.at).slice(0, TABLE_ROWS);
  const versions = newest.some((w) => w.version !== undefined);
  return html`<${LazyChart} chart="DriftChart" label=${label} windows=${windows} />
    <${TableBox} label=${`${caption}, table`}>
      <table>
        <caption>${caption}: the newest ${newest.length === 1 ? "window" : `${newest.length} windows`}</caption>
        <thead><tr>
          <th scope="col">Tested</th>
          ${deployments && html`<th scope="col">Deployment</th>`}
          ${versions && html`<th scope="col">Version</th>`}
          <th scope="col">Drift</th><th scope="col" class="num">Score</th><th scope="col" class="num">p-value</th>
          <th scope="col">Features that drifted</th><th scope="col" class="num">Outliers</th>
        </tr></thead>
        <tbody>
          ${newest.map(
            (w, i) => html`<tr key=${`${w.at}-${i}`} class=${w.drift ? "drifted" : undefined}>
              <th scope="row">${when(w.at)}</th>
              ${deployments && html`<td><a href=${href("deployments", w.deployment)}>${w.deployment}</a></td>`}
              ${versions && html`<td>${w.version === undefined ? "—" : `v${w.version}`}</td>`}
              <td>${w.drift ? html`<strong>yes</strong>` : "no"}</td>
              <td class="num">${metric(w.score)}</td>
              <td class="num">${metric(w.p_value)}</td>
              <td>${w.drift ? featuresText(w) : "—"}</td>
              <td class="num">${count(w.outliers ?? 0)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>`;
}
