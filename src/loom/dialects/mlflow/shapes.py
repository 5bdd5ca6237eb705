"""MLflow's JSON (its protobuf messages as JSON) to Loom's run types and back: pure
translation, no web framework or database here.

Numbers arrive as JSON numbers or, as protobuf writes 64-bit integers and odd floats, as strings
("1700000000000", "NaN", "Infinity"); they leave as numbers, but NaN and the infinities as
protobuf's strings, which plain JSON has no way to say otherwise.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

from loom.domain.catalog import ModelRecord, VersionRecord
from loom.domain.errors import InvalidInput
from loom.domain.runs import (
    Entry,
    Listed,
    LoggedModelRecord,
    Metric,
    ProjectRecord,
    RunRecord,
    View,
)

VIEWS = {"1": View.ACTIVE_ONLY, "2": View.DELETED_ONLY, "3": View.ALL}
FLOAT_WORDS = {
    "nan": math.nan,
    "infinity": math.inf,
    "-infinity": -math.inf,
    "inf": math.inf,
    "-inf": -math.inf,
}


def number_json(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def integer(value: Any, where: str, default: int | None = None) -> int | None:
    """A 64-bit integer as protobuf's JSON writes one: a number or a string of digits."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise InvalidInput(f"{where}: an integer, got {value!r}", field=where)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.lstrip("-").isdecimal():
        value = int(value)
    if not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise InvalidInput(f"{where}: an integer, got {value!r:.60}", field=where)
    return value


def floating(value: Any, where: str) -> float:
    """A double: a number, or protobuf's "NaN" and "Infinity"."""
    if isinstance(value, bool) or value is None:
        raise InvalidInput(f"{where}: a number, got {value!r}", field=where)
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:
            raise InvalidInput(f"{where}: beyond a double's range", field=where) from None
    if isinstance(value, str):
        word = FLOAT_WORDS.get(value.strip().lower())
        if word is not None:
            return word
        try:
            return float(value)
        except ValueError:
            pass
    raise InvalidInput(f"{where}: a number, got {value!r:.60}", field=where)


def text(value: Any, where: str, *, required: bool = False) -> str | None:
    if value is None or (value == "" and not required):
        if required:
            raise InvalidInput(f"{where}: required", field=where)
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: a string, got {value!r:.60}", field=where)
    if required and not value:
        raise InvalidInput(f"{where}: required", field=where)
    return value


