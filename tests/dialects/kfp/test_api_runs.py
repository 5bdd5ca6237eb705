"""The KFP run API's view of a run whose sub-pipeline's run is not made yet."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from loom.dialects.kfp.api_runs import _sub_steps
from loom.domain.errors import NotFound


class NoRunsYet:
    def find(self, owner_id: str, run_id: str) -> Any:
        raise NotFound(f"no pipeline run {run_id!r}")


def test_a_sub_run_stored_on_its_task_but_not_made_yet_is_left_out() -> None:
    """A task's run id is stored a moment before the sub-pipeline's run is made: a read in
    between answers the run without it (kfp.Client's wait polled a 404 there)."""
    platform = SimpleNamespace(pipelines=NoRunsYet())
    steps = [{"name": "inner", "tasks": [{"run_id": "run-later"}]}]
    assert _sub_steps(platform, SimpleNamespace(id="u1"), steps) == {}  # type: ignore[arg-type]
