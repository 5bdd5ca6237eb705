"""The run calls of `LoomClient`: tracked runs (every job is one) searched with MLflow's filter
grammar, shown, and compared."""

from __future__ import annotations

from typing import Any

import httpx


class RunCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def runs(
        self,
        *,
        filter: str | None = None,
        project: list[str] | None = None,
        order_by: list[str] | None = None,
        deleted: bool = False,
        max_results: int = 100,
        offset: int = 0,
    ) -> dict[str, Any]:
        """`{"runs": [...], "next_offset": n or None}`: runs matching an MLflow filter."""
        params: dict[str, Any] = {"max_results": max_results, "offset": offset}
        if filter:
            params["filter"] = filter
        if project:
            params["project"] = project
        if order_by:
            params["order_by"] = order_by
        if deleted:
            params["view"] = "DELETED_ONLY"
        found: dict[str, Any] = self._request("GET", "/v1/runs", params=params).json()
        return found

    def run(self, run_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._request("GET", f"/v1/runs/{run_id}").json()
        return found

    def compare_runs(self, run_ids: list[str]) -> dict[str, Any]:
        """Params side by side (with whether they differ) and metric histories of 2-10 runs."""
        found: dict[str, Any] = self._request(
            "GET", "/v1/runs/compare", params={"ids": run_ids}
        ).json()
        return found

    def projects(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._request("GET", "/v1/projects").json()["projects"]
        return found
