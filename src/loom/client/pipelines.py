"""The pipeline calls of `LoomClient`: runs of DAGs of jobs, experiments, model selections and
deployments (docs/pipelines.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

RUN_ENDED = ("SUCCEEDED", "FAILED", "HALTED")

_Parts = dict[str, tuple[str, str | bytes, str]]


def _pipeline_parts(
    pipeline: str | bytes | dict[str, Any],
    code_zip: bytes | None,
    parameters: dict[str, Any] | None,
) -> _Parts:
    """The multipart parts of a pipeline (its YAML, or the spec as a dict), its code and its
    parameters, as a run or a schedule is made of them."""
    import yaml  # only for a pipeline given as a mapping

    text = yaml.safe_dump(pipeline, sort_keys=False) if isinstance(pipeline, dict) else pipeline
    files: _Parts = {"pipeline": ("pipeline.yml", text, "application/yaml")}
    if code_zip is not None:
        files["model_definition"] = ("model.zip", code_zip, "application/zip")
    if parameters is not None:
        files["parameters"] = ("parameters.json", json.dumps(parameters), "application/json")
    return files


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
        files = _pipeline_parts(pipeline, code_zip, parameters)
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

    def pipeline_run(self, run_id: str, spec: bool = True) -> dict[str, Any]:
        """The run with its `steps`, and each step's `tasks` (one per item of a fan-out), and
        its `spec` unless `spec` is False."""
        params = {} if spec else {"spec": "false"}
        path = f"/v1/pipelines/runs/{run_id}"
        found: dict[str, Any] = self._request("GET", path, params=params).json()
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
        """Until the run has ended (SUCCEEDED, FAILED or HALTED, its steps stopped: a halted
        run's jobs may take a moment to stop); `on_change(run)` is told each
        time the run differs from the last look (the run without its spec). `TimeoutError` past
        `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] | None = None
        while True:
            found = self.pipeline_run(run_id, spec=False)  # polled: the steps are what change
            if on_change is not None and found != last:
                on_change(found)
            last = found
            if found["state"] in RUN_ENDED and found.get("finished_at") is not None:
                return found
            if time.monotonic() > deadline:
                state = found["state"]
                raise TimeoutError(f"pipeline run {run_id} is still {state} after {timeout_s} s")
            time.sleep(poll_s)

    # -- schedules: recurring runs -------------------------------------------------------------
    def schedule_pipeline(
        self,
        pipeline: str | bytes | dict[str, Any],
        name: str,
        cron: str,
        code_zip: bytes | None = None,
        parameters: dict[str, Any] | None = None,
        enabled: bool = True,
        trigger: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run a pipeline at each time of `cron` (5 fields or `@daily` and the like, UTC; ""
        for none), or when `trigger` fires (`{"drift": {"deployment": NAME}}`, `{"new_data":
        {"url": …}}`), with the schedule's own copy of its spec, code and parameters: `{id,
        name, cron, next_run_at, location}`."""
        files = _pipeline_parts(pipeline, code_zip, parameters)
        schedule: dict[str, Any] = {"name": name, "cron": cron, "enabled": enabled}
        if trigger is not None:
            schedule["trigger"] = trigger
        files["schedule"] = ("schedule.json", json.dumps(schedule), "application/json")
        response = self._request("POST", "/v1/pipelines/schedules", files=files)
        made: dict[str, Any] = response.json()
        return made

    def pipeline_schedules(
        self, owner: str | None = None, everyone: bool = False
    ) -> list[dict[str, Any]]:
        """Your schedules; admins: `owner`'s, or `everyone`'s."""
        params: dict[str, Any] = {"all": "true"} if everyone else {}
        if owner is not None:
            params["owner"] = owner
        response = self._request("GET", "/v1/pipelines/schedules", params=params)
        found: list[dict[str, Any]] = response.json()["schedules"]
        return found

    def pipeline_schedule(self, ref: str) -> dict[str, Any]:
        """The schedule of that name or id: its cron, next and last run, how many it started."""
        found: dict[str, Any] = self._request("GET", _schedule_path(ref)).json()
        return found

    def enable_pipeline_schedule(self, ref: str, enabled: bool) -> dict[str, Any]:
        """Paused (`enabled=False`: it starts no new runs) or running again (`True`)."""
        body = {"enabled": enabled}
        found: dict[str, Any] = self._request("PATCH", _schedule_path(ref), json=body).json()
        return found

    def delete_pipeline_schedule(self, ref: str) -> None:
        """The schedule; the runs it started stay."""
        self._request("DELETE", _schedule_path(ref))


def _schedule_path(ref: str) -> str:
    return f"/v1/pipelines/schedules/{quote(ref, safe='')}"
