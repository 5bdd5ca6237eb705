"""The monitoring alert rules are a Prometheus rule file that speaks only of metrics the
platform exposes."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.test_grafana import NAME, exposed

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "loom-monitoring-rules.yml"


def test_rules_name_exposed_metrics() -> None:
    """Every rule has an alert name, an expression over exposed metrics, a severity and a
    summary; the drift alert waits before it fires."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    names = exposed()
    for rule in rules:
        assert rule["alert"] and rule["labels"]["severity"] and rule["annotations"]["summary"]
        used = set(NAME.findall(rule["expr"]))
        assert used and used <= set(names), used - set(names)
    drift = next(r for r in rules if r["alert"] == "LoomModelDrift")
    assert "loom_model_drift" in drift["expr"] and drift["for"]
