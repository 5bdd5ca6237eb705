"""The model server on loopback: V2 and V1 round trips for ONNX and TorchScript models, every
V2 datatype, and bad requests answered with 400/404 and a message, never a 500."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Collection, Iterator
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.integration

TYPES = {
    "BOOL": ("BOOL", [True, False]), "INT8": ("INT8", [-3, 4]), "INT16": ("INT16", [-300, 4]),
    "INT32": ("INT32", [-70000, 4]), "INT64": ("INT64", [-(2**40), 4]),
    "UINT8": ("UINT8", [200, 4]), "UINT16": ("UINT16", [60000, 4]),
    "UINT32": ("UINT32", [4_000_000_000, 4]), "UINT64": ("UINT64", [2**63, 4]),
    "FP16": ("FP16", [0.5, -2.0]), "FP32": ("FP32", [0.25, -1.5]),
    "FP64": ("FP64", [1e-300, 2.5]), "BYTES": ("BYTES", ["héllo", "world"]),
}  # fmt: skip
ONNX_ELEM = {
    "BOOL": 9, "INT8": 3, "INT16": 5, "INT32": 6, "INT64": 7, "UINT8": 2, "UINT16": 4,
    "UINT32": 12, "UINT64": 13, "FP16": 10, "FP32": 1, "FP64": 11, "BYTES": 8,
}  # fmt: skip


def identity_model(path: Path, types: Collection[str] = ONNX_ELEM) -> None:
    """An ONNX model with one Identity per datatype: `in_<TYPE>` → `out_<TYPE>`."""
    from onnx import helper, save

    nodes, inputs, outputs = [], [], []
    for name in types:
        elem = ONNX_ELEM[name]
        inputs.append(helper.make_tensor_value_info(f"in_{name}", elem, [None]))
        outputs.append(helper.make_tensor_value_info(f"out_{name}", elem, [None]))
        nodes.append(helper.make_node("Identity", [f"in_{name}"], [f"out_{name}"]))
    graph = helper.make_graph(nodes, "identity", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


def digits_models(folder: Path) -> None:
    """A small trained-shape CNN saved as TorchScript + ONNX with its signature."""
    import torch

    from loom import tracking

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )  # fmt: skip
    tracking.save_model(net, torch.zeros(1, 1, 8, 8), directory=folder,
                        input_names=("image",), output_names=("logits",))  # fmt: skip


class ModelServer:
    def __init__(self, path: Path, name: str, *extra: str) -> None:
        self.port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "loom.serving", str(path), "--name", name,
             "--port", str(self.port), "--grpc-port", str(self.grpc_port), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        for _ in range(300):
            try:
                if httpx.get(f"{self.url}/v2/health/ready").json()["ready"]:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("the model server did not start")

    def stop(self) -> str:
        self.process.terminate()
        _, err = self.process.communicate(timeout=10)
        return err.decode()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    identity_model(folder / "identity.onnx")
    digits_models(folder / "digits")
    return folder


@pytest.fixture(scope="module")
def identity(models: Path) -> Iterator[ModelServer]:
    server = ModelServer(models / "identity.onnx", "identity")
    yield server
    assert "Traceback" not in server.stop()


def test_health_and_metadata(identity: ModelServer) -> None:
    """Health, server and model metadata as the protocol shapes them."""
    assert httpx.get(f"{identity.url}/v2/health/live").json() == {"live": True}
    assert httpx.get(f"{identity.url}/v2").json()["name"] == "loom"
    meta = httpx.get(f"{identity.url}/v2/models/identity").json()
    assert meta["platform"] == "onnxruntime_onnx"
    assert {"name": "in_FP32", "datatype": "FP32", "shape": [-1]} in meta["inputs"]
    assert httpx.get(f"{identity.url}/v2/models/identity/versions/1/ready").json()["ready"]


def test_every_datatype_round_trips(identity: ModelServer) -> None:
    """Every V2 datatype goes in and comes back out with its values, shape and type."""
    request = {
        "id": "r-1",
        "inputs": [
            {"name": f"in_{n}", "shape": [2], "datatype": t, "data": d}
            for n, (t, d) in TYPES.items()
        ],
    }
    answer = httpx.post(f"{identity.url}/v2/models/identity/infer", json=request).json()
    assert answer["id"] == "r-1"
    outputs = {o["name"]: o for o in answer["outputs"]}
    for name, (datatype, data) in TYPES.items():
        out = outputs[f"out_{name}"]
        assert (out["datatype"], out["shape"]) == (datatype, [2])
        assert out["data"] == data, name


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        ("/v2/models/nope/infer", {"inputs": []}, 404, "unknown model"),
        ("/v2/models/identity/infer", b"{not json", 400, "not valid JSON"),
        (
            "/v2/models/identity/infer",
            {"inputs": [{"name": "in_FP32", "shape": [3], "datatype": "FP32", "data": [1, 2]}]},
            400,
            "shape [3] holds 3 values",
        ),
        (
            "/v2/models/identity/infer",
            {"inputs": [{"name": "in_FP32", "shape": [2], "datatype": "INT32", "data": [1, 2]}]},
            400,
            "expects FP32",
        ),
        (
            "/v2/models/identity/infer",
            {"inputs": [{"name": "in_FP32", "shape": [2], "datatype": "FP32", "data": ["a", "b"]}]},
            400,
            "not FP32",
        ),
        (
            "/v2/models/identity/infer",
            {"inputs": [{"name": "bogus", "shape": [1], "datatype": "FP32", "data": [1]}]},
            400,
            "no input 'bogus'",
        ),
        ("/v2/models/identity/infer", {"nothing": 1}, 400, "needs `inputs`"),
        ("/v2/models/identity/versions/9/infer", {"inputs": []}, 404, "no version"),
    ],
)
def test_bad_requests(
    identity: ModelServer, path: str, body: object, status: int, words: str
) -> None:
    """Each bad request gets its status and an `error` naming the problem."""
    content = body if isinstance(body, bytes) else None
    response = httpx.post(identity.url + path, content=content,
                          json=None if content else body)  # fmt: skip
    assert response.status_code == status
    assert words in response.json()["error"]


def _binary(datatype: str, data: list[object]) -> bytes:
    if datatype == "BYTES":
        return b"".join(len(x.encode()).to_bytes(4, "little") + x.encode() for x in data)  # type: ignore[attr-defined]
    from loom.serving.tensors import DATATYPES

    return (
        np.asarray(data, dtype=DATATYPES[datatype])
        .astype(np.dtype(DATATYPES[datatype]).newbyteorder("<"))
        .tobytes()
    )


def _split(response: httpx.Response) -> tuple[dict[str, object], bytes]:
    size = int(response.headers["inference-header-content-length"])
    return json.loads(response.content[:size]), response.content[size:]


def test_binary_tensor_extension_for_every_datatype(identity: ModelServer) -> None:
    """Inputs sent in binary and outputs asked for in binary keep every datatype's values."""
    inputs, chunks = [], []
    for name, (datatype, data) in TYPES.items():
        chunk = _binary(datatype, data)
        inputs.append(
            {
                "name": f"in_{name}",
                "shape": [2],
                "datatype": datatype,
                "parameters": {"binary_data_size": len(chunk)},
            }
        )
        chunks.append(chunk)
    head = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    response = httpx.post(
        f"{identity.url}/v2/models/identity/infer",
        content=head + b"".join(chunks),
        headers={"Inference-Header-Content-Length": str(len(head))},
    )
    assert response.status_code == 200, response.text
    answer, section = _split(response)
    offset = 0
    outputs = {o["name"]: o for o in answer["outputs"]}  # type: ignore[attr-defined]
    for name, (datatype, data) in TYPES.items():
        out = outputs[f"out_{name}"]
        size = out["parameters"]["binary_data_size"]
        assert (out["datatype"], out["shape"]) == (datatype, [2]) and "data" not in out
        assert section[offset : offset + size] == _binary(datatype, data), name
        offset += size
    assert offset == len(section)
    as_json = [
        {"name": f"in_{n}", "shape": [2], "datatype": t, "data": d} for n, (t, d) in TYPES.items()
    ]
    one = {
        "inputs": as_json,
        "outputs": [{"name": "out_INT8", "parameters": {"binary_data": True}}],
    }
    mixed = httpx.post(f"{identity.url}/v2/models/identity/infer", json=one)
    mixed_answer, mixed_section = _split(mixed)
    assert mixed_section == _binary("INT8", [-3, 4])
    assert [o["name"] for o in mixed_answer["outputs"]] == ["out_INT8"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("header", "size", "words"),
    [
        ("999", 4, "Inference-Header-Content-Length"),
        (None, 3, "takes 4 bytes"),
        (None, 9, "goes past"),
    ],
)
def test_bad_binary_requests(
    identity: ModelServer, header: str | None, size: int, words: str
) -> None:
    """Binary sizes that do not add up are named, with a 400."""
    head = json.dumps(
        {
            "inputs": [
                {
                    "name": "in_FP32",
                    "shape": [1],
                    "datatype": "FP32",
                    "parameters": {"binary_data_size": size},
                }
            ]
        }
    ).encode()
    response = httpx.post(
        f"{identity.url}/v2/models/identity/infer",
        content=head + b"\0" * 4,
        headers={"Inference-Header-Content-Length": header or str(len(head))},
    )
    assert response.status_code == 400
    assert words in response.json()["error"]


