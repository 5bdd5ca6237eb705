"""Katib's `metricsCollectorSpec`, checked: where a trial's metrics come from (its stdout with
Katib's filters, a file of TEXT or JSON lines, TensorFlow event files, its Prometheus endpoint),
each refusal naming the field. Pure."""

from __future__ import annotations

import re
from typing import Any, Literal

from loom.domain import spec_checks as check
from loom.domain.katib_types import MetricsCollector

CollectorKind = Literal["StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "None"]
FileFormat = Literal["TEXT", "JSON"]
_COLLECTORS: tuple[CollectorKind, ...] = (
    *("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "None"),
)
_SIDECARS = {  # Katib's collectors that are Kubernetes machinery
    "Custom": "a Kubernetes sidecar container of your own",
    "Push": "a push to Katib's database; log metrics with Loom's tracking SDK and use None",
}
PROMETHEUS_PORT, PROMETHEUS_PATH = 8080, "/metrics"  # Katib's defaults


def collector(value: Any, where: str) -> MetricsCollector:
    """`metricsCollectorSpec` (Katib's default, StdOut, when none is given)."""
    if value is None:
        return MetricsCollector()
    found = check.mapping(value, where)
    check.known(found, ("collector", "source"), where)
    kind = _collector_kind(found.get("collector"), f"{where}.collector")
    source_at = f"{where}.source"
    source = check.mapping(found.get("source") or {}, source_at)
    check.known(source, ("filter", "fileSystemPath", "httpGet"), source_at)
    filters = _filters(source.get("filter"), f"{source_at}.filter")
    if kind == "PrometheusMetric":
        if source.get("filter") is not None or source.get("fileSystemPath") is not None:
            raise check.fail(source_at, "a PrometheusMetric collector reads only its httpGet")
        return MetricsCollector(kind, path=_endpoint(source.get("httpGet"), f"{source_at}.httpGet"))
    if "httpGet" in source:
        raise check.fail(f"{source_at}.httpGet", "only a PrometheusMetric collector reads one")
    path, fmt = _file_path(source.get("fileSystemPath"), f"{source_at}.fileSystemPath", kind)
    if source.get("filter") is not None and (kind in ("TensorFlowEvent", "None") or fmt == "JSON"):
        why = "a JSON file's metrics are its keys" if fmt == "JSON" else f"a {kind} collector"
        raise check.fail(f"{source_at}.filter", f"{why} takes no filter")
    return MetricsCollector(kind, filters, path, fmt)


def _endpoint(value: Any, where: str) -> str:
    """Where a Prometheus collector scrapes the trial: `PORT/PATH` on the learner's own host."""
    found = check.mapping(value or {}, where)
    check.known(found, ("port", "path", "scheme", "host", "httpHeaders"), where)
    if found.get("scheme", "HTTP") != "HTTP" or found.get("host") or found.get("httpHeaders"):
        raise check.fail(where, "only plain HTTP on the learner's own host is scraped")
    port = found.get("port", PROMETHEUS_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise check.fail(f"{where}.port", f"a port number (named ports are a pod's), got {port!r}")
    path = check.text(found.get("path") or PROMETHEUS_PATH, f"{where}.path")
    if not path.startswith("/"):
        raise check.fail(f"{where}.path", f"{path!r} must start with /")
    return f"{port}{path}"


def _collector_kind(value: Any, where: str) -> CollectorKind:
    collector = check.mapping(value or {}, where)
    kind = collector.get("kind", "StdOut")
    if kind in _SIDECARS:  # before the keys: Custom comes with its `customCollector` container
        raise check.fail(
            f"{where}.kind",
            f"{kind} is {_SIDECARS[kind]}; Loom collects StdOut, File, TensorFlowEvent, "
            "PrometheusMetric or None",
        )
    check.known(collector, ("kind",), where)
    return check.choice(kind, f"{where}.kind", _COLLECTORS)


def _filters(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    found = check.mapping(value, where)
    check.known(found, ("metricsFormat",), where)
    patterns = []
    for index, item in enumerate(
        check.sequence(found.get("metricsFormat"), f"{where}.metricsFormat")
    ):
        at = f"{where}.metricsFormat[{index}]"
        pattern = check.text(item, at)
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            raise check.fail(at, f"{pattern!r} is not a regular expression: {exc}") from None
        if groups < 2:
            raise check.fail(at, f"{pattern!r} needs two groups: the metric's name, then its value")
        patterns.append(pattern)
    return tuple(patterns)


def _file_path(value: Any, where: str, kind: CollectorKind) -> tuple[str | None, FileFormat | None]:
    """`fileSystemPath`: a File collector's file (TEXT or JSON lines), a TensorFlowEvent
    collector's directory; the others read none."""
    wanted = {"File": "File", "TensorFlowEvent": "Directory"}.get(kind)
    if wanted is None:
        if value is not None:
            raise check.fail(where, f"a {kind} collector reads no file; leave fileSystemPath out")
        return None, None
    found = check.mapping(value or {}, where)
    check.known(found, ("path", "kind", "format"), where)
    if found.get("path") in (None, ""):
        raise check.fail(f"{where}.path", f"a {kind} collector needs a path: its {wanted.lower()}")
    path = check.text(found["path"], f"{where}.path")
    if found.get("kind") not in (None, wanted):
        given = check.choice(found["kind"], f"{where}.kind", ("File", "Directory"))
        raise check.fail(f"{where}.kind", f"{given}: a {kind} collector reads a {wanted.lower()}")
    if kind == "TensorFlowEvent":
        if found.get("format") not in (None, ""):
            raise check.fail(f"{where}.format", "event files have their own format; leave it out")
        return path, None
    formats: tuple[FileFormat, ...] = ("TEXT", "JSON")
    return path, check.choice(found.get("format") or "TEXT", f"{where}.format", formats)
