// Hash routes: #/jobs, #/jobs/<id>, #/submit, #/models, #/models/<name>, #/deployments,
// #/deployments/<name>, #/experiments, #/experiments/<name>, #/pipelines, #/pipelines/<run id>,
// #/capacity, #/users. The page is served from one URL, so the hash is the whole state.
import { useEffect, useState } from "preact/hooks";

const PAGES = new Set([
  "jobs",
  "submit",
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
