"""The stock MLflow client (mlflow-skinny 3.17.2) makes the same 128 calls to the real MLflow
server (3.17.2, SQLite) and to Loom, and gets the same answer from each: values, order and
error codes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tools.mlflow_server import MlflowServer

from tests.conftest import ROOT, Server
from tests.dialects.mlflow.differential import DELIBERATE, both, table

pytestmark = pytest.mark.integration
TABLE = ROOT / "build" / "mlflow-differential.md"


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    with MlflowServer(tmp_path_factory.mktemp("mlflow")) as server:
        yield server


@pytest.mark.timeout(900)  # 128 calls of a client that starts MLflow: ~4 min with two test workers
def test_the_stock_client_gets_mlflows_answers_from_loom(
    shared_server: Server, peer: MlflowServer
) -> None:
    """Every call's outcome from Loom equals the real MLflow server's, but those listed as
    deliberate differences."""
    with shared_server.client() as admin:
        token = admin.add_user("mlflow-differential")["token"]
    expected, found = both(peer.url, shared_server.url, token)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(table(expected, found) + "\n")  # for the notes: build/ is not kept
    assert len(expected) >= 60
    differing = [
        (a["call"], a["outcome"], b["outcome"])
        for a, b in zip(expected, found, strict=True)
        if a != b and a["call"] not in DELIBERATE
    ]
    assert not differing, table(expected, found)


def test_the_table_says_which_calls_agree() -> None:
    """The notes' table marks an agreeing call, a differing one and a deliberate one."""
    same = {"call": "get_run", "outcome": {"id": "<run0>"}}
    other = {"call": "get_run", "outcome": {"error": "RESOURCE_DOES_NOT_EXIST"}}
    shown = table([same, same], [same, other])
    assert "| 1 | `get_run` |" in shown and "| yes |" in shown and "| **no** |" in shown
    assert "1 of 2 calls agree" in shown
    assert Path(__file__).with_name("client_calls.py").exists()
