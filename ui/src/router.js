// Hash routes: #/jobs, #/jobs/<id>, #/submit, #/runs, #/runs/<id>, #/compare/<id>,<id>…,
// #/models, #/models/<name>, #/models/<name>/versions/<ref> (a version's factsheet), #/deployments, #/deployments/<name>, #/experiments,
// #/experiments/<name>, #/pipelines, #/pipelines/<run id>, #/capacity, #/users. The page is
// served from one URL, so the hash is the whole state. MLflow's client prints links to its own
// UI's run pages (#/experiments/<n>/runs/<id>): they open the run here.
import { useEffect, useState } from "preact/hooks";

const PAGES = new Set([
  "jobs",
  "submit",
  "runs",
  "compare",
  "models",
  "deployments",
  "experiments",
  "pipelines",
  "capacity",
  "users",
]);
// Pages that take no parameter.
const SINGLE = new Set(["submit", "capacity", "users"]);

export function parse(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  let decoded;
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    return { page: "missing", param: null, key: hash };
  }
  const [page = "jobs", param = null, ...rest] = decoded;
  if (page === "experiments" && rest.length === 2 && rest[0] === "runs") {
    return { page: "runs", param: rest[1], key: `runs/${rest[1]}` };
  }
  if (page === "models" && param && rest.length === 2 && rest[0] === "versions") {
    return { page, param, ref: rest[1], key: `models/${param}/versions/${rest[1]}` };
  }
  if (!PAGES.has(page) || rest.length > 0 || (SINGLE.has(page) && param)) {
    return { page: "missing", param: null, key: hash };
  }
  return { page, param, key: `${page}/${param ?? ""}` };
}

export const href = (...parts) => `#/${parts.map((p) => encodeURIComponent(p)).join("/")}`;

export function go(...parts) {
  location.hash = href(...parts);
}

export function useRoute() {
  const [route, setRoute] = useState(() => parse(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parse(location.hash));
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}
