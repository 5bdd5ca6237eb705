// #/deployments/<name>: a deployment's state, replicas, traffic and scale settings, refreshed
// every 2 s, its monitoring (drift over time, outliers), and a "try it" form that sends one V2
// inference request through the API.
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, path, query } from "../api.js";
import { Badge, ConfirmDialog, ErrorNote, Loading, TableBox, orDash } from "../components.js";
import { count, json, metric, plural, when } from "../format.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { REFRESH_MS, versionText } from "./deployments.js";
import { exampleRequest } from "../infer.js";
import { traffic } from "../traffic.js";
import { featuresText, verdictText } from "../drift.js";
import { DriftHistory } from "./drift-history.js";

// A detector judges a window of hundreds of requests at a time: its verdicts come seconds or
// minutes apart.
const DRIFT_REFRESH_MS = 10_000;
const DRIFT_WINDOWS = 200;

function Facts({ d }) {
  return html`<dl class="facts">
    <div><dt>Model</dt><dd><a href=${href("models", d.model)}>${d.model}</a></dd></div>
    <div><dt>Version served</dt><dd>${versionText(d)}</dd></div>
    <div><dt>Version asked for</dt><dd>${d.model_ref} (v${d.model_version})</dd></div>
    <div><dt>Public</dt><dd>${d.public ? "yes: answers without a token" : "no: needs a token or key"}</dd></div>
    <div><dt>Restarts</dt><dd>${orDash(d.restarts)}</dd></div>
    <div><dt>Last cold start</dt><dd>${d.last_cold_start_s == null ? "—" : `${d.last_cold_start_s.toFixed(1)} s`}</dd></div>
    <div><dt>Created</dt><dd>${when(d.created_at)}</dd></div>
    <div><dt>Updated</dt><dd>${when(d.updated_at)}</dd></div>
    <div class="wide"><dt>V2 infer</dt><dd><code class="url">${d.urls?.v2_infer}</code></dd></div>
    <div class="wide"><dt>V1 predict</dt><dd><code class="url">${d.urls?.v1_predict}</code></dd></div>
    ${d.grpc_endpoint && html`<div class="wide"><dt>V2 gRPC</dt><dd><code class="url">${d.grpc_endpoint}</code></dd></div>`}
  </dl>`;
}