@pytest.mark.parametrize("file", ["model.onnx", "model.pt"])
def test_digits_model_v2_and_v1(models: Path, file: str) -> None:
    """ONNX and TorchScript: V2 infer and V1 predict answer the model's own predictions."""
    import torch

    images = np.random.default_rng(0).random((3, 1, 8, 8), dtype=np.float32)
    expected = torch.jit.load(str(models / "digits" / "model.pt"))(torch.from_numpy(images))
    server = ModelServer(models / "digits" / file, "digits")
    try:
        v2 = httpx.post(f"{server.url}/v2/models/digits/infer", json={"inputs": [
            {"name": "image", "shape": [3, 1, 8, 8], "datatype": "FP32",
             "data": images.reshape(-1).tolist()}]}).json()  # fmt: skip
        logits = np.asarray(v2["outputs"][0]["data"]).reshape(v2["outputs"][0]["shape"])
        assert np.allclose(logits, expected.detach().numpy(), atol=1e-4)
        v1 = httpx.post(f"{server.url}/v1/models/digits:predict",
                        json={"instances": images.tolist()}).json()  # fmt: skip
        assert np.allclose(np.asarray(v1["predictions"]), logits, atol=1e-4)
        assert httpx.get(f"{server.url}/v1/models/digits").json() == {
            "name": "digits", "ready": True}  # fmt: skip
        # KServe's V1 liveness and model list, as its model server answers them.
        assert httpx.get(f"{server.url}/").json() == {"status": "alive"}
        assert httpx.get(f"{server.url}/v1/models").json() == {"models": ["digits"]}
        wrong = httpx.post(f"{server.url}/v2/models/digits/infer", json={"inputs": [
            {"name": "image", "shape": [1, 8, 8], "datatype": "FP32",
             "data": [0.0] * 64}]})  # fmt: skip
        assert wrong.status_code == 400 and "expects [-1, 1, 8, 8]" in wrong.json()["error"]
    finally:
        assert "Traceback" not in server.stop()


