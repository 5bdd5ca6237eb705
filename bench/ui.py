"""The jobs page over 10,000 jobs beside MLflow's runs page over 10,000 runs, in a real browser.

Loom: a throw-away LOOM_HOME whose database gets 10,000 of the admin's jobs (mostly COMPLETED,
some FAILED, QUEUED, PROCESSING) straight into its tables, as bench/scale.py fills them, behind
the real server (`python -m loom.api`, the fake launcher: nothing runs), and its page `/ui/#/jobs`
signed in as the admin. MLflow (bench/mlflow_peer.py's version, in its own venv): a tracking
server on SQLite with one experiment of 10,000 runs of the same names and states, each with 3
params and 2 metrics (written by bench/ui_mlflow_fill.py), and its page `#/experiments/<id>/runs`.

Each visit is a fresh browser context (an empty cache) in Debian's Chromium, driven by
Playwright. "First row" is the time from the navigation's start to the first animation frame in
which the newest job's (run's) name link is in the table and visible: the page itself reads
`performance.now()` in that frame. "Load" is the page's `load` event; the bytes and requests are
those of the resource timing API that had ended by the first row. For Loom also: from a click on
"Next page" to the frame showing page 2, and from typing a name filter to the frame showing only
matching jobs (this one includes the page's wait for typing to pause).

    python bench/ui.py [--jobs 10000] [--runs 5] [--skip-mlflow] [--waterfall]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mlflow_peer import MLFLOW, QUIET, VERSION, stop, wait_health
from peers import free_port, peer_python, table
from scale import add_jobs, job_row

from loom.store import users as user_rows
from loom.store.db import Database

FILL = Path(__file__).resolve().parent / "ui_mlflow_fill.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1440, "height": 900}
WAIT_MS = 60_000
SERVER_CPU, BROWSER_CPU = 0, 1
CAN_PIN = bool(shutil.which("taskset")) and {SERVER_CPU, BROWSER_CPU} <= os.sched_getaffinity(0)
MODELS = ("resnet50-imagenet", "bert-base-squad", "gpt2-small-owt", "vit-b16-cifar",
          "t5-small-xsum", "llama-7b-lora", "whisper-tiny-en", "unet-carvana")  # fmt: skip
FILTER = "bert"  # one name in 8
STATES = {0: "FAILED", 1: "FAILED", 2: "QUEUED", 3: "PROCESSING"}  # by n % 20, else COMPLETED

# In the page, every animation frame: the time at the first frame in which a link of `selector`
# reads `text` and is visible, with how many rows the table shows then (their names, told apart).
FIRST_ROW = """([selector, text]) => {
  const links = [...document.querySelectorAll(selector)];
  if (!links.some((a) => a.textContent.trim() === text && a.checkVisibility())) return false;
  return [performance.now(), new Set(links.map((a) => a.textContent.trim())).size];
}"""
# What the network had delivered by `t` (ms): requests, bytes on the wire (headers included),
# and when the last call for the list (a URL holding `api`) had ended; with the `load` event.
NETWORK = """([t, api]) => {
  const entries = performance.getEntriesByType("navigation")
    .concat(performance.getEntriesByType("resource")).filter((e) => e.responseEnd <= t);
  const calls = entries.filter((e) => e.name.includes(api)).map((e) => e.responseEnd);
  const load = performance.getEntriesByType("navigation")[0].loadEventStart;
  const sent = entries.reduce((sum, e) => sum + e.transferSize, 0);
  return [entries.length, sent, calls.length ? Math.max(...calls) : NaN, load];
}"""
WATERFALL = """() => performance.getEntriesByType("navigation")
  .concat(performance.getEntriesByType("resource"))
  .map((e) => [e.name, e.startTime, e.responseStart, e.responseEnd, e.transferSize])"""
LOOM_LINKS = "table tbody tr th a"
MLFLOW_LINKS = ".ag-row a"


@dataclass
class Site:
    """One system's page: where it is, what its first row shows, what else to time there."""

    name: str
    url: str
    links: str  # CSS selector of the rows' name links, one a row
    api: str  # what the URL of the call that fetches the list holds
    newest: str  # the name the first row shows
    token: str = ""  # Loom's, put where the page looks for it before it loads
    extra: Callable[[Page], dict[str, float]] | None = None
    found: dict[str, list[float]] = field(default_factory=dict)
    waterfall: list[list[Any]] = field(default_factory=list)  # [url, start, first byte, end, size]


# -- what both get -------------------------------------------------------------------------------


def plan(jobs: int) -> list[dict[str, object]]:
    """The jobs (runs), oldest first: one a minute up to now."""
    now = time.time()
    return [
        {
            "name": f"{MODELS[n % len(MODELS)]}-{n:05d}",
            "state": STATES.get(n % 20, "COMPLETED"),
            "at": now - (jobs - n) * 60.0,
        }
        for n in range(1, jobs + 1)
    ]


def pinned(cpu: int, pin: bool) -> list[str]:
    return ["taskset", "-c", str(cpu)] if pin else []


