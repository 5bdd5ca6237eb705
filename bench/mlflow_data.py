"""The runs both tracking servers are filled with for bench/mlflow.py's search, made the same
way in Loom's venv and in MLflow's (standard library only): each run a name, a start time, 3
params, 2 tags, and 2 metrics of `STEPS` values each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

T0 = 1_700_000_000_000
STEPS = 5


def runs(count: int) -> Iterator[dict[str, Any]]:
    for n in range(count):
        losses = [round(1.0 / (2 + n % 7 + s), 6) for s in range(STEPS)]
        accuracy = [round(0.5 + (n % 50) / 100 + s / 1000, 6) for s in range(STEPS)]
        yield {
            "name": f"run-{n}",
            "start": T0 + n * 1000,
            "params": {
                "lr": str(10 ** -(2 + n % 3)),
                "batch_size": str(32 << n % 3),
                "epochs": "10",
            },
            "tags": {"team": "vision" if n % 2 else "nlp", "mlflow.runName": f"run-{n}"},
            "metrics": {"loss": losses, "accuracy": accuracy},
        }


# What the search benchmark asks each server: all runs, a page at a time, newest first; and a
# filtered, ordered search (about a tenth of the runs match).
FILTER = "metrics.accuracy > 0.9 and params.lr = '0.01' and tags.team = 'vision'"
ORDER = ["metrics.loss ASC"]
