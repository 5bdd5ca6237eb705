"""A pipeline's evaluation step runs AIF360, ART, SHAP and Captum for real, in the step's own
environment (never Loom's core install), on the version the training step registered; the
results are stored with that version and its factsheet (JSON and Markdown) lists them."""

from __future__ import annotations

import pytest

from loom.client import LoomClient
from tests.conftest import Server, make_zip

pytestmark = pytest.mark.integration

# A linear classifier of four features, the last a protected attribute (0/1) the label leans
# on; the held-out set beside the model in RESULT_DIR, for the next step.
TRAIN = """
import os
import numpy as np
import torch
from loom import tracking

rng = np.random.default_rng(0)
x = rng.normal(size=(300, 4)).astype(np.float32)
x[:, 3] = rng.random(300) > 0.5
y = (x[:, 0] + 0.5 * x[:, 3] > 0).astype(np.int64)
torch.manual_seed(0)
net = torch.nn.Linear(4, 2)
opt = torch.optim.Adam(net.parameters(), 0.1)
for _ in range(100):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(torch.from_numpy(x[:200])),
                                      torch.from_numpy(y[:200])).backward()
    opt.step()
tracking.save_model(torch.nn.Sequential(net, torch.nn.Softmax(1)), torch.zeros(1, 4),
                    input_names=("x",), output_names=("p",))
tracking.save_reference(x[:200], y[:200], feature_names=["a", "b", "c", "d"])
np.savez(os.path.join(os.environ["RESULT_DIR"], "test.npz"), x_test=x[200:], y_test=y[200:])
"""

TOOLKITS = ["aif360==0.6.1", "adversarial-robustness-toolbox==1.20.1", "shap==0.51.0"]
EVALUATE = (
    "python -m loom.evaluation --model-dir inputs/train/model --data inputs/train/test.npz "
    "--record ${{ steps.train.outputs.model }} --protected 3 --features a,b,c,d --samples 12"
)
PIPELINE = {
    "name": "credit-evaluation",
    "steps": [
        {
            "name": "train",
            "kind": "job",
            "manifest": {
                "name": "train",
                "model_name": "credit",
                "cpus": 1,
                "memory": "1Gb",
                "framework": {"name": "python", "command": "python train.py"},
            },
        },
        {
            "name": "evaluate",
            "kind": "job",
            "inputs": {"train": "${{ steps.train.outputs.job_id }}"},
            "manifest": {
                "name": "evaluate",
                "cpus": 1,
                "memory": "2Gb",
                "framework": {"name": "python", "command": EVALUATE},
                "environment": {"pip": TOOLKITS},
            },
        },
    ],
}


@pytest.mark.timeout(900)  # the toolkits' environment is built once (minutes), then reused
def test_an_evaluation_step_reaches_the_factsheet(monitored_server: Server) -> None:
    """The training step registers credit@1; the evaluation step (`python -m loom.evaluation`
    with the toolkits in its environment) measures accuracy, AIF360 fairness over the
    protected column, ART robustness and SHAP/Captum attributions, and the factsheet of
    credit@1 lists each, in JSON and Markdown, beside its provenance."""
    with monitored_server.client() as admin:
        token = admin.add_user("evaluator")["token"]
    with LoomClient(monitored_server.url, token) as loom:
        run = loom.run_pipeline(PIPELINE, make_zip({"train.py": TRAIN}))
        done = loom.wait_pipeline_run(run["id"], timeout_s=840)
        assert done["state"] == "SUCCEEDED", [(s["name"], s.get("reason")) for s in done["steps"]]

        sheet = loom.factsheet("credit", "1")
        kinds = {e["kind"]: e["results"] for e in sheet["evaluations"]}
        assert set(kinds) == {"accuracy", "fairness", "robustness", "explanations"}
        assert kinds["accuracy"]["accuracy"] > 0.8 and kinds["accuracy"]["samples"] == 100
        fairness = kinds["fairness"]
        assert fairness["toolkit"] == "aif360" and fairness["protected_attribute"] == "d"
        assert -1.0 <= fairness["statistical_parity_difference"] <= 1.0
        robustness = kinds["robustness"]
        assert robustness["toolkit"] == "adversarial-robustness-toolbox"
        assert 0.0 <= robustness["adversarial_accuracy"] <= robustness["clean_accuracy"]
        explained = kinds["explanations"]  # both rank the feature the label rests on first
        assert next(iter(explained["importance"])) == "a"
        assert next(iter(explained["captum"]["importance"])) == "a"
        assert sheet["owner"] == "evaluator" and sheet["reference_data"] is True
        assert sheet["provenance"]["code_digest"]

        document = loom.factsheet("credit", "1", markdown=True)
        assert document.startswith("# Factsheet: credit version 1")
        assert "**fairness**" in document and "disparate_impact" in document
        assert "adversarial_accuracy" in document
