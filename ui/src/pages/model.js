// #/models/<name>: a model's versions with their provenance and metrics (each linking to its
// factsheet), two versions side by side, aliases, and a version deployed in one step.
import { useState } from "preact/hooks";
import { ApiError, api, path } from "../api.js";
import { DownloadLink, ErrorNote, Lineage, Loading, TableBox } from "../components.js";
import { metric, when } from "../format.js";
import { useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { go, href } from "../router.js";
import { aliasText } from "./models.js";

/** A deployment name the API takes (a DNS label) made from the model's name. */
export const deploymentName = (name) =>
  name.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 63) || "model";

function Metrics({ metrics }) {
  const entries = Object.entries(metrics || {});
  if (entries.length === 0) return "—";
  return html`<ul class="plain">${entries.map(([name, value]) => html`<li><span class="name">${name}</span> ${metric(value)}</li>`)}</ul>`;
}

function Deploy({ model, version }) {
  const [name, setName] = useState(deploymentName(model));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const id = `deploy-${version}`;
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const created = await api("/v1/deployments", { method: "POST", json: { name: name.trim(), model, version } });
      go("deployments", created.name);
    } catch (caught) {
      setError(caught.message);
      setBusy(false);
    }
  };
  return html`<form class="inline deploy" onSubmit=${submit} aria-label=${`Deploy version ${version}`} novalidate>
    <div class=${`field${error ? " invalid" : ""}`}>
      <label for=${id}>Deployment name</label>
      <input id=${id} value=${name} onInput=${(e) => setName(e.currentTarget.value)} required
        autocomplete="off" aria-invalid=${error ? "true" : undefined}
        aria-describedby=${error ? `${id}-error` : undefined} />
      ${error && html`<p class="field-error" id=${`${id}-error`} role="alert">${error}</p>`}
    </div>
    <button type="submit" disabled=${busy}>Deploy</button>
  </form>`;
}

function Versions({ model }) {
  return html`<${TableBox} label="Versions table">
    <table>
      <caption>Versions of ${model.name}, newest first</caption>
      <thead><tr>
        <th scope="col">Version</th><th scope="col">Created</th><th scope="col">Job</th>
        <th scope="col">Metrics</th><th scope="col">Aliases</th><th scope="col">Files</th><th scope="col">Factsheet</th>
        <th scope="col">Deploy</th>
      </tr></thead>
      <tbody>
        ${[...model.version_list].sort((a, b) => b.version - a.version).map((v) => {
          const job = v.provenance?.job_id;
          return html`<tr key=${v.version}>
            <th scope="row">v${v.version}</th>
            <td>${when(v.created_at)}</td>
            <td>${job ? html`<a href=${href("jobs", job)}>${job}</a>` : "—"}
              ${v.provenance?.framework && html`<div class="muted">${v.provenance.framework}</div>`}
              ${v.provenance?.lineage?.kind && html`<div><${Lineage} lineage=${v.provenance.lineage} /></div>`}</td>
            <td><${Metrics} metrics=${v.metrics} /></td>
            <td>${v.aliases.length ? v.aliases.join(", ") : "—"}</td>
            <td><${DownloadLink} href=${`/v1/models/${path(model.name)}/versions/${v.version}/download`}
              filename=${`${model.name}-v${v.version}.zip`}>Download<span class="sr-only"> version ${v.version}</span><//></td>
            <td><a href=${href("models", model.name, "versions", v.version)}>Factsheet<span class="sr-only"> of version ${v.version}</span></a></td>
            <td><${Deploy} model=${model.name} version=${v.version} /></td>
          </tr>`;
        })}
      </tbody>
    </table>
  <//>`;
}

function VersionSelect({ id, label, value, set, versions }) {
  return html`<div class="field">
    <label for=${id}>${label}</label>
    <select id=${id} value=${value} onChange=${(e) => set(Number(e.currentTarget.value))}>
      ${versions.map((v) => html`<option value=${v.version}>v${v.version}</option>`)}
    </select>
  </div>`;
}

