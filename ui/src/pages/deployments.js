// #/deployments: the caller's deployments, refreshed every 2 s.
import { api } from "../api.js";
import { Badge, ErrorNote, Loading, TableBox } from "../components.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";

export const REFRESH_MS = 2000;

export function versionText(d) {
  const served = d.serving_version ?? d.model_version;
  const canary = d.canary ? ` (canary v${d.canary.version} at ${d.canary.percent}%)` : "";
  return `v${served}${canary}`;
}

export function DeploymentsPage() {
  useTitle("Deployments");
  const { data, error, loading, reload } = useResource((signal) => api("/v1/deployments", { signal }), []);
  useInterval(reload, REFRESH_MS);
  return html`<h1 tabindex="-1">Deployments</h1>
    <p class="lead">Deploy a model version from its <a href=${href("models")}>model's page</a>.</p>
    <${ErrorNote} error=${error} />
    ${loading && html`<${Loading} what="Loading deployments" />`}
    ${data && data.deployments.length === 0 && html`<p>No deployments yet.</p>`}
    ${data && data.deployments.length > 0 &&
    html`<${TableBox} label="Deployments table">
      <table>
        <caption>Your deployments</caption>
        <thead><tr>
          <th scope="col">Name</th><th scope="col">Model</th><th scope="col">Version</th><th scope="col">State</th>
          <th scope="col" class="num">Replicas ready/desired</th><th scope="col">Endpoint</th>
        </tr></thead>
        <tbody>
          ${data.deployments.map(
            (d) => html`<tr key=${d.name}>
              <th scope="row"><a href=${href("deployments", d.name)}>${d.name}</a></th>
              <td><a href=${href("models", d.model)}>${d.model}</a></td>
              <td>${versionText(d)}</td>
              <td><${Badge} state=${d.state} /></td>
              <td class="num">${d.replicas.ready}/${d.replicas.desired}</td>
              <td><code class="url">${d.urls?.v2_infer || d.endpoint}</code></td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>`}`;
}
