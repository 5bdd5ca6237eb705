"""Runs logged through MLflow's REST API for the tests of the pages and commands that show
them."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Server

T0 = 1_700_000_000_000


def logged(platform: Server, token: str) -> dict[str, str]:
    """Three runs logged through MLflow's API in project "cmp": two named "twin" (lr 0.1 and
    0.2; losses over three steps, and over one), and "solo" (lr 0.1, no loss)."""
    mlflow = httpx.Client(
        base_url=f"{platform.url}/api/2.0/mlflow",
        timeout=30,
        headers={"Authorization": f"Bearer {token}"},
    )
    project = mlflow.post("/experiments/create", json={"name": "cmp"}).json()["experiment_id"]
    made: dict[str, str] = {}
    plans: list[tuple[str, str, list[float], int]] = [
        ("twin", "0.1", [1.0, 0.5, 0.25], 0),
        ("twin", "0.2", [0.4], 1),
        ("solo", "0.1", [], 2),
    ]
    for name, lr, losses, n in plans:
        body = {"experiment_id": project, "run_name": name, "start_time": T0 + n}
        run = mlflow.post("/runs/create", json=body).json()["run"]["info"]["run_id"]
        metrics: list[dict[str, Any]] = [
            {"key": "loss", "value": v, "step": s, "timestamp": T0 + s}
            for s, v in enumerate(losses)
        ]
        batch = {
            "run_id": run,
            "params": [{"key": "lr", "value": lr}, {"key": "seed", "value": "7"}],
            "metrics": metrics,
        }
        assert mlflow.post("/runs/log-batch", json=batch).status_code == 200
        made[f"{name}-{lr}"] = run
    return made
