"""A gateway's monitor says why its detector cannot start — "failing" with the reason —
rather than "starting" for ever: a detector that hangs past its start deadline, one whose
environment lacks Alibi Detect, and one whose reference cannot be read. Real detector
processes, no platform (and no Alibi Detect: each fails before it would import it)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import numpy as np

from loom.serving.monitor import Monitor
from loom.serving.spec import DeploymentSpec

HANGS = """#!/bin/sh
echo '{"type": "loading"}'
exec sleep 600
"""


def watch(folder: Path, python: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The monitor's status once it leaves `starting` (or after 60 s), its detector stopped."""
    spec = DeploymentSpec(
        name="d",
        model_dir=str(folder / "model-v1"),
        model_version="1",
        monitoring={"drift": True, "window": 10},
        monitor_python=python,
        monitor_start_timeout_s=timeout_s,
    )

    async def run() -> dict[str, Any]:
        monitor = Monitor.of(folder, spec)
        assert monitor is not None
        monitor.start()
        try:
            for _ in range(600):
                if monitor.state == "failing":
                    break
                await asyncio.sleep(0.1)
            return monitor.status()
        finally:
            await monitor.stop()

    return asyncio.run(run())


def model(tmp_path: Path, reference: bytes | None = None) -> Path:
    folder = tmp_path / "model-v1"
    folder.mkdir()
    path = folder / "reference.npz"
    if reference is None:
        np.savez(path, x=np.zeros((20, 3), dtype=np.float32))
    else:
        path.write_bytes(reference)
    return tmp_path


def test_a_hung_detector_fails_past_its_start_deadline(tmp_path: Path) -> None:
    """A detector that never says it is ready is failing once its start deadline passes,
    saying so and what it was doing, and is stopped."""
    python = tmp_path / "python"
    python.write_text(HANGS)
    python.chmod(0o755)
    status = watch(model(tmp_path), str(python), timeout_s=1.0)
    assert status["state"] == "failing"
    assert "not ready within 1 s" in status["message"]
    assert "importing Alibi Detect" in status["message"]


def test_a_detector_without_alibi_detect_says_so(tmp_path: Path) -> None:
    """Run by an interpreter that lacks Alibi Detect (Loom's own), the detector exits at once
    and the monitor is failing with the import's error, not waiting for it."""
    status = watch(model(tmp_path), sys.executable)
    assert status["state"] == "failing"
    assert "Alibi Detect cannot be imported" in status["message"]
    assert "alibi_detect" in status["message"]


def test_an_unreadable_reference_is_named(tmp_path: Path) -> None:
    """A reference that is not an array file stops the detector before any import, and the
    monitor says no reference could be read."""
    status = watch(model(tmp_path, b"not an npz"), sys.executable)
    assert status["state"] == "failing"
    assert "no version's reference data could be read" in status["message"]
