"""TensorFlow for real: the Keras example on two learners under MultiWorkerMirroredStrategy, in
an environment the platform builds (TensorFlow 2.21 + tf2onnx), its metrics collected, its
model exported, registered, served, and answering V2 requests correctly."""

from __future__ import annotations

import re

import httpx
import numpy as np
import pytest

from loom.client.archive import zip_folder
from tests.conftest import ROOT, Server, database_free, held_out_digits, v2_request, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow, database_free]

EXAMPLE = ROOT / "examples" / "digits-tensorflow"
FINAL = {"COMPLETED", "FAILED", "HALTED"}


@pytest.mark.timeout(900)
def test_keras_two_workers_train_register_and_serve(server: Server) -> None:
    with server.client() as client:
        job_id = client.submit((EXAMPLE / "manifest.yml").read_bytes(), zip_folder(EXAMPLE))
        job = wait_for_state(client, job_id, FINAL, timeout=600, interval=1.0)
        lines = [x["line"] for x in client.logs(job_id, pagesize=10_000)]
        assert job["state"] == "COMPLETED", (job, lines[-40:])

        # The environment: TensorFlow installed beside the platform's Python, once.
        assert any("+ tensorflow-cpu==2.21" in line for line in lines), lines[:40]
        # Both workers joined one cluster (TF_CONFIG), so each counts two replicas in sync,
        # and they end the last epoch with the same numbers: the same weights.
        for task in (0, 1):
            assert any(line.startswith(f"worker {task}/2 (2 replicas in sync)") for line in lines)
        last = {
            m.group(1): m.group(2)
            for m in (re.match(r"worker (\d) epoch 8/8 (.*)", line) for line in lines)
            if m
        }
        assert set(last) == {"0", "1"} and last["0"] == last["1"], last

        # Its metrics, reported by the chief's Keras callback.
        series = client.metrics(job_id, form="series")["series"]
        assert series["test"]["accuracy"]["steps"] == list(range(1, 9))
        assert series["test"]["accuracy"]["values"][-1] > 0.9

        # Its model: a SavedModel and its ONNX conversion, registered.
        version = client.model_version("digits-tensorflow")
        files = {f["path"] for f in version["files"]}
        assert {"model.onnx", "signature.json", "saved_model/saved_model.pb"} <= files, files

        client.deploy("tf-digits", "digits-tensorflow", "latest")
        try:
            found = client.wait_deployment("tf-digits", timeout=120)
            images, labels = held_out_digits()
            answer = httpx.post(
                found["urls"]["v2_infer"],
                json=v2_request(images),
                headers={"Authorization": f"Bearer {server.admin_token}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            output = answer.json()["outputs"][0]
            assert output["name"] == "logits" and output["shape"] == [len(images), 10]
            logits = np.array(output["data"], dtype=np.float32).reshape(len(images), 10)
            accuracy = float(np.mean(logits.argmax(1) == labels))
            assert accuracy > 0.9, accuracy
            v1 = httpx.post(
                found["urls"]["v1_predict"],
                json={"instances": images[:5].tolist()},
                headers={"Authorization": f"Bearer {server.admin_token}"},
                timeout=30,
            )
            assert v1.status_code == 200, v1.text
            predictions = np.array(v1.json()["predictions"], dtype=np.float32)
            assert np.allclose(predictions, logits[:5], atol=1e-4)
        finally:
            client.delete_deployment("tf-digits")
