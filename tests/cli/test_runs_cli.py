"""`loom runs` as a user types it: list with an MLflow filter and chosen columns, an order, a
bad filter's reason; show; compare two runs, the differing param marked."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import loom
from tests.conftest import Server
from tests.dialects.mlflow.logged import logged

pytestmark = pytest.mark.integration


def test_list_show_and_compare(shared_server: Server) -> None:
    """Three runs logged through MLflow's API are listed, filtered, ordered, shown and
    compared from the command line."""
    with shared_server.client() as admin:
        token = admin.add_user("runs-cli")["token"]
    made = logged(shared_server, token)
    listed = loom(
        shared_server,
        "runs",
        "list",
        "-f",
        "params.lr = '0.1'",
        "-c",
        "params.lr",
        "-c",
        "metrics.loss",
        token=token,
    )
    assert listed.returncode == 0, listed.stderr
    assert made["twin-0.1"][:8] in listed.stdout and made["solo-0.1"][:8] in listed.stdout
    assert made["twin-0.2"][:8] not in listed.stdout
    ordered = loom(
        shared_server, "runs", "list", "--order-by", "metrics.loss DESC", "-o", "json", token=token
    )
    names = [(r["name"], r["metrics"].get("loss")) for r in json.loads(ordered.stdout)["runs"]]
    assert names == [("twin", 0.4), ("twin", 0.25), ("solo", None)]
    bad = loom(shared_server, "runs", "list", "-f", "metrics.loss <", token=token)
    assert bad.returncode != 0 and "filter" in bad.stderr

    shown = loom(shared_server, "runs", "show", made["twin-0.1"], token=token)
    assert "param lr" in shown.stdout and "metric loss" in shown.stdout
    compared = loom(
        shared_server, "runs", "compare", made["twin-0.1"], made["twin-0.2"], token=token
    )
    assert compared.returncode == 0, compared.stderr
    lines = compared.stdout.splitlines()
    assert any("* params.lr" in line for line in lines)
    assert any("params.seed" in line and "*" not in line for line in lines)
