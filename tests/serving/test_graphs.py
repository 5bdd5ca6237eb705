"""Inference graphs declared as KServe's InferenceGraph, served at one endpoint on a real
platform: a Sequence whose second step takes the first's answer, a Switch routing by a condition
on the request, each step's time in the graph's metrics; and bad graphs refused with the field."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import COPY, Server, register
from tests.serving.test_rest import digits_models

pytestmark = pytest.mark.integration


def softmax_model(folder: Path) -> None:
    """A second model for the graph: logits [-1, 10] in, probabilities out."""
    import torch

    from loom import tracking

    tracking.save_model(torch.nn.Softmax(dim=1), torch.zeros(1, 10), directory=folder,
                        input_names=("logits",), output_names=("probabilities",))  # fmt: skip


def registered(owner: LoomClient, folder: Path, name: str) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(folder / "model.onnx", "model/model.onnx")
        archive.writestr("copy.py", COPY)
    register(owner, buffer.getvalue(), name=name)


@pytest.fixture(scope="module")
def members(
    code_owner: LoomClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Path]]:
    """Two ONNX deployments to route between: the digits CNN and a softmax."""
    folders = {
        "g-digits": tmp_path_factory.mktemp("gd"),
        "g-softmax": tmp_path_factory.mktemp("gs"),
    }
    digits_models(folders["g-digits"])
    softmax_model(folders["g-softmax"])
    for name, folder in folders.items():
        registered(code_owner, folder, name)
        code_owner.deploy(name, name)
    for name in folders:
        code_owner.wait_deployment(name, timeout=300)
    yield folders
    for name in folders:
        code_owner.delete_deployment(name)


def post(server: Server, url: str, body: Any) -> httpx.Response:
    return httpx.post(url, json=body, timeout=60,
                      headers={"Authorization": f"Bearer {server.admin_token}"})  # fmt: skip


def run_onnx(folder: Path, name: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import onnxruntime

    result: np.ndarray[Any, Any] = onnxruntime.InferenceSession(
        str(folder / "model.onnx")).run(None, {name: x})[0]  # fmt: skip
    return result


def test_a_sequence_feeds_one_deployment_into_the_next(
    code_platform: Server, code_owner: LoomClient, members: dict[str, Path]
) -> None:
    """root: Sequence [digits ($request), softmax ($response, predictions as instances)]: the
    graph answers the softmax of the digits' logits, at POST / and :predict; each step's time
    is in the graph's metrics, and a member it calls cannot be deleted before it."""
    spec = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "InferenceGraph",
            "metadata": {"name": "g-seq"},
            "spec": {"nodes": {"root": {"routerType": "Sequence", "steps": [
                {"name": "digits", "serviceName": "g-digits"},
                {"name": "softmax", "serviceName": "g-softmax", "data": "$response",
                 "mapPredictionsToInstances": True}]}}}}  # fmt: skip
    made = code_owner.create_graph("g-seq", spec)
    assert made["kind"] == "graph"
    try:
        found = code_owner.wait_deployment("g-seq", timeout=120)
        images = np.random.default_rng(8).random((2, 1, 8, 8), dtype=np.float32)
        logits = run_onnx(members["g-digits"], "image", images)
        want = run_onnx(members["g-softmax"], "logits", logits)
        for url in (found["endpoint"] + "/", found["urls"]["v1_predict"]):
            answer = post(code_platform, url, {"instances": images.tolist()})
            assert answer.status_code == 200, answer.text
            np.testing.assert_allclose(answer.json()["predictions"], want, atol=1e-5)
        with pytest.raises(ClientError, match="is a step of graph 'g-seq'"):
            code_owner.delete_deployment("g-digits")
        token = {"Authorization": f"Bearer {code_platform.admin_token}"}
        metrics = httpx.get(found["urls"]["metrics"], timeout=30, headers=token)
        counted = [line for line in metrics.text.splitlines()
                   if line.startswith("loom_graph_step_duration_seconds_count")]  # fmt: skip
        assert any('step="digits"' in line and line.endswith(" 2.0") for line in counted), counted
        assert any('step="softmax"' in line for line in counted), counted
    finally:
        code_owner.delete_deployment("g-seq")


def test_a_switch_routes_by_a_condition_on_the_request(
    code_platform: Server, code_owner: LoomClient, members: dict[str, Path]
) -> None:
    """root: Switch: a request whose `scores` hold a value above 5 goes to the softmax, any
    other with instances to the digits; one that matches no condition is a 404."""
    spec = {"nodes": {"root": {"routerType": "Switch", "steps": [
        {"serviceName": "g-softmax", "condition": "scores.#(>5)"},
        {"serviceName": "g-digits", "condition": "instances"}]}}}  # fmt: skip
    code_owner.create_graph("g-switch", spec)
    try:
        found = code_owner.wait_deployment("g-switch", timeout=120)
        url = found["urls"]["v1_predict"]
        logits = np.arange(10, dtype=np.float32)[None]
        high = post(code_platform, url, {"scores": [9], "instances": logits.tolist()})
        assert high.status_code == 200, high.text
        want = run_onnx(members["g-softmax"], "logits", logits)
        np.testing.assert_allclose(high.json()["predictions"], want, atol=1e-6)
        images = np.zeros((1, 1, 8, 8), dtype=np.float32)
        low = post(code_platform, url, {"scores": [1], "instances": images.tolist()})
        assert low.status_code == 200, low.text
        assert np.shape(low.json()["predictions"]) == (1, 10)
        none = post(code_platform, url, {"rows": []})
        assert none.status_code == 404, none.text
    finally:
        code_owner.delete_deployment("g-switch")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"nodes": {"first": {"routerType": "Sequence", "steps": [{"serviceName": "g-digits"}]}}},
         "graph.spec.nodes"),
        ({"nodes": {"root": {"routerType": "Fanout", "steps": []}}},
         "graph.spec.nodes.root.routerType"),
        ({"nodes": {"root": {"routerType": "Splitter", "steps": [
            {"serviceName": "g-digits", "weight": 60}]}}}, "graph.spec.nodes.root.steps"),
        ({"nodes": {"root": {"routerType": "Switch", "steps": [
            {"serviceName": "g-digits", "condition": "a.*"}]}}},
         "graph.spec.nodes.root.steps[0].condition"),
        ({"nodes": {"root": {"routerType": "Sequence", "steps": [
            {"serviceUrl": "http://elsewhere"}]}}}, "graph.spec.nodes.root.steps[0].serviceUrl"),
        ({"nodes": {"root": {"routerType": "Sequence", "steps": [{"nodeName": "root"}]}}},
         "graph.spec.nodes.root"),
        ({"nodes": {"root": {"routerType": "Sequence", "steps": [
            {"serviceName": "someone-elses"}]}}}, "graph"),
    ],
)  # fmt: skip
def test_bad_graphs_are_refused_with_the_field(
    code_owner: LoomClient, spec: dict[str, Any], field: str
) -> None:
    """A missing root, an unknown router, weights that do not add up to 100, a condition
    outside the GJSON subset, a URL instead of a deployment, a cycle, a deployment the owner
    does not have: each a 400 that names the field."""
    with pytest.raises(ClientError) as raised:
        code_owner.create_graph("g-bad", spec)
    assert raised.value.status == 400, raised.value
    assert field.removeprefix("graph.") in str(raised.value), raised.value
