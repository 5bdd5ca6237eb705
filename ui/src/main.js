// The page: a header with the user and the navigation, and the page the hash names.
import "./style.css";
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, me, onSignedOut, token } from "./api.js";
import { html } from "./html.js";
import { href, useRoute } from "./router.js";
import { SignIn } from "./pages/signin.js";
import { JobsPage } from "./pages/jobs.js";
import { JobPage } from "./pages/job.js";
import { SubmitPage } from "./pages/submit.js";
import { RunsPage } from "./pages/runs.js";
import { RunPage } from "./pages/run.js";
import { ComparePage } from "./pages/compare.js";
import { ModelsPage } from "./pages/models.js";
import { ModelPage } from "./pages/model.js";
import { VersionPage } from "./pages/version.js";
import { DeploymentsPage } from "./pages/deployments.js";
import { DeploymentPage } from "./pages/deployment.js";
import { ExperimentsPage } from "./pages/experiments.js";
import { ExperimentPage } from "./pages/experiment.js";
import { PipelinesPage } from "./pages/pipelines.js";
import { PipelinePage } from "./pages/pipeline.js";
import { CapacityPage } from "./pages/capacity.js";
import { UsersPage } from "./pages/users.js";

const NAV = [
  ["jobs", "Jobs"],
  ["submit", "Submit"],
  ["runs", "Runs"],
  ["models", "Models"],
  ["deployments", "Deployments"],
  ["experiments", "Experiments"],
  ["pipelines", "Pipelines"],
  ["capacity", "Capacity"],
  ["users", "Users", { admin: true }],
];

const PAGES = {
  jobs: ({ user }) => html`<${JobsPage} user=${user} />`,
  submit: () => html`<${SubmitPage} />`,
  runs: ({ param }) => (param ? html`<${RunPage} id=${param} />` : html`<${RunsPage} />`),
  compare: ({ param }) => html`<${ComparePage} ids=${param} />`,
  models: ({ param, ref }) =>
    ref
      ? html`<${VersionPage} name=${param} version=${ref} />`
      : param
        ? html`<${ModelPage} name=${param} />`
        : html`<${ModelsPage} />`,
  deployments: ({ param }) =>
    param ? html`<${DeploymentPage} name=${param} />` : html`<${DeploymentsPage} />`,
  experiments: ({ param }) =>
    param ? html`<${ExperimentPage} name=${param} />` : html`<${ExperimentsPage} />`,
  pipelines: ({ param }) => (param ? html`<${PipelinePage} id=${param} />` : html`<${PipelinesPage} />`),
  capacity: ({ user }) => html`<${CapacityPage} user=${user} />`,
  users: ({ user }) => html`<${UsersPage} user=${user} />`,
};

function Missing() {
  return html`<h1 tabindex="-1">Page not found</h1>
    <p>Nothing lives at this address. Go to the <a href=${href("jobs")}>jobs</a>.</p>`;
}

function Header({ user, route, onSignOut }) {
  return html`<header class="top">
    <a class="brand" href=${href("jobs")}>Loom</a>
    ${user &&
    html`<nav aria-label="Main">
        <ul>
          ${NAV.filter(([, , only]) => !only?.admin || user.admin).map(
            ([page, label]) => html`<li>
              <a href=${href(page)} aria-current=${route.page === page ? "page" : undefined}>${label}</a>
            </li>`,
          )}
        </ul>
      </nav>
      <div class="who">
        <span>${user.name} · ${user.admin ? "admin" : "user"}</span>
        <button type="button" onClick=${onSignOut}>Sign out</button>
      </div>`}
  </header>`;
}

function skipToMain(event) {
  event.preventDefault(); // the hash is the route: move focus without touching it
  document.getElementById("main")?.focus();
}

function App() {
  const route = useRoute();
  // The user as last seen with this token draws the page at once; /v1/me confirms it.
  const [user, setUser] = useState(me.get);
  const [checking, setChecking] = useState(Boolean(token.get()) && !me.get());
  const [notice, setNotice] = useState("");
  const first = useRef(true);

  useEffect(() => {
    onSignedOut(() => {
      token.clear();
      setUser(null);
      setNotice("Your token is no longer accepted. Sign in again.");
    });
    if (!token.get()) return;
    api("/v1/me")
      .then((found) => {
        me.set(found);
        setUser(found);
      })
      .catch((error) => setNotice(error.status === 401 ? "" : `Loom did not answer: ${error.message}`))
      .finally(() => setChecking(false));
  }, []);

  // A new page: its heading takes the focus (screen readers hear where they are).
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    requestAnimationFrame(() => document.querySelector("main h1")?.focus());
  }, [route.key, Boolean(user)]);

  const signOut = () => {
    token.clear();
    setUser(null);
    setNotice("You are signed out.");
  };
  const signedIn = (found) => {
    setNotice("");
    me.set(found);
    setUser(found);
  };

  let page;
  if (checking) page = html`<p class="muted" role="status">Signing in…</p>`;
  else if (!user) page = html`<${SignIn} onSignedIn=${signedIn} notice=${notice} />`;
  else if (route.page === "jobs" && route.param) page = html`<${JobPage} id=${route.param} user=${user} />`;
  else page = (PAGES[route.page] || Missing)({ user, param: route.param, ref: route.ref });

  return html`<a class="skip" href="#main" onClick=${skipToMain}>Skip to content</a>
    <${Header} user=${user} route=${route} onSignOut=${signOut} />
    <main id="main" tabindex="-1" key=${user ? route.key : "signin"}>${page}</main>`;
}

const root = document.getElementById("app");
root.textContent = ""; // the "Loading…" line the HTML shows until the script runs
render(html`<${App} />`, root);
