// #/submit: a job from a form (the manifest is built here) or from an uploaded manifest, with
// its code as a zip or a folder (zipped in the browser). The server's field errors are shown
// beside the field they name.
import { useState } from "preact/hooks";
import { ApiError, api } from "../api.js";
import { ErrorNote, Field } from "../components.js";
import { count } from "../format.js";
import { useTitle } from "../hooks.js";
import { html } from "../html.js";
import { formFieldOf, manifestYaml } from "../manifest.js";
import { go } from "../router.js";
import { zipFolder } from "../zip.js";

const FRAMEWORKS = ["pytorch", "tensorflow", "jax", "sklearn", "python", "horovod"];
const EMPTY = {
  name: "",
  framework: "pytorch",
  command: "",
  learners: "1",
  cpus: "1",
  gpus: "0",
  memory: "1GiB",
  store: { type: "", id: "data", data: "", results: "", path: "", endpoint: "", accessKey: "", secretKey: "", region: "" },
};

const bind = (value, set) => ({ value, onInput: (e) => set(e.currentTarget.value) });

function Text({ id, label, value, set, error, hint, type = "text", ...rest }) {
  return html`<${Field} id=${id} label=${label} error=${error} hint=${hint}>
    ${(aria) => html`<input type=${type} ...${aria} ...${rest} ...${bind(value, set)} />`}
  <//>`;
}

function DataStore({ store, set, error }) {
  const put = (key) => (value) => set({ ...store, [key]: value });
  const s3 = store.type === "s3_datastore";
  return html`<fieldset class="group">
    <legend>Data store (optional)</legend>
    ${error && html`<p class="field-error" id="store-error">${error}</p>`}
    <div class="grid">
      <${Field} id="store-type" label="Store type" error=${null}>
        ${(aria) => html`<select ...${aria} aria-describedby=${error ? "store-error" : undefined}
          value=${store.type} onChange=${(e) => put("type")(e.currentTarget.value)}>
          <option value="">None: the job's own folders</option>
          <option value="mount_volume">A folder on the host (mount_volume)</option>
          <option value="s3_datastore">An S3 bucket (s3_datastore)</option>
        </select>`}
      <//>
      ${store.type &&
      html`<${Text} id="store-data" label=${s3 ? "Data bucket" : "Data folder"} value=${store.data} set=${put("data")}
        hint=${s3 ? "" : "Under the host path; empty: the path itself"} />`}
      ${store.type === "mount_volume" &&
      html`<${Text} id="store-path" label="Host path" value=${store.path} set=${put("path")} placeholder="/data" />`}
      ${s3 &&
      html`<${Text} id="store-results" label="Results bucket" value=${store.results} set=${put("results")} />
        <${Text} id="store-endpoint" label="Endpoint URL" type="url" value=${store.endpoint} set=${put("endpoint")} />
        <${Text} id="store-access" label="Access key ID" value=${store.accessKey} set=${put("accessKey")} autocomplete="off" />
        <${Text} id="store-secret" label="Secret access key" type="password" value=${store.secretKey}
          set=${put("secretKey")} autocomplete="new-password" />
        <${Text} id="store-region" label="Region" value=${store.region} set=${put("region")} />`}
    </div>
  </fieldset>`;
}

/** The code: a zip, or a folder zipped here. Either input replaces the other's choice. */
function Code({ code, setCode, error }) {
  const aria = { "aria-invalid": error ? "true" : undefined, "aria-describedby": error ? "code-error code-hint" : "code-hint" };
  const pickZip = (e) => {
    const file = e.currentTarget.files[0];
    setCode(file ? { kind: "zip", file } : null);
    document.getElementById("code-folder").value = "";
  };
  const pickFolder = (e) => {
    const files = [...e.currentTarget.files];
    const name = files[0]?.webkitRelativePath.split("/")[0] || "";
    setCode(files.length ? { kind: "folder", files, name } : null);
    document.getElementById("code-zip").value = "";
  };
  return html`<fieldset class=${`group${error ? " invalid" : ""}`}>
    <legend>Code</legend>
    <div class="grid">
      <div class="field">
        <label for="code-zip">Code (zip)</label>
        <input id="code-zip" type="file" accept=".zip,application/zip" onChange=${pickZip} ...${aria} />
      </div>
      <div class="field">
        <label for="code-folder">Code (folder)</label>
        <input id="code-folder" type="file" webkitdirectory=${true} multiple=${true} onChange=${pickFolder} ...${aria} />
      </div>
    </div>
    <p class="hint" id="code-hint">
      ${code?.kind === "zip"
        ? `Sending ${code.file.name}.`
        : code?.kind === "folder"
          ? `Sending the folder ${code.name} (${count(code.files.length)} files), zipped here.`
          : "A zip of the code, or its folder. The command runs in it."}
    </p>
    ${error && html`<p class="field-error" id="code-error">${error}</p>`}
  </fieldset>`;
}

