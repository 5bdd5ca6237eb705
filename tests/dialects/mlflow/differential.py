"""Running `client_calls.py` (the stock MLflow client, in its own venv) against a tracking
server, and the two lists of outcomes side by side as a table.

    python -m tests.dialects.mlflow.differential    # both servers, the table on stdout
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.foreign import python
from tools.mlflow_server import QUIET

SCRIPT = Path(__file__).with_name("client_calls.py")
# MLflow's client retries a 500 for minutes by default: one answer is what is compared.
CLIENT = {**QUIET, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "60"}
# Deliberate differences, and why: the call's name → what Loom answers instead.
DELIBERATE: dict[str, str] = {}


def outcomes(url: str, token: str | None, folder: Path) -> list[dict[str, Any]]:
    """What the stock client got from the server at `url`, call by call."""
    out = folder / "outcomes.json"
    env = {**os.environ, **CLIENT, "MLFLOW_TRACKING_URI": url}
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    if token:
        env["MLFLOW_TRACKING_TOKEN"] = token
    done = subprocess.run(
        [str(python("mlflow-client")), str(SCRIPT), str(out)],
        env=env, cwd=folder, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"client_calls.py against {url} failed:\n{done.stderr[-4000:]}")
    found: list[dict[str, Any]] = json.loads(out.read_text())
    return found


def both(
    mlflow_url: str, loom_url: str, token: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The outcomes from each server, asked at the same time."""
    with (
        tempfile.TemporaryDirectory() as a,
        tempfile.TemporaryDirectory() as b,
        ThreadPoolExecutor(2) as pool,
    ):
        peer = pool.submit(outcomes, mlflow_url, None, Path(a))
        loom = pool.submit(outcomes, loom_url, token, Path(b))
        return peer.result(), loom.result()


def short(outcome: Any, width: int = 60) -> str:
    text = json.dumps(outcome, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(peer: list[dict[str, Any]], loom: list[dict[str, Any]]) -> str:
    """Markdown: each call, what MLflow's server and Loom answered, and whether they agree."""
    rows = ["| # | call | MLflow 3.17.2 | Loom | same |", "|---|---|---|---|---|"]
    for n, (a, b) in enumerate(zip(peer, loom, strict=False), start=1):
        same = "yes" if a == b else ("deliberate" if a["call"] in DELIBERATE else "**no**")
        cell = lambda o: short(o["outcome"]).replace("|", "\\|")  # noqa: E731
        rows.append(f"| {n} | `{a['call'][:60]}` | {cell(a)} | {cell(b)} | {same} |")
    agree = sum(1 for a, b in zip(peer, loom, strict=False) if a == b)
    rows.append(f"\n{agree} of {len(peer)} calls agree ({len(loom)} made against Loom).")
    return "\n".join(rows)


if __name__ == "__main__":  # both servers from scratch, the table on stdout
    from tools.mlflow_server import MlflowServer

    from tests.conftest import Server

    with tempfile.TemporaryDirectory() as home:
        loom_server = Server(Path(home) / "loom").start()
        try:
            with MlflowServer(Path(home) / "mlflow") as peer_server:
                print(table(*both(peer_server.url, loom_server.url, loom_server.admin_token)))
        finally:
            loom_server.stop()
    sys.exit(0)
