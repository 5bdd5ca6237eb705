// A model version's factsheet (GET /v1/models/N/versions/V/factsheet) in the shapes its page
// shows: an evaluation's nested results as rows, settings as one line, the download names.
import { metric } from "./format.js";

const MAX_ROWS = 60; // an explanation of many features stays readable; the JSON has them all

/** `{a: {b: 1}, c: [1, 2]}` as `[["a · b", "1"], ["c", "1, 2"]]`, numbers as metrics, at most
 * MAX_ROWS rows (the last says how many more). */
export function flatten(value, prefix = "") {
  const rows = [];
  const walk = (found, path) => {
    if (found !== null && typeof found === "object" && !Array.isArray(found)) {
      const entries = Object.entries(found);
      if (entries.length === 0) rows.push([path || "—", "—"]);
      for (const [key, inner] of entries) walk(inner, path ? `${path} · ${key}` : key);
    } else {
      rows.push([path || "value", shown(found)]);
    }
  };
  walk(value, prefix);
  if (rows.length <= MAX_ROWS) return rows;
  return [...rows.slice(0, MAX_ROWS - 1), ["…", `${rows.length - MAX_ROWS + 1} more in the JSON`]];
}

function shown(value) {
  if (Array.isArray(value)) return value.length > 12 ? `${value.slice(0, 12).map(shown).join(", ")}, …` : value.map(shown).join(", ");
  if (value !== null && typeof value === "object") return JSON.stringify(value);
  return metric(value);
}

/** Settings (an environment, parameters, a lineage) on one line: "a=1, b=x"; "—" when empty. */
export function inline(value) {
  if (value === null || value === undefined || value === "") return "—";
  if (Array.isArray(value)) return value.length ? value.map(inline).join(", ") : "—";
  if (typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([k, v]) => `${k}=${typeof v === "object" && v !== null ? JSON.stringify(v) : v}`).join(", ") : "—";
  }
  return String(value);
}

/** Where the factsheet is, and the names its downloads take. */
export function factsheetFiles(name, version) {
  const url = `/v1/models/${encodeURIComponent(name)}/versions/${encodeURIComponent(version)}/factsheet`;
  const base = `${name}-v${version}-factsheet`.replace(/[^A-Za-z0-9._-]+/g, "-");
  return {
    json: { href: url, filename: `${base}.json` },
    markdown: { href: `${url}?format=markdown`, filename: `${base}.md` },
  };
}
