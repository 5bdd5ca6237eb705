// #/users (admins): the platform's users with their role, quota and running jobs; a user
// added (their token shown this once), a quota changed, a user deleted.
import { useRef, useState } from "preact/hooks";
import { api, path, query } from "../api.js";
import { ConfirmDialog, ErrorNote, Field, Loading, TableBox } from "../components.js";
import { count, when } from "../format.js";
import { useInterval, useResource, useTitle } from "../hooks.js";
import { html } from "../html.js";
import { RUNNING } from "../states.js";

const REFRESH_MS = 10_000;

/** A quota field as the form shows it: "" is the platform's default (null). */
const shown = (value) => (value === null || value === undefined ? "" : String(value));

/**
 * The quota the API takes from the form's text: numbers, null where empty. Returns
 * { quota } or { errors: { field: message } }.
 */
export function quotaOf(form, maxPriority = null) {
  const errors = {};
  const quota = { max_priority: maxPriority };
  const rules = {
    cpus: [(n) => n > 0, "More than 0 (fractions allowed), or empty for the default"],
    gpus: [(n) => Number.isInteger(n) && n >= 0, "A whole number, 0 or more, or empty for the default"],
    jobs: [(n) => Number.isInteger(n) && n >= 0, "A whole number, 0 or more, or empty for the default"],
    max_priority: [(n) => Number.isInteger(n), "A whole number, or empty for the default"],
  };
  for (const [field, [ok, message]] of Object.entries(rules)) {
    if (!(field in form)) continue;
    const text = String(form[field] ?? "").trim();
    if (text === "") {
      quota[field] = null;
      continue;
    }
    const n = Number(text);
    if (!Number.isFinite(n) || !ok(n)) errors[field] = message;
    else quota[field] = n;
  }
  return Object.keys(errors).length ? { errors } : { quota };
}

function QuotaForm({ user, onSaved }) {
  const start = () => ({
    cpus: shown(user.quota.cpus),
    gpus: shown(user.quota.gpus),
    jobs: shown(user.quota.jobs),
    max_priority: shown(user.quota.max_priority),
  });
  const [form, setForm] = useState(start);
  const [errors, setErrors] = useState({});
  const [error, setError] = useState(null);
  const [done, setDone] = useState("");
  const [busy, setBusy] = useState(false);
  const id = `quota-${user.name}`;
  const set = (field) => (e) => {
    setForm({ ...form, [field]: e.currentTarget.value });
    setDone("");
  };
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setDone("");
    const { quota, errors: found } = quotaOf(form);
    setErrors(found || {});
    if (found) return;
    setBusy(true);
    try {
      await api(`/v1/users/${path(user.name)}`, { method: "PATCH", json: { quota } });
      setDone("Saved.");
      onSaved();
    } catch (caught) {
      if (caught.field?.startsWith("quota.")) setErrors({ [caught.field.slice(6)]: caught.message });
      else setError(caught);
    } finally {
      setBusy(false);
    }
  };
  const input = (field, label, attrs) => html`<${Field} id=${`${id}-${field}`} label=${label} error=${errors[field]}>
    ${(a) => html`<input ...${a} ...${attrs} value=${form[field]} onInput=${set(field)} placeholder="default"
      inputmode=${field === "cpus" ? "decimal" : "numeric"} autocomplete="off" />`}
  <//>`;
  return html`<form class="inline quota" onSubmit=${submit} aria-label=${`Quota of ${user.name}`} novalidate>
    ${input("cpus", "CPUs", { type: "text" })}
    ${input("gpus", "GPUs", { type: "text" })}
    ${input("jobs", "Jobs", { type: "text" })}
    ${input("max_priority", "Highest priority", { type: "text" })}
    <button type="submit" disabled=${busy}>Save quota</button>
    ${done && html`<span role="status" class="saved">${done}</span>`}
    <${ErrorNote} error=${error} />
  </form>`;
}

