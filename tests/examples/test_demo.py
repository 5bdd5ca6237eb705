"""`make demo`, the first command a new user runs, end to end: the workflow pipeline (data,
three variants in parallel, one of them distributed, the best selected, deployed and asked),
then again with its data and training steps taken from the cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def demo(home: Path) -> str:
    env = {**os.environ, "LOOM_DEMO_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_demo_runs_the_workflow_then_reuses_its_cache(tmp_path: Path) -> None:
    """Three accuracies, the most accurate variant chosen and served, its answers mostly
    right; the second demo runs no training job again."""
    first = demo(tmp_path / "demo")
    accuracies = [float(a) for a in re.findall(r"test accuracy ([0-9.]+)%", first)]
    assert len(accuracies) == 3 and min(accuracies) > 80
    chosen = re.search(r"== chosen: (digits-workflow@\d+) at ([0-9.]+)%", first)
    assert chosen is not None and float(chosen.group(2)) == max(accuracies)
    right = re.search(r"(\d+) of 12 right", first)
    assert right is not None and int(right.group(1)) >= 9
    assert "SUCCEEDED" in first and "no step was cached" in first
    second = demo(tmp_path / "demo")
    assert "cached steps: data, train" in second
    assert f"== chosen: {chosen.group(1)}" in second
    assert "train[2] width 32, learners 2: CACHED" in second
