"""The Grafana dashboard speaks of the metrics the platform really exposes, and uses them as
their types allow: rate() over counters only, quantiles over histogram buckets by `le`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from loom.observability import PlatformMetrics
from loom.serving.drift import DriftMetrics
from loom.store.tables import DriftWindow

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "loom-platform.json"
NAME = re.compile(r"\b((?:loom|process)_[a-z_]+)\b")


def exposed() -> dict[str, str]:
    """Every sample name a platform exposes, with its family's type."""
    metrics = PlatformMetrics()
    metrics.read_at_scrape(lambda: {}, lambda: ("host:1", True))
    metrics.http_duration.labels("/health", "GET", "2xx").observe(0.01)
    metrics.registry.register(DriftMetrics(lambda: [_window()]))  # as loom.api.app does
    text = metrics.exposition().decode()
    return {
        sample.name: family.type
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _window() -> DriftWindow:
    return DriftWindow(deployment="d", deployment_id="0" * 32, model_name="m", model_version=1,
                       drift=True, score=0.5, p_value=0.001, outliers=2, at=1.0)  # fmt: skip


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def test_dashboard_is_importable_json() -> None:
    """Grafana 10+ imports it: a schema version, a uid, the data source as a variable (so it
    also works provisioned from a file), panels with distinct ids that do not overlap."""
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] == "loom-platform"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = set()
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(box["x"], box["x"] + box["w"])
                for y in range(box["y"], box["y"] + box["h"])}  # fmt: skip
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_every_metric_has_a_panel_and_every_panel_a_metric() -> None:
    """Each name in a query is one the platform exposes, and each of the platform's own
    families appears in some query."""
    samples = exposed()
    used = {
        name
        for expr in expressions(json.loads(DASHBOARD.read_text()))
        for name in NAME.findall(expr)
    }
    assert used <= set(samples), used - set(samples)
    families = {re.sub(r"_(total|count|sum|bucket)$", "", name) for name in used}
    own = {
        re.sub(r"_(total|count|sum|bucket|created)$", "", s)
        for s in samples
        if s.startswith("loom_")
    }
    assert own <= families, own - families


def test_queries_use_each_type_as_it_allows() -> None:
    """rate() only over counters and histogram series; histogram_quantile() only over
    buckets, summed by `le`; gauges of the database (the same on every server) never summed."""
    samples = exposed()
    for expr in expressions(json.loads(DASHBOARD.read_text())):
        assert expr.count("(") == expr.count(")"), expr
        for name in re.findall(r"rate\(([a-z_]+)", expr):
            assert name.endswith(("_total", "_count", "_sum", "_bucket")), expr
            assert samples[name] in ("counter", "histogram"), expr
        if "histogram_quantile" in expr:
            assert re.search(r"sum by \(le\b", expr) and "_bucket{" in expr, expr
        assert not re.search(r"sum[^(]*\((loom_jobs|loom_queue_length)", expr), expr