function AddUser({ onAdded }) {
  const [name, setName] = useState("");
  const [admin, setAdmin] = useState(false);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const [made, setMade] = useState(null);
  const [copied, setCopied] = useState("");
  const tokenRef = useRef(null);
  const submit = async (event) => {
    event.preventDefault();
    setError("");
    if (!name.trim()) return setError("Enter a name");
    setBusy(true);
    try {
      const answer = await api("/v1/users", { method: "POST", json: { name: name.trim(), admin } });
      setMade(answer);
      setCopied("");
      setName("");
      setAdmin(false);
      onAdded();
      requestAnimationFrame(() => document.getElementById("new-token-title")?.focus());
    } catch (caught) {
      setError(caught.message);
    } finally {
      setBusy(false);
    }
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(made.token);
      setCopied("Copied.");
    } catch {
      // No clipboard (an insecure page, or refused): select the token for Ctrl+C.
      const range = document.createRange();
      range.selectNodeContents(tokenRef.current);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      setCopied("Selected: press Ctrl+C (⌘C) to copy it.");
    }
  };
  return html`<section>
    <h2>Add a user</h2>
    <form class="inline" onSubmit=${submit} aria-label="Add a user" novalidate>
      <${Field} id="new-user-name" label="User name" error=${error}
        hint="Letters, digits, and . _ - (as the API takes them).">
        ${(attrs) => html`<input ...${attrs} value=${name} onInput=${(e) => setName(e.currentTarget.value)}
          autocomplete="off" autocapitalize="off" spellcheck="false" required />`}
      <//>
      <label class="check"><input type="checkbox" checked=${admin} onChange=${(e) => setAdmin(e.currentTarget.checked)} /> Administrator</label>
      <button type="submit" class="primary" disabled=${busy}>Add user</button>
    </form>
    ${made &&
    html`<div class="new-token" role="region" aria-labelledby="new-token-title">
      <h3 id="new-token-title" tabindex="-1">${made.name}'s token</h3>
      <p class="notice"><strong>Copy it now: it will not be shown again.</strong> Loom keeps only a hash of it.
        Give it to ${made.name}; it expires ${when(made.expires_at)}.</p>
      <p><code class="url token" ref=${tokenRef}>${made.token}</code></p>
      <div class="actions">
        <button type="button" onClick=${copy}>Copy token</button>
        <button type="button" onClick=${() => setMade(null)}>Done</button>
        <span role="status">${copied}</span>
      </div>
    </div>`}
  </section>`;
}

function DeleteUser({ user, me, onDone }) {
  const [asking, setAsking] = useState(false);
  const [force, setForce] = useState(false);
  const remove = async () => {
    await api(`/v1/users/${path(user.name)}${query({ force: force ? "true" : "" })}`, { method: "DELETE" });
    onDone();
  };
  return html`<button type="button" class="danger small" onClick=${() => setAsking(true)} disabled=${user.name === me}
      aria-label=${`Delete ${user.name}`}>Delete</button>
    ${asking &&
    html`<${ConfirmDialog} title=${`Delete ${user.name}?`} onConfirm=${remove} onClose=${() => { setAsking(false); setForce(false); }}>
      <p>Their jobs, models and deployments are removed and their tokens stop working at once. This cannot be undone.</p>
      <label class="check"><input type="checkbox" checked=${force} onChange=${(e) => setForce(e.currentTarget.checked)} />
        Stop their running jobs and deployments first</label>
    <//>`}`;
}

export function UsersPage({ user: me }) {
  useTitle("Users");
  if (!me.admin) {
    return html`<h1 tabindex="-1">Users</h1>
      <p role="alert">Only admins can see users.</p>`;
  }
  return html`<${Users} me=${me} />`;
}

function Users({ me }) {
  const { data, error, loading, reload } = useResource(async (signal) => {
    const states = [...RUNNING, "QUEUED"];
    const [users, jobs] = await Promise.all([
      api("/v1/users", { signal }),
      api(`/v1/jobs${query({ state: states, all: "true", limit: 500 })}`, { signal }),
    ]);
    const usage = {};
    for (const job of jobs.jobs) {
      const mine = (usage[job.owner] ||= { running: 0, queued: 0 });
      if (job.state === "QUEUED") mine.queued += 1;
      else mine.running += 1;
    }
    return { users: users.users, usage, exact: jobs.total <= jobs.jobs.length };
  }, []);
  useInterval(reload, REFRESH_MS);
  return html`<h1 tabindex="-1">Users</h1>
    <p class="lead">Each user's quota limits their running jobs; an empty field is the platform's default.</p>
    <${ErrorNote} error=${error} />
    ${loading && html`<${Loading} what="Loading users" />`}
    ${data &&
    html`<${TableBox} label="Users table">
      <table class="users">
        <caption>Users, their quota and their jobs now</caption>
        <thead><tr>
          <th scope="col">Name</th><th scope="col">Quota</th><th scope="col">Role</th>
          <th scope="col">Jobs now</th><th scope="col">Created</th><th scope="col">Delete</th>
        </tr></thead>
        <tbody>
          ${data.users.map((u) => {
            const use = data.usage[u.name] || { running: 0, queued: 0 };
            return html`<tr key=${u.id}>
              <th scope="row">${u.name}${u.name === me.name && html`<div class="reason">you</div>`}</th>
              <td><${QuotaForm} key=${u.id} user=${u} onSaved=${reload} /></td>
              <td>${u.admin ? "admin" : "user"}</td>
              <td>${count(use.running)} running, ${count(use.queued)} queued${!data.exact && "+"}</td>
              <td>${when(u.created_at)}</td>
              <td><${DeleteUser} user=${u} me=${me.name} onDone=${reload} /></td>
            </tr>`;
          })}
        </tbody>
      </table>
    <//>`}
    <${AddUser} onAdded=${reload} />`;
}
