// #/models: the caller's registered models.
import { api } from "../api.js";
import { ErrorNote, Loading, TableBox } from "../components.js";
import { when } from "../format.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { href } from "../router.js";

export const aliasText = (aliases) =>
  Object.entries(aliases || {})
    .map(([alias, version]) => `${alias} → v${version}`)
    .join(", ") || "—";

export function ModelsPage() {
  useTitle("Models");
  const { data, error, loading, reload } = useResource((signal) => api("/v1/models", { signal }), []);
  useInterval(reload, 10_000);
  return html`<h1 tabindex="-1">Models</h1>
    <p class="lead">A completed job that writes <code>$RESULT_DIR/model/</code> registers a new version of its model.</p>
    <${ErrorNote} error=${error} />
    ${loading && html`<${Loading} what="Loading models" />`}
    ${data && data.models.length === 0 && html`<p>No models yet.</p>`}
    ${data && data.models.length > 0 &&
    html`<${TableBox} label="Models table">
      <table>
        <caption>Your models</caption>
        <thead><tr>
          <th scope="col">Name</th><th scope="col" class="num">Versions</th><th scope="col" class="num">Latest</th>
          <th scope="col">Aliases</th><th scope="col">Created</th>
        </tr></thead>
        <tbody>
          ${data.models.map(
            (model) => html`<tr key=${model.name}>
              <th scope="row"><a href=${href("models", model.name)}>${model.name}</a></th>
              <td class="num">${model.versions}</td>
              <td class="num">${model.latest_version ? `v${model.latest_version}` : "—"}</td>
              <td>${aliasText(model.aliases)}</td>
              <td>${when(model.created_at)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    <//>`}`;
}
