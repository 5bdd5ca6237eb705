"""Parameters and tags ride in a learner's metric stream as points with an `info` member
(`{"info": {"kind": "param", "key": "lr", "value": "0.01"}}`): numbered, spooled and resent like
any point, stored apart. The tracking SDK checks them where they are logged; here a bad one is
dropped (same check, `domain.run_info`), so a learner's batch is never refused for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom.domain.run_info import problem
from loom.store.run_info import Entry


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
        if not problem(kind, key, value):
            entries.append((kind, key, value, float(point.get("time") or 0.0)))
    return entries, rest
