"""`examples/digits-hpo/` as a user runs it, made shorter: a Katib experiment searching the
digits CNN's learning rate, width and epochs, whose best model is deployed and answers."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import yaml

from loom.client.archive import zip_folder
from tests.conftest import ROOT, Server, held_out_digits, v2_request

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "digits-hpo"


def test_the_search_finds_a_model_that_is_deployed_as_best(server: Server) -> None:
    document = yaml.safe_load((EXAMPLE / "experiment.yml").read_text())
    spec = document["spec"]
    spec["maxTrialCount"] = 3  # shorter than the example's 8, same search
    spec["parameters"][2]["feasibleSpace"] = {"min": "2", "max": "4"}  # epochs
    with server.client() as client:
        client.create_experiment(yaml.safe_dump(document), zip_folder(EXAMPLE))
        found = client.wait_experiment("digits-hpo", timeout_s=240)
        assert found["state"] == "SUCCEEDED", found["message"]
        trials = found["trial_list"]
        assert len(trials) == 3
        for trial in trials:
            values = trial["parameters"]
            assert 0.0005 <= float(values["lr"]) <= 0.05
            assert int(values["width"]) in range(4, 33, 4)
            assert 2 <= int(values["epochs"]) <= 4
        scored = [t["objective"] for t in trials if t["state"] == "SUCCEEDED"]
        assert found["best_trial"]["objective"] == max(scored)
        assert found["best_model"].startswith("digits-hpo-cnn@")

        client.deploy("digits-best", "digits-hpo-cnn", "best")
        try:
            endpoint = client.wait_deployment("digits-best", timeout=120)
            images, labels = held_out_digits()
            answer = httpx.post(
                endpoint["urls"]["v2_infer"],
                json=v2_request(images.reshape(len(images), 1, 8, 8)),
                headers={"Authorization": f"Bearer {server.admin_token}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            output = answer.json()["outputs"][0]
            logits = np.array(output["data"], dtype=np.float32).reshape(len(images), 10)
            accuracy = float(np.mean(logits.argmax(1) == labels))
            assert accuracy > 0.5, accuracy  # a few epochs; the search's own figure is above
        finally:
            client.delete_deployment("digits-best")