# -- Loom ----------------------------------------------------------------------------------------


@contextmanager
def loom(home: Path, planned: list[dict[str, object]], pin: bool) -> Iterator[Site]:
    home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    env = {**os.environ, "LOOM_HOME": str(home), "LOOM_ADMIN_TOKEN": token}
    env |= {"LOOM_ISOLATION": "off", "LOOM_LAUNCHER": "fake"}
    env |= {"LOOM_RATE_PER_S": "1000000", "LOOM_RATE_BURST": "1000000"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = home.parent / "loom-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*pinned(SERVER_CPU, pin), sys.executable, "-m", "loom.api", "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_ready(base, server, log)
        began = time.perf_counter()
        fill_loom(f"sqlite:///{home / 'loom.db'}", planned)
        note(f"Loom: {len(planned):,} jobs stored in {time.perf_counter() - began:.1f} s")
        page = httpx.get(f"{base}/ui/", timeout=10)
        if page.status_code != 200:
            raise RuntimeError(f"GET /ui/ answered {page.status_code}: cd ui && node build.mjs")
        newest = str(planned[-1]["name"])
        url = f"{base}/ui/#/jobs"
        yield Site("Loom", url, LOOM_LINKS, "/v1/jobs?", newest, token, loom_extra)
    finally:
        stop(server)


def wait_ready(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Loom server exited ({server.returncode}):\n{tail}")
        try:
            if httpx.get(f"{base}/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the Loom server was not ready in 60 s")


def fill_loom(url: str, planned: list[dict[str, object]]) -> None:
    """The jobs, all the admin's (the bootstrap user the server made at its first start)."""
    db = Database(url)
    try:
        with db.session() as session:
            admin = user_rows.user_by_name(session, "admin")
            assert admin is not None, "the server made no admin"
            owner = admin.id
        rows = []
        for n, job in enumerate(planned, start=1):
            row = job_row(n, owner, str(job["state"]), float(job["at"]))  # type: ignore[arg-type]
            row["name"] = job["name"]
            if job["state"] == "PROCESSING":
                row["finished_at"] = None
            rows.append(row)
        add_jobs(db, rows)
    finally:
        db.close()


def loom_extra(page: Page) -> dict[str, float]:
    """Timed in the page, in ms: from a click on "Next page" to page 2, then from typing a name
    filter to its first page."""
    first = page.locator(LOOM_LINKS).first.get_attribute("href")
    page.evaluate(
        """() => { window.benchStart = performance.now();
        [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === "Next page")
          .click(); }"""
    )
    paged = page.wait_for_function(
        """([selector, first]) => { const a = document.querySelector(selector);
        return a && a.getAttribute("href") !== first
          && document.querySelector(".total")?.textContent.includes("Page 2")
          && performance.now() - window.benchStart; }""",
        arg=[LOOM_LINKS, first], polling="raf", timeout=WAIT_MS,
    ).json_value()  # fmt: skip
    page.evaluate(
        """(text) => { window.benchStart = performance.now();
        const input = document.querySelector("#filter-name");
        input.value = text; input.dispatchEvent(new Event("input", { bubbles: true })); }""",
        FILTER,
    )
    filtered = page.wait_for_function(
        """([selector, text]) => { const names = [...document.querySelectorAll(selector)];
        return names.length > 0 && names.every((a) => a.textContent.includes(text))
          && performance.now() - window.benchStart; }""",
        arg=[LOOM_LINKS, FILTER], polling="raf", timeout=WAIT_MS,
    ).json_value()  # fmt: skip
    return {"next page": paged, "filter": filtered}


# -- MLflow --------------------------------------------------------------------------------------


@contextmanager
def mlflow(home: Path, planned: list[dict[str, object]], pin: bool) -> Iterator[Site]:
    python = peer_python("mlflow", MLFLOW)
    env = {**os.environ, **QUIET}
    uri, root = f"sqlite:///{home / 'mlflow.db'}", str(home / "artifacts")
    (home / "plan.json").write_text(json.dumps(planned))
    began = time.perf_counter()
    done = subprocess.run(
        [str(python), "-P", str(FILL), uri, root, str(home / "plan.json")],  # -P: see mlflow.py
        env=env, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"ui_mlflow_fill.py failed ({done.returncode}):\n{done.stderr[-2000:]}")
    experiment = json.loads(lines[-1])["experiment_id"]
    note(f"MLflow: {len(planned):,} runs stored in {time.perf_counter() - began:.1f} s")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = home / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*pinned(SERVER_CPU, pin), str(python.parent / "mlflow"), "server",
             "--backend-store-uri", uri, "--default-artifact-root", root,
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--disable-security-middleware"],
            env=env, cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_health(base, server, log, timeout=120)
        url = f"{base}/#/experiments/{experiment}/runs"
        newest = str(planned[-1]["name"])
        yield Site(f"MLflow {VERSION}", url, MLFLOW_LINKS, "/runs/search", newest)
    finally:
        stop(server)


# -- the browser ---------------------------------------------------------------------------------


def visit(browser: Browser, site: Site) -> dict[str, float]:
    """One cold visit: ms to the first row and to `load`, and what had come over the network."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    try:
        if site.token:
            context.add_init_script(f"localStorage.setItem('loom.token', {json.dumps(site.token)})")
        page = context.new_page()
        page.goto(site.url, wait_until="commit")
        shown, rows = page.wait_for_function(
            FIRST_ROW, arg=[site.links, site.newest], polling="raf", timeout=WAIT_MS
        ).json_value()
        page.wait_for_load_state("load")
        requests, sent, listed, load = page.evaluate(NETWORK, [shown, site.api])
        found = {"first row": shown, "list": listed, "load": load, "bytes": sent}
        found |= {"requests": requests, "rows": rows}
        if site.extra is not None:
            found |= site.extra(page)
        site.waterfall = page.evaluate(WATERFALL)
        return found
    finally:
        context.close()


def measure(site: Site, runs: int) -> None:
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            visit(browser, site)  # warm-up: the servers' caches, Chromium's own start
            for n in range(runs):
                for key, value in visit(browser, site).items():
                    site.found.setdefault(key, []).append(value)
                note(f"{site.name}: visit {n + 1}/{runs}: {site.found['first row'][-1]:.0f} ms")
        finally:
            browser.close()


# -- the report ----------------------------------------------------------------------------------


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} / {p90(values):,.0f}"


def row(site: Site) -> list[str]:
    f = site.found
    return [
        site.name,
        spread(f["first row"]),
        f"{statistics.median(f['list']):,.0f}",
        f"{statistics.median(f['load']):,.0f}",
        f"{statistics.median(f['bytes']) / 1024:,.0f}",
        f"{statistics.median(f['requests']):.0f}",
        f"{statistics.median(f['rows']):.0f}",
    ]


def report(sites: list[Site], jobs: int, runs: int, pin: bool) -> str:
    where = (
        f"servers on core {SERVER_CPU}, browser on core {BROWSER_CPU} (taskset)"
        if pin
        else "servers and browser unpinned"
    )
    title = (
        f"First page of {jobs:,} jobs (runs), cold cache, {runs} visits after 1 warm-up; "
        f"Chromium {VIEWPORT['width']}x{VIEWPORT['height']}; {where}"
    )
    header = ["", "first row p50 / p90 ms", "list call ended p50", "load p50", "KiB to first row"]
    header += ["requests", "rows"]
    out = [table(title, header, [row(site) for site in sites])]
    loom_site = sites[0]
    out.append(
        f"\nLoom, Next page to page 2, p50 / p90: {spread(loom_site.found['next page'])} ms; "
        f"name filter '{FILTER}' to its rows (with the page's typing pause), p50 / p90: "
        f"{spread(loom_site.found['filter'])} ms"
    )
    worst = max(loom_site.found["first row"])
    verdict = "yes" if worst < 1000 else "NO"
    out.append(f"Loom's first page under 1 s in every visit: {verdict} (slowest {worst:,.0f} ms)")
    return "\n".join(out)


def waterfall(site: Site) -> str:
    """The last visit's requests: start, first byte and end (ms from navigation), KiB."""
    rows = [
        [name.split("//", 1)[-1].split("/", 1)[-1][:70], f"{start:.0f}", f"{first:.0f}",
         f"{end:.0f}", f"{size / 1024:.1f}"]
        for name, start, first, end, size in sorted(site.waterfall, key=lambda e: e[1])
    ]  # fmt: skip
    header = ["request", "start", "first byte", "end", "KiB"]
    return table(f"\n{site.name}: the last visit's network", header, rows)


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs (and MLflow runs)")
    parser.add_argument("--runs", type=int, default=5, help="cold visits measured a system")
    parser.add_argument("--skip-mlflow", action="store_true")
    parser.add_argument("--waterfall", action="store_true", help="print the last visit's requests")
    parser.add_argument("--no-pin", action="store_true", help="no taskset pinning")
    args = parser.parse_args()
    if args.jobs < 100 or args.runs < 1:
        parser.error(f"--jobs must be ≥ 100 and --runs ≥ 1, got {args.jobs} and {args.runs}")
    pin = CAN_PIN and not args.no_pin
    planned = plan(args.jobs)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="loom-bench-ui-")))
        (folder / "mlflow").mkdir()  # the peer's home; Loom's is made by loom()
        sites = [stack.enter_context(loom(folder / "loom", planned, pin))]
        if not args.skip_mlflow:
            sites.append(stack.enter_context(mlflow(folder / "mlflow", planned, pin)))
        if pin:  # Playwright's driver and Chromium inherit this
            os.sched_setaffinity(0, {BROWSER_CPU})
        for site in sites:
            measure(site, args.runs)
    print("\n" + report(sites, args.jobs, args.runs, pin))
    if args.waterfall:
        for site in sites:
            print(waterfall(site))


if __name__ == "__main__":
    main()
