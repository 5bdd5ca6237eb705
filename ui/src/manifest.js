// The manifest the submit form builds: FfDL's YAML (docs/manifest.md). Every string is written
// JSON-quoted, which YAML reads as the same string, so no value can change the structure.

const quoted = (value) => JSON.stringify(String(value));

/** A number as typed, or the text itself (quoted) so the server names what is wrong. */
function scalar(text) {
  const trimmed = String(text).trim();
  return /^-?\d+(\.\d+)?$/.test(trimmed) ? trimmed : quoted(trimmed);
}

function dataStore(store) {
  if (!store.type) return [];
  const lines = ["data_stores:", `  - id: ${quoted(store.id || "data")}`, `    type: ${quoted(store.type)}`];
  if (store.data) lines.push("    training_data:", `      container: ${quoted(store.data)}`);
  if (store.results) lines.push("    training_results:", `      container: ${quoted(store.results)}`);
  const connection =
    store.type === "mount_volume"
      ? { type: "host_mount", path: store.path }
      : { auth_url: store.endpoint, user_name: store.accessKey, password: store.secretKey, region: store.region };
  const given = Object.entries(connection).filter(([, v]) => v);
  if (given.length) {
    lines.push("    connection:");
    for (const [key, value] of given) lines.push(`      ${key}: ${quoted(value)}`);
  }
  return lines;
}

/** The manifest YAML of the form's values; empty optional fields are left out. */
export function manifestYaml(form) {
  const lines = [`name: ${quoted(form.name.trim())}`, `version: "1.0"`];
  for (const key of ["learners", "cpus", "gpus"]) {
    if (String(form[key]).trim() !== "") lines.push(`${key}: ${scalar(form[key])}`);
  }
  if (form.memory.trim()) lines.push(`memory: ${quoted(form.memory.trim())}`);
  lines.push("framework:", `  name: ${quoted(form.framework)}`, `  command: ${quoted(form.command.trim())}`);
  lines.push(...dataStore(form.store));
  return `${lines.join("\n")}\n`;
}

/** Which form field an error's `field` path (`framework.command`, `data_stores.0.type`) is about. */
export function formFieldOf(field, code) {
  if (code === "C102" || field === "model_definition") return "code";
  if (!field) return "";
  const [head, next] = field.split(".");
  if (head === "framework") return next === "name" || next === "version" ? "framework" : "command";
  if (head === "data_stores") return "store";
  if (["name", "learners", "cpus", "gpus", "memory"].includes(head)) return head;
  return "";
}
