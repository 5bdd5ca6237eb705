"""One platform for a module of monitoring tests, whose gateways run detectors in the
environment the platform's builder makes (built once, kept between runs), and a small tabular
model registered with its reference data."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import COPY, Server, stop_deployments
from tests.monitoring.detector_env import detector_python, platform_settings

FEATURES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def monitored_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("monitoring") / "home"
    detector_python()  # built here, once, rather than by the first gateway (minutes)
    # every request reaches the detector, however busy the machine running the tests is (its
    # CPU budget would send a share: tests/serving/test_monitor_budget.py), so windows are exact
    server = Server(home, **platform_settings(), LOOM_MONITORING_CPU_BUDGET="0").start()
    yield server
    server.stop()
    stop_deployments(server.home)


def tabular_model(folder: Path) -> None:
    """A linear classifier of four features (ONNX, input `x`) and its reference data."""
    import torch

    from loom import tracking

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    tracking.save_model(net, torch.zeros(1, 4), directory=folder, input_names=("x",),
                        output_names=("y",))  # fmt: skip
    reference = np.random.default_rng(1).normal(size=(2000, 4)).astype(np.float32)
    tracking.save_reference(reference, feature_names=FEATURES, max_rows=1000, directory=folder)


@pytest.fixture(scope="session")
def tabular_zip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("tabular") / "model"
    tabular_model(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.iterdir():
            archive.write(path, f"model/{path.name}")
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()