function FormFields({ form, setForm, errors }) {
  const put = (key) => (value) => setForm({ ...form, [key]: value });
  return html`<div class="grid">
      <${Text} id="job-name" label="Name" value=${form.name} set=${put("name")} error=${errors.name} required />
      <${Field} id="job-framework" label="Framework" error=${errors.framework}>
        ${(aria) => html`<select ...${aria} value=${form.framework} onChange=${(e) => put("framework")(e.currentTarget.value)}>
          ${FRAMEWORKS.map((name) => html`<option value=${name}>${name}</option>`)}
        </select>`}
      <//>
    </div>
    <${Field} id="job-command" label="Command" error=${errors.command} hint="Run in the code's folder, e.g. python train.py --epochs 10">
      ${(aria) => html`<textarea ...${aria} rows="2" required ...${bind(form.command, put("command"))}></textarea>`}
    <//>
    <div class="grid">
      <${Text} id="job-learners" label="Learners" type="number" min="1" step="1" inputmode="numeric"
        value=${form.learners} set=${put("learners")} error=${errors.learners} />
      <${Text} id="job-cpus" label="CPUs" type="number" min="0" step="any" inputmode="decimal"
        value=${form.cpus} set=${put("cpus")} error=${errors.cpus} hint="Per learner" />
      <${Text} id="job-gpus" label="GPUs" type="number" min="0" step="1" inputmode="numeric"
        value=${form.gpus} set=${put("gpus")} error=${errors.gpus} hint="Per learner" />
      <${Text} id="job-memory" label="Memory" value=${form.memory} set=${put("memory")} error=${errors.memory}
        hint="Per learner, e.g. 2GiB or 512MB" />
    </div>
    <${DataStore} store=${form.store} set=${put("store")} error=${errors.store} />`;
}

function ManifestFile({ setManifest, problems }) {
  const invalid = problems.length > 0;
  return html`<div class=${`field${invalid ? " invalid" : ""}`}>
    <label for="manifest-file">Manifest</label>
    <input id="manifest-file" type="file" accept=".yml,.yaml,application/yaml,text/yaml"
      onChange=${(e) => setManifest(e.currentTarget.files[0] || null)}
      aria-invalid=${invalid ? "true" : undefined}
      aria-describedby=${invalid ? "manifest-hint manifest-errors" : "manifest-hint"} />
    <p class="hint" id="manifest-hint">An FfDL-format manifest.yml (see docs/manifest.md).</p>
    ${invalid &&
    html`<ul class="field-error" id="manifest-errors">
      ${problems.map((p) => html`<li>${p.field ? html`<code>${p.field}</code>: ` : ""}${p.message}</li>`)}
    </ul>`}
  </div>`;
}

async function send(manifestBlob, code) {
  const body = new FormData();
  body.append("manifest", manifestBlob, "manifest.yml");
  if (code) {
    const zipped = code.kind === "zip" ? code.file : await zipFolder(code.files);
    body.append("model_definition", zipped, "model.zip");
  }
  return api("/v1/jobs", { method: "POST", body });
}

export function SubmitPage() {
  useTitle("Submit a job");
  const [mode, setMode] = useState("form");
  const [form, setForm] = useState(EMPTY);
  const [manifest, setManifest] = useState(null);
  const [code, setCode] = useState(null);
  const [errors, setErrors] = useState({});
  const [problems, setProblems] = useState([]);
  const [general, setGeneral] = useState(null);
  const [busy, setBusy] = useState("");

  const fail = (error) => {
    const field = error instanceof ApiError ? error.field : "";
    const where = error instanceof ApiError ? formFieldOf(field, error.code) : "";
    if (where === "code") setErrors({ code: error.message });
    else if (field && mode === "upload") setProblems([{ field, message: error.message }]);
    else if (where && mode === "form") setErrors({ [where]: error.message });
    else setGeneral(error);
    requestAnimationFrame(() => document.querySelector("form [aria-invalid=true]")?.focus());
  };

  const submit = async (event) => {
    event.preventDefault();
    setErrors({});
    setProblems([]);
    setGeneral(null);
    let text;
    if (mode === "form") text = new Blob([manifestYaml(form)], { type: "application/yaml" });
    else if (manifest) text = manifest;
    else return fail(new ApiError(400, { error: "Choose a manifest file", field: "manifest" }));
    setBusy(code?.kind === "folder" ? "Zipping the folder and sending…" : "Sending…");
    try {
      const created = await send(text, code);
      go("jobs", created.id);
    } catch (error) {
      fail(error);
      setBusy("");
    }
  };

  return html`<h1 tabindex="-1">Submit a job</h1>
    <form class="submit" onSubmit=${submit} novalidate>
      <fieldset class="modes">
        <legend>Describe the job with</legend>
        ${[["form", "Form"], ["upload", "Upload"]].map(
          ([value, label]) => html`<label class="check"><input type="radio" name="mode" value=${value}
            checked=${mode === value} onChange=${() => setMode(value)} /> ${label}</label>`,
        )}
      </fieldset>
      ${mode === "form"
        ? html`<${FormFields} form=${form} setForm=${setForm} errors=${errors} />`
        : html`<${ManifestFile} setManifest=${setManifest} problems=${problems} />`}
      <${Code} code=${code} setCode=${setCode} error=${errors.code} />
      <${ErrorNote} error=${general} />
      <div class="actions">
        <button type="submit" class="primary" disabled=${Boolean(busy)}>Submit</button>
        ${busy && html`<span role="status">${busy}</span>`}
      </div>
    </form>`;
}
