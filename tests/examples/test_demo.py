"""`make demo`, the first command a new user runs, end to end: train, register, deploy, ask."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_demo_trains_deploys_and_answers(tmp_path: Path) -> None:
    """The demo's job completes and its deployed model (a private endpoint, called with a key
    the demo makes) answers for the test images; the demo exits 0."""
    env = {**os.environ, "LOOM_DEMO_HOME": str(tmp_path / "demo")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "finished: COMPLETED" in done.stdout
    assert " right; metrics at " in done.stdout
