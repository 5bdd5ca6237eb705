"""The drift and outlier detector as the gateway runs it: a process of its own in the
environment that holds Alibi Detect, fed frames on stdin, answering JSON lines on stdout."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loom import tracking
from tests.monitoring.detector_env import detector_python

pytestmark = pytest.mark.integration

WINDOW = 200
PER_REQUEST = 10


class Detector:
    """`python -m loom.serving.detector` with one version's reference."""

    def __init__(self, reference: Path, **config: Any) -> None:
        settings = {"references": {"1": str(reference)}, "window": WINDOW, **config}
        self.process = subprocess.Popen(
            [detector_python(), "-m", "loom.serving.detector", json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.sent = 0
        while (said := self.next())["type"] == "loading":  # said first, before the import
            pass
        assert said["type"] == "ready", said

    def send(self, body: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        data = json.dumps(body).encode()
        self.sent += 1
        header = {"id": f"r{self.sent}", "version": "1", "time": float(self.sent), "n": len(data)}
        self.process.stdin.write(json.dumps(header).encode() + b"\n" + data)
        self.process.stdin.flush()

    def next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the detector exited"
        found: dict[str, Any] = json.loads(line)
        return found

    def until(self, kind: str) -> dict[str, Any]:
        while (said := self.next())["type"] != kind:
            pass
        return said

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def v1(rows: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {"instances": rows.tolist()}


def v2(rows: np.ndarray[Any, Any]) -> dict[str, Any]:
    tensor = {"name": "x", "shape": list(rows.shape), "datatype": "FP32"}
    return {"inputs": [{**tensor, "data": rows.ravel().tolist()}]}


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Detector]:
    """One detector for the module (Alibi Detect takes a while to import on a busy machine)."""
    folder = tmp_path_factory.mktemp("reference")
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(3000, 4)).astype(np.float32)
    path = tracking.save_reference(
        reference, feature_names=["a", "b", "c", "d"], max_rows=1000, directory=folder
    )
    found = Detector(path, outlier_fpr=0.001)
    yield found
    found.close()


def test_reference_traffic_raises_no_drift(detector: Detector) -> None:
    """Ten windows of requests drawn from the reference's distribution (V1 and V2 alike) are
    all judged free of drift, and carry each window's size, p-value and score."""
    rng = np.random.default_rng(2)
    windows = []
    for index in range(10 * WINDOW // PER_REQUEST):
        rows = rng.normal(size=(PER_REQUEST, 4)).astype(np.float32)
        detector.send(v1(rows) if index % 2 else v2(rows))
        if (index + 1) * PER_REQUEST % WINDOW == 0:
            windows.append(detector.until("window"))
    assert [w["drift"] for w in windows] == [False] * 10
    assert all(w["size"] == WINDOW and w["p_value"] > 0.05 / 4 for w in windows)
    assert windows[0]["detail"]["p_values"].keys() == {"a", "b", "c", "d"}


def test_one_shifted_feature_drifts_within_one_window(detector: Detector) -> None:
    """A window whose feature `c` moved by one standard deviation drifts, naming `c` only."""
    rng = np.random.default_rng(3)
    for _ in range(WINDOW // PER_REQUEST):
        rows = rng.normal(size=(PER_REQUEST, 4)).astype(np.float32)
        rows[:, 2] += 1.0
        detector.send(v1(rows))
    window = detector.until("window")
    assert window["drift"] is True
    assert window["features"] == ["c"]
    assert window["p_value"] < 0.05 / 4


def test_an_outlier_request_is_flagged(detector: Detector) -> None:
    """A request far outside the reference is flagged with its id, score and threshold; the
    ordinary ones around it are not."""
    rng = np.random.default_rng(4)
    detector.send(v1(rng.normal(size=(1, 4)).astype(np.float32)))
    detector.send(v1(np.array([[9.0, -9.0, 9.0, -9.0]], dtype=np.float32)))
    flagged = detector.until("outlier")
    assert flagged["id"] == f"r{detector.sent}"
    assert flagged["score"] > flagged["threshold"]


def test_a_frame_it_cannot_read_is_skipped(detector: Detector) -> None:
    """A frame whose header is not JSON is reported as a problem and skipped; the request
    after it is still judged."""
    assert detector.process.stdin is not None
    detector.process.stdin.write(b"not a header\n")
    detector.send(v1(np.array([[9.0, -9.0, 9.0, -9.0]], dtype=np.float32)))
    assert "could not read" in detector.until("problem")["message"]
    assert detector.until("outlier")["id"] == f"r{detector.sent}"


def test_reference_is_bounded_and_never_pickled(tmp_path: Path) -> None:
    """save_reference keeps at most max_rows rows (with their labels) in a file NumPy reads
    back with pickling off."""
    x = np.arange(5000 * 3, dtype=np.float32).reshape(5000, 3)
    path = tracking.save_reference(x, np.arange(5000), max_rows=100, directory=tmp_path)
    with np.load(path, allow_pickle=False) as data:
        assert data["x"].shape == (100, 3) and data["y"].shape == (100,)
        assert (data["x"][:, 0] / 3).astype(int).tolist() == data["y"].tolist()
    with pytest.raises(ValueError, match="labels"):
        tracking.save_reference(x, np.arange(3), directory=tmp_path)
