"""Evaluation-metrics collectors: what turns a learner's output into metric points.

Line collectors (`regex_extractor`, Katib's `name=value` lines) see every line the learner
prints; file collectors (emetrics JSON lines, which the tracking SDK writes too, and TensorBoard
event files) are polled. A line or record that does not parse is left alone: it stays a log line
and never stops the job. A point is `{"group", "step", "etimes", "values"}`.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from loom.domain.patterns import compile_pattern, reference
from loom.learner.katib_metrics import STEP_NAMES, KatibFile, KatibLines
from loom.sandbox.files import open_nofollow

if TYPE_CHECKING:
    from typing import Any

    Point = dict[str, Any]

EMETRICS_FILE = "evaluation-metrics.txt"


class LineCollector(Protocol):
    def on_line(self, text: str) -> list[Point]: ...

    def flush(self) -> list[Point]:
        """The output has ended: whatever the last lines still make."""
        ...


class FileCollector(Protocol):
    def poll(self, final: bool = False) -> list[Point]: ...


def step_of(etimes: dict[str, Any]) -> int | None:
    """The x-axis value that is the step: `step`, `iteration`, `epoch`, … or the first integer."""
    for name in (*STEP_NAMES, *etimes):
        value = etimes.get(name)
        try:
            if value is not None and float(value).is_integer():
                return int(float(value))
        except (TypeError, ValueError):
            continue
    return None


def _typed(kind: str, raw: str | None) -> Any:
    if raw is None:
        return None
    if kind == "FLOAT":
        return float(raw)
    if kind == "INT":
        try:
            return int(raw, 0)  # decimal or 0x-prefixed, without a trip through float
        except ValueError:
            return int(float(raw))
    if kind == "JSONSTRING":
        return json.loads(raw)
    return raw


class RegexCollector:
    """FfDL's regex_extractor: a window of the last `line_lookahead` lines is searched for each
    group's pattern; a match makes a point and clears the window. FfDL anchored the match at
    the window's first line; a pattern now matches anywhere (a line's `I1121 12:00:40 solver.cpp]`
    prefix no longer hides it), and whatever matched at the start matches as before."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.window: deque[str] = deque(
            maxlen=int(spec.get("line_lookahead") or spec.get("linelookahead") or 4)
        )
        self.groups = [
            (
                label,
                compile_pattern(group["regex"]),
                {**(group.get("values") or {}), **(group.get("scalars") or {})},
                group.get("etimes") or {},
            )
            for label, group in (spec.get("groups") or {}).items()
        ]

    def on_line(self, text: str) -> list[Point]:
        self.window.append(text)
        return self._match()

    def flush(self) -> list[Point]:
        """Once the output ends, the last lines get their turn by sliding the window empty (a
        pattern anchored with `^` matches at the window's start)."""
        points = []
        while self.window:
            self.window.popleft()
            points += self._match()
        return points

    def _match(self) -> list[Point]:
        if not self.window:
            return []
        joined = "\n".join(self.window)
        for label, pattern, scalars, etimes in self.groups:
            match = pattern.search(joined)  # anywhere, as Katib's filters (glog prefixes)
            if match is None:
                continue
            found = match.groupdict()
            values = {k: self._value(v, found) for k, v in scalars.items()}
            numeric = {k: v for k, v in values.items() if isinstance(v, int | float)}
            if not numeric:
                continue
            times = {k: self._value(v, found) for k, v in etimes.items()}
            self.window.clear()
            return [{"group": label, "step": step_of(times), "etimes": times, "values": numeric}]
        return []

    @staticmethod
    def _value(typed: dict[str, str], found: dict[str, str | None]) -> Any:
        raw = typed.get("value", "")
        ref = reference(raw)
        try:
            return _typed(typed.get("type", "STRING"), found.get(ref) if ref else raw)
        except (TypeError, ValueError):
            return None


