"""Katib's metrics collectors: `name=value` pairs (or pairs found by the user's filters, each a
regex whose first group is the name and second the value) on stdout or in a file of such lines,
and a file of JSON lines. A step comes from `epoch=`/`step=`/… on the same line or record."""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing import Any

    Point = dict[str, Any]

STEP_NAMES = ("step", "iteration", "iter", "epoch", "batch", "global_step")
# Katib's default filter: a name, `=`, a number; the number must end the word.
DEFAULT = re.compile(r"([\w|-]+)\s*=\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?=$|[\s,;])")
_NOT_METRICS = ("timestamp",)  # in Katib's JSON lines


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def point(pairs: dict[str, float]) -> list[Point]:
    """One point of the pairs found on a line or in a record; the step names are its x-axis."""
    etimes = {k: int(pairs.pop(k)) for k in STEP_NAMES if k in pairs and pairs[k].is_integer()}
    if not pairs:
        return []
    step = next((etimes[k] for k in STEP_NAMES if k in etimes), None)
    return [{"group": "default", "step": step, "etimes": etimes, "values": pairs}]


class KatibLines:
    """Every pair on a line, by Katib's default filter or the user's."""

    def __init__(self, filters: list[str] | None = None) -> None:
        self.filters = [re.compile(f) for f in filters] if filters else [DEFAULT]

    def flush(self) -> list[Point]:
        return []

    def on_line(self, text: str) -> list[Point]:
        pairs: dict[str, float] = {}
        for pattern in self.filters:
            for found in pattern.finditer(text):
                value = _number(found.group(2))
                if found.group(1) and value is not None:
                    pairs[found.group(1)] = value
        return point(pairs) if pairs else []


def json_point(text: str) -> list[Point]:
    """A JSON line: its numeric values (numbers, or text holding one) are the metrics."""
    try:
        record = json.loads(text)
    except ValueError:
        return []
    if not isinstance(record, dict):
        return []
    pairs = {}
    for key, raw in record.items():
        value = _number(raw)
        if key not in _NOT_METRICS and value is not None:
            pairs[str(key)] = value
    return point(pairs)


class Lines(Protocol):
    def lines(self, final: bool = False) -> list[str]: ...


class KatibFile:
    """Katib's File collector: the lines a learner appends to a file, TEXT or JSON."""

    def __init__(self, tail: Lines, fmt: str, filters: list[str] | None) -> None:
        self.tail = tail
        self.lines = KatibLines(filters)
        self.json = fmt == "JSON"

    def poll(self, final: bool = False) -> list[Point]:
        points = []
        for text in self.tail.lines(final):
            points += json_point(text) if self.json else self.lines.on_line(text)
        return points
