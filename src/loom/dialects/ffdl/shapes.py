"""FfDL's REST API v1 shapes (its `swagger.yml`), made from Loom's own records. Pure: no web
framework, no database; the routes hand in plain mappings.

`Model` is a job seen as FfDL showed it: the manifest's model definition, its training (command,
resources, the data stores it reads and writes, `training_status`), its data stores with their
connections as stored (credentials already `***`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

# Where FfDL's clients find a model: the path under the API's base, as FfDL's CLI expects it.
MODELS = "/v1/models"
# FfDL's own words for the HTTP statuses its errors carried in `error`.
_ERROR_WORDS = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    410: "Gone",
    413: "Request entity too large",
    429: "Too many requests",
    500: "Internal server error",
    501: "Not implemented",
    503: "Service unavailable",
}


def timestamp(at: float | None) -> str:
    """The swagger's `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`; FfDL sent "" for what has not happened."""
    if at is None:
        return ""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def location(model_id: str) -> str:
    return f"{MODELS}/{model_id}"


def basic_new_model(model_id: str) -> dict[str, str]:
    """`BasicNewModel`: what `POST /v1/models` answers."""
    return {"model_id": model_id, "location": location(model_id)}


def model(job: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`Model`: a job (`id`, `name`, `state`, `status_message`, `error_code`, `submitted_at`,
    `finished_at` as epoch seconds, `cpus`, `gpus`, `memory` in bytes, `learners`) with its
    manifest as stored (credentials redacted)."""
    framework = manifest.get("framework") or {}
    stores = [s for s in manifest.get("data_stores") or [] if isinstance(s, Mapping)]
    state = str(job["state"])
    return {
        **basic_new_model(str(job["id"])),
        "name": job.get("name") or manifest.get("name") or "",
        "description": manifest.get("description") or "",
        "framework": {
            "name": str(framework.get("name") or ""),
            "version": str(framework.get("version") or ""),
        },
        "training": {
            "command": str(framework.get("command") or ""),
            "cpus": float(job.get("cpus") or 0),
            "gpus": float(job.get("gpus") or 0),
            "memory": round(float(job.get("memory") or 0) / 2**20, 2),
            "memory_unit": "MiB",
            "learners": int(job.get("learners") or 1),
            "input_data": [str(s["id"]) for s in stores if s.get("training_data")],
            "output_data": [str(s["id"]) for s in stores if s.get("training_results")],
            "training_status": {
                "status": state,
                "status_description": state,
                "status_message": job.get("status_message") or "",
                "error_code": job.get("error_code") or "",
                "submitted": timestamp(job.get("submitted_at")),
                "completed": timestamp(job.get("finished_at")),
            },
        },
        "data_stores": [_data_store(s) for s in stores],
    }


def _data_store(store: Mapping[str, Any]) -> dict[str, Any]:
    connection = store.get("connection") or {}
    return {
        "data_store_id": str(store.get("id") or ""),
        "type": str(store.get("type") or ""),
        "connection": {str(k): str(v) for k, v in connection.items()},
    }


def model_list(models: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """`ModelList`."""
    return {"models": list(models)}


def log_line(model_id: str, user: str, text: str, at: float, rindex: int) -> dict[str, Any]:
    """`v1LogLine`: the line and its `v1MetaInfo` (time in epoch milliseconds, as strings)."""
    return {"meta": _meta(model_id, user, at, rindex), "line": text}


def emetrics(record: Mapping[str, Any], user: str) -> dict[str, Any]:
    """`v1EMetrics` from Loom's own EMetrics record (which lacks only the user)."""
    meta = dict(record.get("meta") or {})
    return {
        **record,
        "meta": {
            "training_id": str(meta.get("training_id", "")),
            "user_id": user,
            "time": str(meta.get("time", "")),
            "rindex": str(meta.get("rindex", "")),
        },
    }


def _meta(model_id: str, user: str, at: float, rindex: int) -> dict[str, str]:
    return {
        "training_id": model_id,
        "user_id": user,
        "time": str(int(at * 1000)),
        "rindex": str(rindex),
    }


def rindexes(pos: int, count: int, total: int) -> range:
    """FfDL's sequential index (1-based) of a page's records: from `pos` when it counts from
    the start; when negative, from the end of the `total` records (-1: the last page, -N: the
    page that ends N-1 records earlier)."""
    if pos < 0:
        last = total - (-pos - 1)
        return range(max(last - count + 1, 1), max(last - count + 1, 1) + count)
    first = max(pos, 1)
    return range(first, first + count)


def error(status: int, message: str, code: str | None = None, field: str | None = None) -> Any:
    """FfDL's `Error`: `code` the HTTP status, `error` what went wrong; `description` said more.
    A bad manifest or parameter is told in `error` (as FfDL's server did); other errors name
    the status there, Loom's sentence in `description`. Loom's error code and the field are
    kept beside them (FfDL's clients ignore what they do not know)."""
    if status == 400:
        what = "Incorrect manifest" if code == "C101" else "Incorrect parameters"
        body: dict[str, Any] = {"code": 400, "error": message, "description": what}
    else:
        word = _ERROR_WORDS.get(status, "Error")
        body = {"code": status, "error": word, "description": message}
    if code:
        body["loom_code"] = code
    if field:
        body["field"] = field
    return body
