// How times, durations and numbers are shown: local times, "1 m 05 s", "10,000+".

const numbers = new Intl.NumberFormat("en-US");

export const count = (n) => numbers.format(n);

/** "1 CPU", "2 CPUs". */
export const plural = (n, word) => `${count(n)} ${word}${n === 1 ? "" : "s"}`;

export function total(page) {
  return page.total_exact === false ? `${count(page.total)}+` : count(page.total);
}

const toMs = (at) => (typeof at === "number" ? at * 1000 : Date.parse(at));

/** A local date and time, or "—". `at` is ISO-8601 or epoch seconds. */
export function when(at) {
  if (at === null || at === undefined || at === "") return "—";
  const ms = toMs(at);
  return Number.isNaN(ms) ? String(at) : new Date(ms).toLocaleString();
}

export function clock(at) {
  const ms = toMs(at);
  return Number.isNaN(ms) ? "" : new Date(ms).toLocaleTimeString();
}

const pad = (n) => String(n).padStart(2, "0");

/** "45 s", "1 m 05 s", "2 h 03 m", "3 d 04 h". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} m ${pad(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${pad(Math.floor((s % 3600) / 60))} m`;
  return `${Math.floor(s / 86400)} d ${pad(Math.floor((s % 86400) / 3600))} h`;
}

/** How long a job ran (or has run so far); "—" before it started. */
export function ran(job, now = Date.now()) {
  if (!job.started_at) return "—";
  const end = job.finished_at ? toMs(job.finished_at) : now;
  return duration((end - toMs(job.started_at)) / 1000);
}

/** A metric value: at most 4 significant digits past the point, no trailing noise. */
export function metric(value) {
  if (typeof value !== "number") return value === null || value === undefined ? "—" : String(value);
  if (Number.isInteger(value)) return count(value);
  const abs = Math.abs(value);
  return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(3) : String(+value.toPrecision(4));
}

/** JSON indented by two, each array of plain values on one line (a tensor's data, a shape). */
const PLAIN_ARRAY = /\[\n(?:[ ]*(?:-?[\d.eE+-]+|true|false|null|"(?:[^"\\\n]|\\.)*"),?\n)+[ ]*\]/g;

export function json(value) {
  return JSON.stringify(value, null, 2).replace(PLAIN_ARRAY, (array) =>
    `[${array.slice(1, -1).trim().split(/,?\n[ ]*/).join(", ")}]`,
  );
}

export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}