def objects(value: Any, where: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InvalidInput(f"{where}: a list of objects", field=where)
    return value


def entries(value: Any, where: str) -> list[Entry]:
    """`[{"key": …, "value": …}]`: params or tags."""
    found = []
    for n, item in enumerate(objects(value, where)):
        key = text(item.get("key"), f"{where}[{n}].key", required=True)
        raw = item.get("value")
        shown = "" if raw is None else raw
        if not isinstance(shown, str):
            shown = json.dumps(shown) if isinstance(shown, dict | list) else str(shown)
        found.append(Entry(str(key), shown))
    return found


def metric_in(item: dict[str, Any], where: str) -> Metric:
    key = text(item.get("key"), f"{where}.key", required=True)
    if "value" not in item:
        raise InvalidInput(f"{where}.value: required", field=f"{where}.value")
    timestamp = integer(item.get("timestamp"), f"{where}.timestamp")
    if timestamp is None or timestamp < 0:
        raise InvalidInput(f"{where}.timestamp: a non-negative integer", field=f"{where}.timestamp")
    step = integer(item.get("step"), f"{where}.step", 0)
    return Metric(str(key), floating(item["value"], f"{where}.value"), timestamp, step or 0)


def metrics_in(value: Any, where: str = "metrics") -> list[Metric]:
    """A batch's metrics. Most come as the client writes them (a name, a float, integers): they
    are taken as they are; any other is read field by field, and refused naming the field."""
    found = []
    for n, item in enumerate(objects(value, where)):
        key, number = item.get("key"), item.get("value")
        stamp, step = item.get("timestamp"), item.get("step")
        if (
            type(key) is str
            and key
            and type(number) is float
            and type(stamp) is int
            and stamp >= 0
            and (step is None or type(step) is int)
            and -(2**63) <= (step or 0) < 2**63
            and stamp < 2**63
        ):
            found.append(Metric(key, number, stamp, step or 0))
        else:
            found.append(metric_in(item, f"{where}[{n}]"))
    return found


def pairs(found: dict[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": v} for k, v in found.items()]


def metric_json(metric: Metric) -> dict[str, Any]:
    return {
        "key": metric.key,
        "value": number_json(metric.value),
        "timestamp": metric.timestamp,
        "step": metric.step,
    }


def experiment_json(project: ProjectRecord) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "experiment_id": str(project.id),
        "name": project.name,
        "artifact_location": project.artifact_location,
        "lifecycle_stage": project.stage,
        "last_update_time": project.updated_at,
        "creation_time": project.created_at,
    }
    if project.tags:
        shown["tags"] = pairs(project.tags)
    return shown


def run_info_json(run: RunRecord) -> dict[str, Any]:
    info: dict[str, Any] = {
        "run_uuid": run.id,
        "run_id": run.id,
        "run_name": run.name,
        "experiment_id": str(run.project_id),
        "user_id": run.user_id,
        "status": run.status,
        "artifact_uri": run.artifact_uri,
        "lifecycle_stage": run.stage,
    }
    if run.start_time is not None:
        info["start_time"] = run.start_time
    if run.end_time is not None:
        info["end_time"] = run.end_time
    return info


def run_json(
    run: RunRecord, inputs: list[Any] | None = None, outputs: list[Any] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if run.metrics:
        data["metrics"] = [metric_json(m) for m in run.metrics]
    if run.params:
        data["params"] = pairs(run.params)
    if run.tags:
        data["tags"] = pairs(run.tags)
    shown: dict[str, Any] = {"info": run_info_json(run), "data": data}
    shown["inputs"] = {"dataset_inputs": inputs} if inputs else {}
    shown["outputs"] = {"model_outputs": outputs} if outputs else {}
    return shown


def view(value: Any, where: str = "view_type") -> View:
    if value is None or value == "":
        return View.ACTIVE_ONLY
    word = str(value).upper()
    if word in View.__members__:
        return View[word]
    if word in VIEWS:
        return VIEWS[word]
    raise InvalidInput(f"{where}: ACTIVE_ONLY, DELETED_ONLY or ALL, got {value!r:.40}", field=where)


def page_token(offset: int | None) -> str | None:
    """MLflow's page token: an offset, base64 of `{"offset": n}` (opaque to its client)."""
    if offset is None:
        return None
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def offset_of(token: Any) -> int:
    if token is None or token == "":
        return 0
    refusal = InvalidInput(f"page_token: not a page token: {token!r:.60}", field="page_token")
    try:
        offset = json.loads(base64.b64decode(str(token), validate=True))["offset"]
    except (ValueError, KeyError, TypeError):
        raise refusal from None
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise refusal
    return offset


def strings(value: Any, where: str) -> list[str]:
    """A repeated string field: a list, or one string (a query string's single value)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise InvalidInput(f"{where}: a list of strings", field=where)
    return [str(v) for v in value]


def logged_model_json(model: LoggedModelRecord) -> dict[str, Any]:
    info: dict[str, Any] = {
        "experiment_id": str(model.project_id),
        "model_id": model.id,
        "name": model.name,
        "artifact_uri": model.artifact_location,
        "creation_timestamp_ms": model.created_at,
        "last_updated_timestamp_ms": model.updated_at,
        "status": model.status,
        "lifecycle_stage": model.stage,
    }
    if model.model_type:
        info["model_type"] = model.model_type
    if model.source_run_id:
        info["source_run_id"] = model.source_run_id
    if model.status_message:
        info["status_message"] = model.status_message
    if model.tags:
        info["tags"] = pairs(model.tags)
    data: dict[str, Any] = {"params": pairs(model.params)} if model.params else {}
    return {"info": info, "data": data}


def files_json(found: list[Listed]) -> list[dict[str, Any]]:
    """MLflow's file infos: paths relative to the artifact folder's root, sizes of files."""
    shown = []
    for entry in found:
        item: dict[str, Any] = {"path": entry.path, "is_dir": entry.is_dir}
        if entry.size is not None:
            item["file_size"] = entry.size
        shown.append(item)
    return shown


def registry_uri(model_id: str, version: int) -> str:
    """Where a registered version's files are read through the artifact proxy."""
    return f"mlflow-artifacts:/registry/{model_id}/{version}"


def version_json(version: VersionRecord) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "name": version.model,
        "version": str(version.version),
        "creation_timestamp": round(version.created_at * 1000),
        "last_updated_timestamp": round(version.updated_at * 1000),
        "user_id": version.owner_name,
        "current_stage": version.stage,
        "description": version.description,
        "source": version.source,
        "run_id": version.run_id,
        "status": "READY",
        "run_link": "",
    }
    if version.tags:
        shown["tags"] = pairs(version.tags)
    if version.aliases:
        shown["aliases"] = version.aliases
    if version.logged_model:
        shown["model_id"] = version.logged_model
    return shown


def model_json(model: ModelRecord) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "name": model.name,
        "creation_timestamp": round(model.created_at * 1000),
        "last_updated_timestamp": round(model.updated_at * 1000),
        "description": model.description,
    }
    if model.latest:
        shown["latest_versions"] = [version_json(v) for v in model.latest]
    if model.tags:
        shown["tags"] = pairs(model.tags)
    if model.aliases:
        shown["aliases"] = [{"alias": a, "version": str(v)} for a, v in model.aliases.items()]
    return shown


def listed(key: str, items: list[Any]) -> dict[str, Any]:
    """A repeated field as protobuf's JSON writes it: left out when empty."""
    return {key: items} if items else {}


def paged(key: str, items: list[Any], next_offset: int | None) -> dict[str, Any]:
    """One page of a search as MLflow answers it: the items, and the next page's token if any."""
    shown = listed(key, items)
    if next_offset is not None:
        shown["next_page_token"] = page_token(next_offset)
    return shown
