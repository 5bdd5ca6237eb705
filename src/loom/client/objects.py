"""The object calls of `LoomClient`: Kubernetes-style documents applied, read and deleted
(`kubectl apply -f`, `get`, `delete`), for Kubeflow's kinds and the others the platform serves."""

from __future__ import annotations

from typing import Any

import httpx


class ObjectCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def apply(self, documents: str | bytes, code_zip: bytes | None = None) -> list[dict[str, Any]]:
        """Apply one or several documents (YAML or JSON), with the code they run if any: what
        each became (`action`: created, unchanged or configured; `refs`; `notes`)."""
        files: dict[str, Any] = {"objects": ("objects.yaml", documents, "application/yaml")}
        if code_zip is not None:
            files["model_definition"] = ("model.zip", code_zip, "application/zip")
        found: list[dict[str, Any]] = self._request("POST", "/v1/apply", files=files).json()[
            "objects"
        ]
        return found

    def delete_documents(self, documents: str | bytes) -> list[dict[str, Any]]:
        """Delete the objects the documents name (`action`: deleted, or not found)."""
        files = {"objects": ("objects.yaml", documents, "application/yaml")}
        found: list[dict[str, Any]] = self._request("POST", "/v1/delete", files=files).json()[
            "objects"
        ]
        return found

    def kinds(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._request("GET", "/v1/objects").json()["kinds"]
        return found

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Your objects of a kind (`tfjobs`, `experiment`, `isvc`, ...), each with its status."""
        found: list[dict[str, Any]] = self._request("GET", f"/v1/objects/{kind}").json()["items"]
        return found

    def object(self, kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self._request("GET", f"/v1/objects/{kind}/{name}").json()
        return found

    def delete_object(self, kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self._request("DELETE", f"/v1/objects/{kind}/{name}").json()
        return found