function Replicas({ d }) {
  const r = d.replicas || {};
  return html`<section>
    <h2>Replicas</h2>
    <p>${r.ready} ready of ${r.desired} desired · ${r.starting || 0} starting · ${r.draining || 0} draining</p>
    ${d.replica_list?.length > 0 &&
    html`<${TableBox} label="Replicas table">
      <table>
        <caption class="sr-only">Replicas</caption>
        <thead><tr><th scope="col">Replica</th><th scope="col">State</th><th scope="col">Version</th><th scope="col">GPUs</th></tr></thead>
        <tbody>
          ${d.replica_list.map(
            (rep) => html`<tr key=${rep.id}><th scope="row">${rep.id}</th><td><${Badge} state=${rep.state} /></td>
              <td>v${rep.version}</td><td>${rep.gpus?.length ? rep.gpus.join(", ") : "CPU"}</td></tr>`,
          )}
        </tbody>
      </table>
    <//>`}
  </section>`;
}

const ms = (seconds) => (seconds == null ? "—" : `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : 1)} ms`);

/** Request rate and latency from two readings of the endpoint's counters, 2 s apart. */
function Traffic({ name }) {
  const [readings, setReadings] = useState([]);
  const [error, setError] = useState(null);
  const read = async () => {
    try {
      const now = await api(`/v1/deployments/${path(name)}/stats`);
      setReadings((last) => [last[last.length - 1], now].filter(Boolean));
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  };
  useEffect(() => {
    read();
  }, [name]);
  useInterval(read, REFRESH_MS);
  const found = traffic(readings[0], readings[1]);
  if (error) return html`<p class="hint">No traffic figures now: ${error.message}</p>`;
  if (!found) return html`<p class="hint">Measuring the request rate…</p>`;
  return html`<dl class="facts" aria-label="Traffic, the last 2 seconds">
    <div><dt>Request rate</dt><dd>${found.rate.toFixed(1)} /s</dd></div>
    <div><dt>Latency p50</dt><dd>${ms(found.p50)}</dd></div>
    <div><dt>Latency p99</dt><dd>${ms(found.p99)}</dd></div>
    <div><dt>In flight</dt><dd>${found.inflight}</dd></div>
    <div><dt>Waiting</dt><dd>${found.waiting}</dd></div>
    <div><dt>Mean latency, all time</dt><dd>${ms(found.mean)}</dd></div>
  </dl>`;
}

function Requests({ d }) {
  const byVersion = Object.entries(d.requests_by_version || {});
  // The total counts every answer; a version only those its replicas gave. The rest were
  // answered by the gateway itself (a refused key, busy, a failed replica): shown as such, so
  // that the table adds up to the total.
  const byReplicas = byVersion.reduce((sum, [, n]) => sum + n, 0);
  const byGateway = Math.max(0, (d.requests || 0) - byReplicas);
  return html`<section>
    <h2>Requests</h2>
    <${Traffic} name=${d.name} />
    <p>${plural(d.requests || 0, "request")} answered.</p>
    ${(byVersion.length > 0 || byGateway > 0) &&
    html`<${TableBox} label="Requests by version">
      <table>
        <caption class="sr-only">Requests by version</caption>
        <thead><tr><th scope="col">Answered by</th><th scope="col" class="num">Requests</th></tr></thead>
        <tbody>
          ${byVersion.map(([v, n]) => html`<tr><th scope="row">v${v}</th><td class="num">${count(n)}</td></tr>`)}
          ${byGateway > 0 && html`<tr><th scope="row">the gateway (refused, busy or failed)</th><td class="num">${count(byGateway)}</td></tr>`}
        </tbody>
        <tfoot><tr><th scope="row">All</th><td class="num">${count(d.requests || 0)}</td></tr></tfoot>
      </table>
    <//>`}
  </section>`;
}

/** What the deployment watches for, and how its detector is doing. */
function watchedText(m) {
  const what = [m.drift && "drift", m.outliers && "outliers"].filter(Boolean).join(" and ");
  const payloads = m.payloads?.rate ? `; ${metric(m.payloads.rate * 100)}% of payloads kept` : "";
  return `${what ? `Watching for ${what}` : "Not testing for drift or outliers"}, in windows of ${count(m.window)} requests${payloads}.`;
}

/** The form's values from the deployment's settings (none: the defaults a user would pick). */
export function monitorForm(m) {
  return {
    drift: Boolean(m?.drift),
    outliers: Boolean(m?.outliers),
    window: String(m?.window ?? 500),
    percent: String(m?.payloads?.rate ? +(m.payloads.rate * 100).toPrecision(4) : 0),
  };
}

/** The PATCH body from the form: `{monitoring: …}`, or `{error, field}` naming what is wrong. */
export function monitorChange(form) {
  const window = Number(form.window);
  if (!Number.isInteger(window) || window < 10) return { error: "Window: a whole number of requests, 10 or more", field: "monitoring.window" };
  const percent = Number(form.percent);
  if (form.percent === "" || !(percent >= 0 && percent <= 100)) return { error: "Payloads kept: a share from 0 to 100 %", field: "monitoring.payloads.rate" };
  return { monitoring: { drift: form.drift, outliers: form.outliers, window, payloads: { rate: percent / 100 } } };
}

/** Turn drift and outlier detection and payload logging on or off. */
function MonitorSettings({ d, onSaved }) {
  const [form, setForm] = useState(null); // null: not edited, show the server's
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState("");
  const shown = form || monitorForm(d.monitoring);
  const put = (key, read) => (e) => {
    setSaved("");
    setForm({ ...shown, [key]: read(e.currentTarget) });
  };
  const save = async (event) => {
    event.preventDefault();
    setError(null);
    const change = monitorChange(shown);
    if (change.error) {
      setError({ message: change.error, field: change.field });
      return;
    }
    try {
      await api(`/v1/deployments/${path(d.name)}`, { method: "PATCH", json: { monitoring: change.monitoring } });
      setForm(null);
      setSaved("Saved.");
      onSaved();
    } catch (caught) {
      setError(caught);
    }
  };
  const field = error?.field || "";
  const invalid = (name) => (field.startsWith(name) ? "true" : undefined);
  const described = error ? "monitor-error" : undefined;
  return html`<form class="inline monitor" onSubmit=${save} aria-label="Monitoring settings" novalidate>
      <label class="check"><input type="checkbox" checked=${shown.drift} onChange=${put("drift", (t) => t.checked)}
        aria-invalid=${invalid("monitoring.drift")} aria-describedby=${described} /> Drift</label>
      <label class="check"><input type="checkbox" checked=${shown.outliers} onChange=${put("outliers", (t) => t.checked)}
        aria-invalid=${invalid("monitoring.outliers")} aria-describedby=${described} /> Outliers</label>
      <div class="field"><label for="monitor-window">Window (requests)</label>
        <input id="monitor-window" type="number" min="10" step="1" value=${shown.window} onInput=${put("window", (t) => t.value)}
          aria-invalid=${invalid("monitoring.window")} aria-describedby=${described} /></div>
      <div class="field"><label for="monitor-payloads">Payloads kept (%)</label>
        <input id="monitor-payloads" type="number" min="0" max="100" step="any" value=${shown.percent} onInput=${put("percent", (t) => t.value)}
          aria-invalid=${invalid("monitoring.payloads")} aria-describedby=${described} /></div>
      <button type="submit">Save monitoring</button>
      ${saved && html`<span role="status">${saved}</span>`}
    </form>
    <${ErrorNote} error=${error} id="monitor-error" />`;
}

function Monitoring({ d, onSaved }) {
  const { data, error, reload } = useResource(
    (signal) => api(`/v1/deployments/${path(d.name)}/drift${query({ limit: DRIFT_WINDOWS })}`, { signal }),
    [d.name],
  );
  useInterval(reload, DRIFT_REFRESH_MS);
  const m = d.monitoring;
  const status = m?.status;
  const history = data?.history || [];
  return html`<section>
    <h2>Monitoring</h2>
    ${m
      ? html`<p>${watchedText(m)}</p>
        ${status && status.state !== "off" && html`<p>Detector: <${Badge} state=${status.state} />${status.message && html` <span class="message">${status.message}</span>`}</p>`}`
      : html`<p class="hint">Not monitored${history.length ? " now; the windows below were tested before" : ""}. Drift
          and outliers are judged against the version's reference data (<code>tracking.save_reference</code> in its
          training script); <code>loom deployments update ${d.name} --monitor</code> does the same as this form.</p>`}
    <${MonitorSettings} d=${d} onSaved=${onSaved} />
    <${ErrorNote} error=${error} />
    ${data && (m || history.length > 0) && html`<p class=${data.drift ? "drift-verdict drifted" : "drift-verdict"}>${verdictText(data)}</p>
      ${data.at && html`<dl class="facts" aria-label="The last window">
        <div><dt>Drift</dt><dd>${data.drift ? `yes: ${featuresText(data)}` : "no"}</dd></div>
        <div><dt>Score</dt><dd>${metric(data.score)}</dd></div>
        <div><dt>p-value</dt><dd>${metric(data.p_value)}</dd></div>
        <div><dt>Window</dt><dd>${plural(data.window || 0, "request")}</dd></div>
        <div><dt>Version</dt><dd>v${data.version}</dd></div>
        <div><dt>Tested</dt><dd>${when(data.at)}</dd></div>
      </dl>`}
      <${DriftHistory} windows=${history} label=${`Drift of ${d.name} over time: score, p-value, drifted windows and outliers per window`}
        caption="Windows of requests tested for drift" />`}
  </section>`;
}

function Scale({ d, onSaved }) {
  const [values, setValues] = useState(null); // null: not edited, show the server's
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState("");
  const shown = values || { min: String(d.min_replicas ?? ""), max: String(d.max_replicas ?? "") };
  const put = (key) => (e) => {
    setSaved("");
    setValues({ ...shown, [key]: e.currentTarget.value });
  };
  const save = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      const json = { min_replicas: Number(shown.min), max_replicas: Number(shown.max) };
      await api(`/v1/deployments/${path(d.name)}`, { method: "PATCH", json });
      setValues(null);
      setSaved("Saved.");
      onSaved();
    } catch (caught) {
      setError(caught);
    }
  };
  const field = error instanceof ApiError ? error.field : "";
  return html`<section>
    <h2>Scale settings</h2>
    <form class="inline" onSubmit=${save}>
      <div class="field"><label for="min-replicas">Min replicas</label>
        <input id="min-replicas" type="number" min="0" max="64" step="1" value=${shown.min} onInput=${put("min")}
          aria-invalid=${field === "min_replicas" ? "true" : undefined} aria-describedby=${error ? "scale-error" : undefined} /></div>
      <div class="field"><label for="max-replicas">Max replicas</label>
        <input id="max-replicas" type="number" min="1" max="64" step="1" value=${shown.max} onInput=${put("max")}
          aria-invalid=${field === "max_replicas" ? "true" : undefined} aria-describedby=${error ? "scale-error" : undefined} /></div>
      <button type="submit">Save</button>
      ${saved && html`<span role="status">${saved}</span>`}
    </form>
    <${ErrorNote} error=${error} id="scale-error" />
    <p class="hint">Replicas scale between these with the load (target ${orDash(d.target_concurrency)} requests in flight per replica).</p>
  </section>`;
}

function TryIt({ d }) {
  const [body, setBody] = useState("");
  const [answer, setAnswer] = useState("");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const controller = new AbortController();
    exampleRequest(d, controller.signal).then((example) => {
      if (!controller.signal.aborted) setBody((old) => old || json(example));
    });
    return () => controller.abort();
  }, [d.name, d.model, d.model_version]);
  const send = async (event) => {
    event.preventDefault();
    setError(null);
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch (caught) {
      setError(`The request is not valid JSON: ${caught.message}`);
      return;
    }
    setBusy(true);
    setAnswer("");
    try {
      const result = await api(`/v1/deployments/${path(d.name)}/infer`, { method: "POST", json: parsed });
      setAnswer(json(result));
    } catch (caught) {
      const shown = caught instanceof ApiError ? { status: caught.status, error: caught.message } : { error: caught.message };
      setAnswer(json(shown));
    } finally {
      setBusy(false);
    }
  };
  return html`<section>
    <h2>Try it</h2>
    <form onSubmit=${send}>
      <div class="field">
        <label for="infer-request">Request (V2 JSON)</label>
        <textarea id="infer-request" class="code" rows="10" spellcheck="false" value=${body}
          onInput=${(e) => setBody(e.currentTarget.value)} aria-describedby="infer-hint"
          aria-invalid=${error ? "true" : undefined}></textarea>
        <p class="hint" id="infer-hint">An Open Inference Protocol (V2) request; Loom sends it to this deployment for you.</p>
      </div>
      <${ErrorNote} error=${error} />
      <div class="actions"><button type="submit" class="primary" disabled=${busy}>Send</button>
        ${busy && html`<span role="status">Waiting for the answer…</span>`}</div>
    </form>
    <pre class="response" aria-label="Response" tabindex="0">${answer || "The answer appears here."}</pre>
  </section>`;
}

export function DeploymentPage({ name }) {
  useTitle(`Deployment ${name}`);
  const { data: d, error, reload } = useResource((signal) => api(`/v1/deployments/${path(name)}`, { signal }), [name]);
  const [deleting, setDeleting] = useState(false);
  useInterval(reload, REFRESH_MS);
  if (!d) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">${name}</h1>
      ${missing
        ? html`<p role="alert">There is no deployment ${name}. <a href=${href("deployments")}>All deployments</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the deployment" />`}`;
  }
  const remove = async () => {
    await api(`/v1/deployments/${path(d.name)}`, { method: "DELETE" });
    go("deployments");
  };
  return html`<div class="page-head">
      <h1 tabindex="-1">${d.name}</h1>
      <div class="actions"><button type="button" class="danger" onClick=${() => setDeleting(true)}>Delete</button></div>
    </div>
    <p class="job-state" role="status"><span class="sr-only">State: </span><${Badge} state=${d.state} />
      ${d.message && html` <span class="message">${d.message}</span>`}</p>
    <${ErrorNote} error=${error} />
    <${Facts} d=${d} />
    <div class="two-columns">
      <${Replicas} d=${d} />
      <${Requests} d=${d} />
    </div>
    <${Monitoring} d=${d} onSaved=${reload} />
    <${Scale} d=${d} onSaved=${reload} />
    <${TryIt} d=${d} />
    ${deleting &&
    html`<${ConfirmDialog} title="Delete this deployment?" onConfirm=${remove} onClose=${() => setDeleting(false)}>
      <p><strong>${d.name}</strong> stops answering: in-flight requests finish, then its replicas stop. The model stays registered.</p>
    <//>`}`;
}