class Tail:
    """New complete lines of a file that may not exist yet and grows while we read. What the
    file held before (an earlier attempt's output in the same LOG_DIR) is not read again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def lines(self, final: bool = False) -> list[str]:
        """Complete lines; at the end, a last line without its newline too."""
        try:
            with open_nofollow(self.path) as source:
                source.seek(self.offset)
                chunk = source.read()
        except OSError:
            return []
        end = len(chunk) if final else chunk.rfind(b"\n") + 1
        self.offset += end
        return chunk[:end].decode("utf-8", "replace").splitlines()


def emetrics_point(record: dict[str, Any]) -> Point | None:
    """FfDL's EMetrics record (`grouplabel`, typed `etimes` and `values`) as a point; the
    tracking SDK's parameters and tags (`loom_info`) as points with an `info` member."""
    info = record.get("loom_info")
    if isinstance(info, dict):
        return {"info": {k: str(info.get(k, "")) for k in ("kind", "key", "value")}}

    def plain(items: Any) -> dict[str, Any]:
        out = {}
        for key, typed in (items or {}).items():
            try:
                if isinstance(typed, dict):
                    out[key] = _typed(str(typed.get("type", "FLOAT")), typed.get("value"))
                else:
                    out[key] = typed
            except (TypeError, ValueError):
                continue
        return out

    values = {k: v for k, v in plain(record.get("values")).items() if isinstance(v, int | float)}
    if not values:
        return None
    etimes = plain(record.get("etimes"))
    group = record.get("grouplabel") or record.get("group") or "default"
    return {"group": str(group), "step": step_of(etimes), "etimes": etimes, "values": values}


class EMetricsCollector:
    """FfDL's emetrics file (JSON lines); the tracking SDK writes the same file."""

    def __init__(self, path: Path) -> None:
        self.tail = Tail(path)

    def poll(self, final: bool = False) -> list[Point]:
        points = []
        for line in self.tail.lines(final):
            try:
                record = json.loads(line)
                point = emetrics_point(record) if isinstance(record, dict) else None
            except Exception:  # one bad record costs only itself
                continue
            if point is not None:
                points.append(point)
        return points


def line_collectors(spec: dict[str, Any] | None) -> list[LineCollector]:
    kind = (spec or {}).get("type")
    if kind == "regex_extractor":
        return [RegexCollector(spec or {})]
    if kind == "katib" and not (spec or {}).get("in"):  # with `in`, the file is the source
        return [KatibLines((spec or {}).get("filters"))]
    return []


def file_collectors(spec: dict[str, Any] | None, env: dict[str, str]) -> list[FileCollector]:
    """The emetrics file in LOG_DIR always (the SDK's channel); the manifest's choice besides."""
    from loom.learner.tensorboard import TensorBoardCollector

    spec = spec or {}
    log_dir = Path(env["LOG_DIR"])
    found: list[FileCollector] = [EMetricsCollector(log_dir / EMETRICS_FILE)]
    extra = _expand(spec.get("in"), env)
    if spec.get("type") == "emetrics_file" and extra is not None:
        path = extra if extra.suffix else extra / EMETRICS_FILE
        if path.resolve() != (log_dir / EMETRICS_FILE).resolve():  # one reader per file
            found.append(EMetricsCollector(path))
    if spec.get("type") == "katib" and extra is not None:
        found.append(KatibFile(Tail(extra), str(spec.get("format") or "TEXT"), spec.get("filters")))
    if spec.get("type") == "prometheus" and spec.get("in"):
        from loom.learner.prometheus import PrometheusCollector

        found.append(PrometheusCollector(str(spec["in"]), list(spec.get("filters") or [])))
    if spec.get("type") == "tensorboard":
        roots = [log_dir] + ([extra] if extra is not None and extra != log_dir else [])
        found.append(TensorBoardCollector(roots))
    return found


def _expand(path: str | None, env: dict[str, str]) -> Path | None:
    if not path:
        return None
    expanded = re.sub(
        r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), os.environ.get(m.group(1), "")), path
    )
    candidate = Path(expanded)
    return candidate if candidate.is_absolute() else Path(env["MODEL_DIR"]) / candidate
