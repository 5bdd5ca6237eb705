"""The experiment calls of `LoomClient`: hyperparameter searches and their trials."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from loom.client.errors import ClientError

ENDED = ("SUCCEEDED", "FAILED")


class ExperimentCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def create_experiment(self, experiment: str | bytes, code_zip: bytes) -> dict[str, Any]:
        """A Katib v1beta1 Experiment (YAML) and the code its trials run: `{id, name,
        location, warnings}`."""
        files = {
            "experiment": ("experiment.yml", experiment, "application/yaml"),
            "model_definition": ("model.zip", code_zip, "application/zip"),
        }
        made: dict[str, Any] = self._request("POST", "/v1/experiments", files=files).json()
        return made

    def experiments(self, owner: str | None = None, everyone: bool = False) -> list[dict[str, Any]]:
        """Yours; admins: `owner`'s, or `everyone`'s."""
        params: dict[str, Any] = {"all": "true"} if everyone else {}
        if owner is not None:
            params["owner"] = owner
        response = self._request("GET", "/v1/experiments", params=params)
        found: list[dict[str, Any]] = response.json()["experiments"]
        return found

    def experiment(self, ref: str) -> dict[str, Any]:
        """By name or id, with `trial_list`."""
        found: dict[str, Any] = self._request("GET", f"/v1/experiments/{ref}").json()
        return found

    def halt_experiment(self, ref: str) -> dict[str, Any]:
        body = {"action": "halt"}
        found: dict[str, Any] = self._request("PATCH", f"/v1/experiments/{ref}", json=body).json()
        return found

    def resume_experiment(self, ref: str, max_trial_count: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"action": "resume"}
        if max_trial_count is not None:
            body["max_trial_count"] = max_trial_count
        found: dict[str, Any] = self._request("PATCH", f"/v1/experiments/{ref}", json=body).json()
        return found

    def delete_experiment(self, ref: str) -> None:
        self._request("DELETE", f"/v1/experiments/{ref}")

    def wait_experiment(
        self,
        ref: str,
        timeout_s: float = 3600.0,
        seen: Callable[[dict[str, Any]], None] | None = None,
        every_s: float = 1.0,
    ) -> dict[str, Any]:
        """Until it has ended (SUCCEEDED or FAILED) and no trial of it runs any more."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.experiment(ref)
            if seen is not None:
                seen(found)
            running = {"CREATED", "RUNNING"} & set(found["trials_by_state"])
            if found["state"] in ENDED and not running:
                return found
            if time.monotonic() > deadline:
                raise ClientError(f"experiment {ref} is still {found['state']} after {timeout_s} s")
            time.sleep(every_s)
