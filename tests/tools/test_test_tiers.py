"""The tiers' runner: a tier beside another starts with it and may run on until a later tier
ends, which does not wait for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools.test_tiers import Tier

from tools import test_tiers


def step(log: Path, name: str, pause: float = 0.0) -> list[str]:
    """A command that logs `name start`, waits `pause` s, then logs `name end`."""
    script = f"echo {name} start >> {log}; sleep {pause}; echo {name} end >> {log}"
    return ["sh", "-c", script]


@pytest.fixture
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(test_tiers, "REPORTS", tmp_path)
    return tmp_path


def test_a_tier_beside_runs_on_into_the_next_without_holding_it_back(reports: Path) -> None:
    log = reports / "order.log"
    chosen = [
        Tier("static", [step(log, "static", 0.6)], beside="unit", until="sqlite"),
        Tier("unit", [step(log, "unit")]),
        Tier("sqlite", [step(log, "sqlite", 1.2)]),
        Tier("postgres", [step(log, "postgres", 0.2)]),
        Tier("browser", [step(log, "browser", 0.4)], beside="postgres"),
    ]
    outcomes = test_tiers.run_all(chosen)

    lines = log.read_text().split("\n")
    assert lines.index("sqlite start") < lines.index("static end") < lines.index("sqlite end")
    assert lines.index("browser start") < lines.index("postgres end")
    assert [o.tier.name for o in outcomes] == ["unit", "sqlite", "static", "postgres", "browser"]
    assert all(o.status == 0 for o in outcomes)


def test_without_its_until_tier_a_tier_beside_is_joined_after_its_partner(reports: Path) -> None:
    log = reports / "order.log"
    chosen = [
        Tier("static", [step(log, "static", 0.4), ["false"]], beside="unit", until="sqlite"),
        Tier("unit", [step(log, "unit")]),
    ]
    outcomes = test_tiers.run_all(chosen)
    assert [(o.tier.name, o.status) for o in outcomes] == [("unit", 0), ("static", 1)]
    assert log.read_text().split("\n")[-2] == "static end"
