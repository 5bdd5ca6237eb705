"""examples/digits-pytorch, made quick: one learner, a few epochs (half a second each here)."""

from __future__ import annotations

import re

from loom.client import LoomClient
from tests.conftest import ROOT, make_zip, wait_for_state
from tests.ui.browser import JOB_MS

FOLDER = ROOT / "examples" / "digits-pytorch"
FINAL = {"COMPLETED", "FAILED", "HALTED"}
EXAMPLE_ARGS = "--epochs 15 --learning-rate 0.01"


def digits_manifest(name: str, epochs: int, learning_rate: float = 0.01) -> str:
    text = (FOLDER / "manifest.yml").read_text()
    text = re.sub(r"^name: .*$", f"name: {name}", text, flags=re.M)
    text = re.sub(r"^learners: \d+.*$", "learners: 1", text, flags=re.M)
    assert EXAMPLE_ARGS in text, "the example's command changed: update this manifest"
    return text.replace(EXAMPLE_ARGS, f"--epochs {epochs} --learning-rate {learning_rate}")


def digits_code() -> bytes:
    return make_zip({"train.py": (FOLDER / "train.py").read_text()})


def run_digits(client: LoomClient, name: str, learning_rate: float = 0.01) -> str:
    """A completed run of 3 epochs, submitted through the API."""
    job_id = client.submit(digits_manifest(name, 3, learning_rate), digits_code())
    job = wait_for_state(client, job_id, FINAL, timeout=JOB_MS / 1000)
    assert job["state"] == "COMPLETED", job
    return job_id
