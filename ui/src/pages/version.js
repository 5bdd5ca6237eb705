// #/models/<name>/versions/<ref>: a model version's factsheet — where it came from, how it
// trained, what its evaluations found, how it fared in service (drift) and where it is served —
// with the JSON and the Markdown to download.
import { ApiError, api, path } from "../api.js";
import { DownloadLink, ErrorNote, Lineage, Loading, TableBox } from "../components.js";
import { driftedText } from "../drift.js";
import { factsheetFiles, flatten, inline } from "../factsheet.js";
import { metric, when } from "../format.js";
import { useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";
import { DriftHistory } from "./drift-history.js";

function Served({ deployments }) {
  if (!deployments?.length) return "no deployment";
  return deployments.map((name, i) => html`${i > 0 && ", "}<a href=${href("deployments", name)}>${name}</a>`);
}

function Summary({ sheet }) {
  return html`<dl class="facts">
    <div><dt>Owner</dt><dd>${sheet.owner}</dd></div>
    <div><dt>Registered</dt><dd>${when(sheet.created_at)}</dd></div>
    <div><dt>Served by</dt><dd><${Served} deployments=${sheet.deployments} /></dd></div>
    <div><dt>Reference data</dt><dd>${sheet.reference_data ? "kept (reference.npz)" : "none: it cannot be monitored for drift"}</dd></div>
  </dl>`;
}

function Provenance({ p }) {
  return html`<section>
    <h2>Provenance</h2>
    <dl class="facts">
      <div><dt>Job</dt><dd>${p.job_id ? html`<a href=${href("jobs", p.job_id)}>${p.job_id}</a>` : "—"}</dd></div>
      <div><dt>Framework</dt><dd>${p.framework || "—"}</dd></div>
      <div class="wide"><dt>Code digest</dt><dd><code class="url">${p.code_digest || "—"}</code></dd></div>
      <div class="wide"><dt>Made by</dt><dd>${p.lineage?.kind ? html`<${Lineage} lineage=${p.lineage} />` : "its owner, directly"}</dd></div>
      <div class="wide"><dt>Data stores</dt><dd>${inline(p.data_stores)}</dd></div>
      <div class="wide"><dt>Environment</dt><dd>${inline(p.environment)}</dd></div>
      <div class="wide"><dt>Parameters</dt><dd>${inline(p.parameters)}</dd></div>
      <div class="wide"><dt>Tags</dt><dd>${inline(p.tags)}</dd></div>
    </dl>
    ${p.files?.length > 0 &&
    html`<details><summary>${p.files.length} ${p.files.length === 1 ? "file" : "files"} and their digests</summary>
      <ul class="plain">${p.files.map((f) => html`<li><code>${f.path}</code> <span class="muted">${f.digest}</span></li>`)}</ul>
    </details>`}
  </section>`;
}

function Rows({ caption, rows }) {
  return html`<${TableBox} label=${caption}>
    <table>
      <caption>${caption}</caption>
      <thead><tr><th scope="col">Measure</th><th scope="col" class="num">Value</th></tr></thead>
      <tbody>${rows.map(([name, value]) => html`<tr><th scope="row">${name}</th><td class="num">${value}</td></tr>`)}</tbody>
    </table>
  <//>`;
}

function TrainingMetrics({ metrics }) {
  const entries = Object.entries(metrics || {}).sort(([a], [b]) => a.localeCompare(b));
  return html`<section>
    <h2>Training metrics</h2>
    ${entries.length
      ? html`<${Rows} caption="Final training metrics" rows=${entries.map(([k, v]) => [k, metric(v)])} />`
      : html`<p class="muted">None logged.</p>`}
  </section>`;
}

function Evaluations({ found }) {
  return html`<section>
    <h2>Evaluations</h2>
    ${found?.length
      ? found.map(
          (e) => html`<div class="evaluation">
            <h3>${e.kind}</h3>
            <p class="hint">By job ${e.job_id ? html`<a href=${href("jobs", e.job_id)}>${e.job_id}</a>` : "—"}, ${when(e.at)}${e.lineage?.kind ? html`, <${Lineage} lineage=${e.lineage} />` : ""}.</p>
            <${Rows} caption=${`${e.kind} results`} rows=${flatten(e.results)} />
          </div>`,
        )
      : html`<p class="muted">None recorded. An evaluation step (<code>python -m loom.evaluation … --record NAME@VERSION</code>) records accuracy, fairness, robustness and explanations here.</p>`}
  </section>`;
}

function Drift({ sheet }) {
  const drift = sheet.drift || {};
  return html`<section>
    <h2>Drift in service</h2>
    ${drift.windows > 0 &&
    html`<p>${driftedText(drift.drifted || 0, drift.windows)}${drift.windows > (drift.last?.length || 0) ? `; the newest ${drift.last.length} are shown` : ""}.</p>`}
    <${DriftHistory} windows=${drift.last || []} deployments=${true}
      label=${`Drift of ${sheet.model} v${sheet.version} over time: score, p-value, drifted windows and outliers per window`}
      caption=${`Windows of requests to v${sheet.version}`} />
  </section>`;
}

export function VersionPage({ name, version }) {
  useTitle(`${name} v${version} factsheet`);
  const { data: sheet, error } = useResource(
    (signal) => api(`/v1/models/${path(name)}/versions/${path(version)}/factsheet`, { signal }),
    [name, version],
  );
  const heading = `${name} ${/^\d+$/.test(version) ? `v${version}` : version}`;
  if (!sheet) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">${heading}</h1>
      ${missing
        ? html`<p role="alert">${error.message}. <a href=${href("models", name)}>All versions of ${name}</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the factsheet" />`}`;
  }
  const files = factsheetFiles(name, sheet.version);
  return html`<div class="page-head">
      <h1 tabindex="-1">${sheet.model} v${sheet.version}</h1>
      <div class="actions">
        <${DownloadLink} href=${files.json.href} filename=${files.json.filename}>Factsheet as JSON<//>
        <${DownloadLink} href=${files.markdown.href} filename=${files.markdown.filename}>Factsheet as Markdown<//>
      </div>
    </div>
    <p class="lead">The factsheet of version ${sheet.version} of <a href=${href("models", sheet.model)}>${sheet.model}</a>.</p>
    <${Summary} sheet=${sheet} />
    <${Provenance} p=${sheet.provenance || {}} />
    <${TrainingMetrics} metrics=${sheet.training_metrics} />
    <${Evaluations} found=${sheet.evaluations} />
    <${Drift} sheet=${sheet} />`;
}
