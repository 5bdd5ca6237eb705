"""Evaluations recorded with a model version by the job that ran them, and the version's
factsheet (JSON, Markdown, the CLI) listing them with its provenance."""

from __future__ import annotations

import io
import zipfile

import pytest

from loom.client import LoomClient
from tests.conftest import Server, manifest, register, wait_for_state

pytestmark = pytest.mark.integration

EVALUATE = """
import numpy as np
from loom import evaluation
x = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
y = (x[:, 0] > 0).astype(int)
results = {
    "accuracy": evaluation.accuracy(lambda s: np.stack([-s[:, 0], s[:, 0]], 1), x, y),
    "fairness": {"protected_attribute": "b", "statistical_parity_difference": -0.05,
                 "disparate_impact": 0.91, "toolkit": "aif360"},
    "robustness": {"attack": "HopSkipJump (L-inf)", "eps": 0.1, "clean_accuracy": 1.0,
                   "adversarial_accuracy": 0.8, "toolkit": "adversarial-robustness-toolbox"},
}
evaluation.record("tabular@1", results)
"""


def test_evaluations_reach_the_factsheet(monitored_server: Server, tabular_zip: bytes) -> None:
    """A job that records accuracy, fairness and robustness for tabular@1 has them stored with
    the version (said in its status); the factsheet lists them beside its provenance, in JSON
    and Markdown."""
    with monitored_server.client() as admin:
        token = admin.add_user("evaluator")["token"]
    with LoomClient(monitored_server.url, token) as loom:
        register(loom, tabular_zip, name="tabular")
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("evaluate.py", EVALUATE)
        job_id = loom.submit(manifest("python evaluate.py", name="evaluate"), code.getvalue())
        done = wait_for_state(loom, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=120)
        assert done["state"] == "COMPLETED", done
        assert "recorded evaluations: accuracy, fairness, robustness" in done["status_message"]

        sheet = loom.factsheet("tabular", "1")
        kinds = {e["kind"]: e["results"] for e in sheet["evaluations"]}
        assert kinds["accuracy"] == {"accuracy": 1.0, "samples": 40}
        assert kinds["fairness"]["toolkit"] == "aif360"
        assert kinds["robustness"]["adversarial_accuracy"] == 0.8
        assert sheet["owner"] == "evaluator" and sheet["reference_data"] is True
        assert sheet["provenance"]["code_digest"] and sheet["drift"]["windows"] == 0
        document = loom.factsheet("tabular", "1", markdown=True)
        assert document.startswith("# Factsheet: tabular version 1")
        assert "**fairness**" in document and "disparate_impact: 0.91" in document
