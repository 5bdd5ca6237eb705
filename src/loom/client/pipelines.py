"""The pipeline calls of `LoomClient`: runs of DAGs of jobs, experiments, model selections and
deployments (docs/pipelines.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import yaml

RUN_ENDED = ("SUCCEEDED", "FAILED", "HALTED")


class PipelineCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def run_pipeline(
        self,
        pipeline: str | bytes | dict[str, Any],
        code_zip: bytes | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Start a run of a pipeline (its YAML, or the spec as a dict), with the code its steps
        run and the parameters that override its defaults: `{id, name, location, warnings}`."""
        text = yaml.safe_dump(pipeline, sort_keys=False) if isinstance(pipeline, dict) else pipeline
        files: dict[str, tuple[str, str | bytes, str]] = {
            "pipeline": ("pipeline.yml", text, "application/yaml")
        }
        if code_zip is not None:
            files["model_definition"] = ("model.zip", code_zip, "application/zip")
        if parameters is not None:
            files["parameters"] = ("parameters.json", json.dumps(parameters), "application/json")
        made: dict[str, Any] = self._request("POST", "/v1/pipelines/runs", files=files).json()
        return made

    def pipeline_runs(
        self, pipeline: str | None = None, owner: str | None = None, everyone: bool = False
    ) -> list[dict[str, Any]]:
        """Your runs, newest first (of one `pipeline`); admins: `owner`'s, or `everyone`'s."""
        params: dict[str, Any] = {"all": "true"} if everyone else {}
        if pipeline is not None:
            params["pipeline"] = pipeline
        if owner is not None:
            params["owner"] = owner
        response = self._request("GET", "/v1/pipelines/runs", params=params)
        found: list[dict[str, Any]] = response.json()["runs"]
        return found

    def pipeline_run(self, run_id: str) -> dict[str, Any]:
        """The run with its `steps`, and each step's `tasks` (one per item of a fan-out)."""
        found: dict[str, Any] = self._request("GET", f"/v1/pipelines/runs/{run_id}").json()
        return found

    def halt_pipeline_run(self, run_id: str) -> dict[str, Any]:
        """Its running steps' jobs are halted; nothing new starts."""
        return self._act(run_id, "halt")

    def retry_pipeline_run(self, run_id: str) -> dict[str, Any]:
        """Its failed, halted and skipped steps run again; the rest are kept."""
        return self._act(run_id, "retry")

    def _act(self, run_id: str, action: str) -> dict[str, Any]:
        body = {"action": action}
        path = f"/v1/pipelines/runs/{run_id}"
        found: dict[str, Any] = self._request("PATCH", path, json=body).json()
        return found

    def delete_pipeline_run(self, run_id: str) -> None:
        """The run and its jobs; registered models and deployments stay."""
        self._request("DELETE", f"/v1/pipelines/runs/{run_id}")

    def wait_pipeline_run(
        self,
        run_id: str,
        timeout_s: float = 600.0,
        poll_s: float = 0.5,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Until the run has ended (SUCCEEDED, FAILED or HALTED); `on_change(run)` is told each
        time the run differs from the last look. `TimeoutError` past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] | None = None
        while True:
            found = self.pipeline_run(run_id)
            if on_change is not None and found != last:
                on_change(found)
            last = found
            if found["state"] in RUN_ENDED:
                return found
            if time.monotonic() > deadline:
                state = found["state"]
                raise TimeoutError(f"pipeline run {run_id} is still {state} after {timeout_s} s")
            time.sleep(poll_s)