function Compare({ versions }) {
  const newest = versions[versions.length - 1].version;
  const [a, setA] = useState(versions.length > 1 ? versions[versions.length - 2].version : newest);
  const [b, setB] = useState(newest);
  const first = versions.find((v) => v.version === a);
  const second = versions.find((v) => v.version === b);
  const names = [...new Set([...Object.keys(first?.metrics || {}), ...Object.keys(second?.metrics || {})])].sort();
  return html`<section>
    <h2>Compare versions</h2>
    <div class="toolbar">
      <${VersionSelect} id="compare-a" label="First version" value=${a} set=${setA} versions=${versions} />
      <${VersionSelect} id="compare-b" label="Second version" value=${b} set=${setB} versions=${versions} />
    </div>
    ${names.length === 0
      ? html`<p class="muted">These versions have no metrics.</p>`
      : html`<${TableBox} label="Version comparison">
        <table>
          <caption>Final metrics of v${a} and v${b}</caption>
          <thead><tr><th scope="col">Metric</th><th scope="col" class="num">v${a}</th><th scope="col" class="num">v${b}</th><th scope="col" class="num">Change</th></tr></thead>
          <tbody>
            ${names.map((name) => {
              const x = first?.metrics?.[name];
              const y = second?.metrics?.[name];
              const change = typeof x === "number" && typeof y === "number" ? y - x : null;
              return html`<tr><th scope="row">${name}</th><td class="num">${metric(x)}</td><td class="num">${metric(y)}</td>
                <td class="num">${change === null ? "—" : `${change > 0 ? "+" : ""}${metric(change)}`}</td></tr>`;
            })}
          </tbody>
        </table>
      <//>`}
  </section>`;
}

function Alias({ model, versions, onDone }) {
  const [alias, setAlias] = useState("production");
  const [version, setVersion] = useState(versions[versions.length - 1].version);
  const [error, setError] = useState(null);
  const [done, setDone] = useState("");
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setDone("");
    try {
      await api(`/v1/models/${path(model, "aliases", alias.trim())}`, { method: "PUT", json: { version } });
      setDone(`${alias.trim()} now points at v${version}.`);
      onDone();
    } catch (caught) {
      setError(caught);
    }
  };
  return html`<section>
    <h2>Aliases</h2>
    <p>${versions.some((v) => v.aliases.length)
      ? aliasText(Object.fromEntries(versions.flatMap((v) => v.aliases.map((a) => [a, v.version]))))
      : "No aliases yet."}</p>
    <form class="inline" onSubmit=${submit}>
      <div class="field"><label for="alias-name">Alias</label>
        <input id="alias-name" value=${alias} onInput=${(e) => setAlias(e.currentTarget.value)} /></div>
      <${VersionSelect} id="alias-version" label="Version" value=${version} set=${setVersion} versions=${versions} />
      <button type="submit">Set alias</button>
    </form>
    <${ErrorNote} error=${error} />
    ${done && html`<p role="status">${done}</p>`}
  </section>`;
}

export function ModelPage({ name }) {
  useTitle(`Model ${name}`);
  const { data, error, reload } = useResource((signal) => api(`/v1/models/${path(name)}`, { signal }), [name]);
  if (!data) {
    const missing = error instanceof ApiError && error.status === 404;
    return html`<h1 tabindex="-1">${name}</h1>
      ${missing
        ? html`<p role="alert">There is no model ${name}. <a href=${href("models")}>All models</a></p>`
        : error
          ? html`<${ErrorNote} error=${error} />`
          : html`<${Loading} what="Loading the model" />`}`;
  }
  const versions = [...data.version_list].sort((a, b) => a.version - b.version);
  return html`<h1 tabindex="-1">${data.name}</h1>
    <p class="lead">${versions.length} ${versions.length === 1 ? "version" : "versions"}, the first registered ${when(data.created_at)}.</p>
    <section>
      <h2>Versions</h2>
      ${versions.length ? html`<${Versions} model=${data} />` : html`<p>No versions.</p>`}
    </section>
    ${versions.length > 0 && html`<${Compare} versions=${versions} />
      <${Alias} model=${data.name} versions=${versions} onDone=${reload} />`}`;
}
