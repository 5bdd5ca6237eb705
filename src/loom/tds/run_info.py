"""Parameters and tags ride in a learner's metric stream as points with an `info` member
(`{"info": {"kind": "param", "key": "lr", "value": "0.01"}}`): numbered, spooled and resent like
any point, stored apart. The tracking SDK checks them where they are logged; here a bad one is
dropped, so a learner's batch is never refused for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom.store.run_info import Entry

KINDS = {"param", "tag"}
MAX_KEY = 250  # MLflow's limits
MAX_VALUE = {"param": 6000, "tag": 8000}


def check(kind: str, key: str, value: str) -> str:
    """Why an entry cannot be kept (empty if it can)."""
    if kind not in KINDS:
        return f"kind: expected param or tag, got {kind!r}"
    if not key or len(key) > MAX_KEY or "\x00" in key:
        return f"key: 1 to {MAX_KEY} characters, no NUL, got {key[:60]!r}"
    if len(value) > MAX_VALUE[kind] or "\x00" in value:
        return f"{kind} {key!r}: a value of at most {MAX_VALUE[kind]} characters, no NUL"
    return ""


def split(points: Sequence[dict[str, Any]]) -> tuple[list[Entry], list[dict[str, Any]]]:
    """The run-info entries among a learner's points, and the metric points proper."""
    entries: list[Entry] = []
    rest: list[dict[str, Any]] = []
    for point in points:
        info = point.get("info")
        if info is None:
            rest.append(point)
            continue
        if not isinstance(info, dict):
            continue
        kind, key, value = (str(info.get(name, "")) for name in ("kind", "key", "value"))
        if not check(kind, key, value):
            entries.append((kind, key, value, float(point.get("time") or 0.0)))
    return entries, rest