def test_dynamic_batching_answers_each_request_its_own_rows(models: Path) -> None:
    """With batching on, 24 concurrent requests run in fewer batches, and each gets exactly
    the answer it would get alone."""
    import asyncio

    rng = np.random.default_rng(1)
    images = [rng.random((1 + i % 3, 1, 8, 8), dtype=np.float32) for i in range(24)]
    alone = ModelServer(models / "digits" / "model.onnx", "digits")
    batched = ModelServer(models / "digits" / "model.onnx", "digits",
                          "--batch-size", "16", "--batch-wait-ms", "30")  # fmt: skip

    def body(x: np.ndarray) -> dict[str, object]:
        return {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                            "data": x.reshape(-1).tolist()}]}  # fmt: skip

    async def send_all(url: str) -> list[list[float]]:
        # Each body comes in two parts, a moment apart: every request is under way (begun,
        # its body awaited) before any can run, whenever the server happens to read them.
        # A burst read whole in one turn runs request by request on the loop, unbatched.
        begun = asyncio.Event()

        async def parts(x: np.ndarray) -> AsyncIterator[bytes]:
            whole = orjson.dumps(body(x))
            yield whole[:10]
            await begun.wait()
            yield whole[10:]

        async with httpx.AsyncClient(timeout=60) as client:
            address = f"{url}/v2/models/digits/infer"
            sent = [asyncio.ensure_future(client.post(address, content=parts(x))) for x in images]
            await asyncio.sleep(0.5)
            begun.set()
            answers = await asyncio.gather(*sent)
        return [a.json()["outputs"][0]["data"] for a in answers]

    try:
        expected = asyncio.run(send_all(alone.url))
        got = asyncio.run(send_all(batched.url))
        stats = httpx.get(f"{batched.url}/metrics").text
    finally:
        alone.stop()
        assert "Traceback" not in batched.stop()
    for mine, theirs in zip(got, expected, strict=True):
        assert np.allclose(mine, theirs, atol=1e-5)
    counts = dict(line.rsplit(" ", 1) for line in stats.splitlines() if not line.startswith("#"))
    assert float(counts['loom_inference_requests_total{model="digits"}']) == 24
    batches = float(counts['loom_inference_batches_total{model="digits"}'])
    assert batches < 24
    assert float(counts['loom_inference_batch_size_count{model="digits"}']) == batches
    assert float(counts['loom_inference_batch_size_sum{model="digits"}']) == 48  # samples
    assert float(counts['loom_inference_duration_seconds_count{model="digits"}']) == 24
    assert float(counts['loom_inference_inflight_requests{model="digits"}']) == 0


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_a_burst_read_in_one_turn_is_batched(models: Path, protocol: str) -> None:
    """24 requests all waiting when the server next reads (it was stopped while they were
    sent) are counted as the server reads them, not once each begins: they run in batches.
    Counted once begun, each found itself alone and ran on the loop, one by one."""
    import asyncio
    import os
    import signal

    import grpc

    from loom.serving.v2_proto import messages

    server = ModelServer(models / "digits" / "model.onnx", "digits",
                         "--batch-size", "16", "--batch-wait-ms", "30")  # fmt: skip
    image = np.full((1, 1, 8, 8), 0.5, dtype=np.float32)
    rest = {"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                        "data": image.reshape(-1).tolist()}]}  # fmt: skip
    call = messages()["ModelInferRequest"](
        model_name="digits", raw_input_contents=[image.tobytes()]
    )
    call.inputs.add(name="image", datatype="FP32", shape=[1, 1, 8, 8])

    async def send_all() -> list[int]:
        if protocol == "rest":
            async with httpx.AsyncClient(timeout=60) as client:
                sent = [
                    asyncio.ensure_future(
                        client.post(f"{server.url}/v2/models/digits/infer", json=rest)
                    )
                    for _ in range(24)
                ]
                await asyncio.sleep(0.5)
                os.kill(server.process.pid, signal.SIGCONT)
                return [a.status_code for a in await asyncio.gather(*sent)]
        async with grpc.aio.insecure_channel(server.grpc_url) as channel:
            infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            await infer(call.SerializeToString(), timeout=30)  # connected before the stop
            os.kill(server.process.pid, signal.SIGSTOP)
            sent = [asyncio.ensure_future(infer(call.SerializeToString(), timeout=30))
                    for _ in range(24)]  # fmt: skip
            await asyncio.sleep(0.5)
            os.kill(server.process.pid, signal.SIGCONT)
            return [len(a) > 0 for a in await asyncio.gather(*sent)]  # type: ignore[misc]

    try:
        if protocol == "rest":
            os.kill(server.process.pid, signal.SIGSTOP)
        answers = asyncio.run(send_all())
        stats = httpx.get(f"{server.url}/metrics").text
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        assert "Traceback" not in server.stop()
    assert answers == [200] * 24 if protocol == "rest" else answers == [True] * 24
    counts = dict(line.rsplit(" ", 1) for line in stats.splitlines() if not line.startswith("#"))
    first = 1 if protocol == "grpc" else 0  # the call that connected
    assert float(counts['loom_inference_requests_total{model="digits"}']) == 24 + first
    assert float(counts['loom_inference_batches_total{model="digits"}']) <= 8 + first


def test_a_replica_with_a_secret_answers_its_gateway_only() -> None:
    """A replica on a cluster node (reachable by anyone on the network) answers only requests
    carrying the secret its gateway drew for it."""
    from starlette.testclient import TestClient

    from loom.serving.dataplane import DataPlane
    from loom.serving.rest import TOKEN_HEADER, build_app, require_token

    header = TOKEN_HEADER.decode()
    with TestClient(require_token(build_app(DataPlane()), "s3cret")) as client:
        refused = client.get("/v2/health/live")
        assert refused.status_code == 403 and "gateway" in refused.json()["error"]
        assert client.get("/v2/health/live", headers={header: "wrong"}).status_code == 403
        answered = client.get("/v2/health/live", headers={header: "s3cret"})
        assert answered.json() == {"live": True}
