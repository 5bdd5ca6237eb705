"""The V2 protocol over gRPC, spoken by Triton's own client (`tritonclient.grpc`) unchanged:
health, metadata, every datatype both raw and in typed contents, batching shared with REST,
errors with their gRPC codes; and through a deployment's gateway, with its token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from loom.serving import v2_proto
from tests.conftest import Server, register
from tests.serving.test_rest import TYPES, ModelServer, digits_models, identity, identity_model

pytestmark = pytest.mark.integration
__all__ = ["identity"]  # the model server fixture, over this module's `models`

NUMPY = {
    "BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
    "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
    "FP16": np.float16, "FP32": np.float32, "FP64": np.float64, "BYTES": np.object_,
}  # fmt: skip
CONTENTS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("grpc-models")
    identity_model(folder / "identity.onnx")
    (folder / "typed").mkdir()
    identity_model(folder / "typed" / "typed.onnx", CONTENTS)  # FP16 has no typed contents
    digits_models(folder / "digits")
    return folder


def test_messages_match_the_protocol() -> None:
    """Every field of our messages has the number, type and repetition of Triton's definition."""

    def fields(descriptor: Any, prefix: str = "") -> dict[str, tuple[Any, ...]]:
        found = {
            prefix + f.name: (
                f.number,
                f.type,
                f.is_repeated,
                getattr(f.message_type, "full_name", ""),
            )
            for f in descriptor.fields
        }
        for nested in descriptor.nested_types:
            found |= fields(nested, f"{prefix}{nested.name}.")
        return found

    compared = 0
    for message in [name for name in v2_proto.messages() if "." not in name]:
        ours = fields(v2_proto.descriptor(message))
        theirs = fields(service_pb2.DESCRIPTOR.message_types_by_name[message])
        assert {k: theirs.get(k) for k in ours} == ours, message
        compared += len(ours)
    assert compared > 50


def test_health_and_metadata(identity: ModelServer) -> None:
    client = grpcclient.InferenceServerClient(identity.grpc_url)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("identity") and client.is_model_ready("identity", "1")
    server = client.get_server_metadata()
    assert server.name == "loom" and "binary_tensor_data" in server.extensions
    meta = client.get_model_metadata("identity", as_json=True)
    assert meta["platform"] == "onnxruntime_onnx" and meta["versions"] == ["1"]
    assert {"name": "in_FP16", "datatype": "FP16", "shape": ["-1"]} in meta["inputs"]
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.is_model_ready("nope")


def test_every_datatype_round_trips_raw(identity: ModelServer) -> None:
    """Triton's client sends `raw_input_contents` and reads `raw_output_contents`."""
    client = grpcclient.InferenceServerClient(identity.grpc_url)
    inputs, outputs = [], []
    for name, (datatype, data) in TYPES.items():
        tensor = grpcclient.InferInput(f"in_{name}", [2], datatype)
        tensor.set_data_from_numpy(np.array(data, dtype=NUMPY[datatype]))
        inputs.append(tensor)
        outputs.append(grpcclient.InferRequestedOutput(f"out_{name}"))
    result = client.infer("identity", inputs, outputs=outputs, request_id="g-1")
    assert result.get_response().id == "g-1"
    for name, (datatype, data) in TYPES.items():
        got = result.as_numpy(f"out_{name}")
        assert got.shape == (2,), name
        if datatype == "BYTES":
            assert [x.decode() for x in got] == data
        else:
            assert got.dtype == NUMPY[datatype] and got.tolist() == data, name


def test_every_datatype_round_trips_in_typed_contents(models: Path) -> None:
    """A request with typed `contents` (no raw bytes) is answered in typed contents."""
    server = ModelServer(models / "typed" / "typed.onnx", "typed")
    request = service_pb2.ModelInferRequest(model_name="typed", id="typed")
    for name, (datatype, data) in TYPES.items():
        if datatype == "FP16":
            continue  # the protocol has no typed field for it
        tensor = request.inputs.add(name=f"in_{name}", datatype=datatype, shape=[2])
        values = [x.encode() for x in data] if datatype == "BYTES" else data
        getattr(tensor.contents, CONTENTS[datatype]).extend(values)
    try:
        with grpc.insecure_channel(server.grpc_url) as channel:
            answer = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    finally:
        assert "Traceback" not in server.stop()
    assert answer.id == "typed" and not answer.raw_output_contents
    outputs = {o.name: o for o in answer.outputs}
    for name, (datatype, data) in TYPES.items():
        if datatype == "FP16":
            continue
        out = outputs[f"out_{name}"]
        assert (out.datatype, list(out.shape)) == (datatype, [2])
        values = list(getattr(out.contents, CONTENTS[datatype]))
        if datatype == "BYTES":
            values = [v.decode() for v in values]
        assert values == pytest.approx(data) if datatype.startswith("FP") else values == data


def _call(url: str, request: Any) -> grpc.RpcError:
    with grpc.insecure_channel(url) as channel, pytest.raises(grpc.RpcError) as caught:
        service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    return caught.value


def _request(name: str, datatype: str, shape: list[int], raw: bytes | None = None) -> Any:
    request = service_pb2.ModelInferRequest(model_name="identity")
    request.inputs.add(name=name, datatype=datatype, shape=shape)
    if raw is not None:
        request.raw_input_contents.append(raw)
    return request


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (service_pb2.ModelInferRequest(model_name="nope"), "NOT_FOUND", "unknown model 'nope'"),
        (service_pb2.ModelInferRequest(), "INVALID_ARGUMENT", "needs `model_name`"),
        (
            service_pb2.ModelInferRequest(model_name="identity", model_version="9"),
            "NOT_FOUND",
            "no version '9'",
        ),
        (_request("in_FP32", "INT32", [1], b"\0" * 4), "INVALID_ARGUMENT", "expects FP32"),
        (_request("in_FP32", "FP32", [3], b"\0" * 4), "INVALID_ARGUMENT", "takes 12 bytes"),
        (_request("bogus", "FP32", [1], b"\0" * 4), "INVALID_ARGUMENT", "no input 'bogus'"),
        (_request("in_FP16", "FP16", [1]), "INVALID_ARGUMENT", "raw_input_contents"),
        (_request("in_FP32", "FP99", [1]), "INVALID_ARGUMENT", "unknown datatype 'FP99'"),
        (_request("in_BYTES", "BYTES", [1], b"\x09\0\0\0ab"), "INVALID_ARGUMENT", "ends early"),
    ],
)
def test_bad_requests(identity: ModelServer, request_: Any, code: str, words: str) -> None:
    """Each bad request gets its status code and a message naming the problem."""
    error = _call(identity.grpc_url, request_)
    assert error.code().name == code
    assert words in (error.details() or "")


def test_raw_contents_must_cover_every_input(identity: ModelServer) -> None:
    request = _request("in_FP32", "FP32", [1], b"\0" * 4)
    request.inputs.add(name="in_FP64", datatype="FP64", shape=[1])
    error = _call(identity.grpc_url, request)
    assert error.code().name == "INVALID_ARGUMENT"
    assert "raw_input_contents has 1 entries for 2 inputs" in (error.details() or "")


def test_grpc_and_rest_share_one_batcher(models: Path) -> None:
    """Requests over both protocols at once are run in shared batches, each answered with its
    own rows."""
    import asyncio

    import tritonclient.grpc.aio as aioclient

    server = ModelServer(models / "digits" / "model.onnx", "digits", "--batch-size", "32",
                         "--batch-wait-ms", "30")  # fmt: skip
    images = np.random.default_rng(5).random((24, 1, 8, 8), dtype=np.float32)

    async def send_all() -> list[np.ndarray[Any, Any]]:
        client = aioclient.InferenceServerClient(server.grpc_url)

        async def by_grpc(i: int) -> np.ndarray[Any, Any]:
            tensor = aioclient.InferInput("image", [1, 1, 8, 8], "FP32")
            tensor.set_data_from_numpy(images[i : i + 1])
            return (await client.infer("digits", [tensor])).as_numpy("logits")[0]  # type: ignore[no-any-return]

        async def by_rest(http: httpx.AsyncClient, i: int) -> np.ndarray[Any, Any]:
            body = {"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                                "data": images[i].reshape(-1).tolist()}]}  # fmt: skip
            answer = (await http.post(f"{server.url}/v2/models/digits/infer", json=body)).json()
            return np.array(answer["outputs"][0]["data"], dtype=np.float32)

        async def slowly(http: httpx.AsyncClient) -> np.ndarray[Any, Any]:
            """A request whose body takes a while to arrive: in flight meanwhile, so the burst's
            requests are not alone and gather into batches (a request alone runs at once)."""
            tensor = {"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                      "data": images[0].reshape(-1).tolist()}  # fmt: skip
            raw = json.dumps({"inputs": [tensor]})

            async def body() -> AsyncIterator[bytes]:
                yield raw[:10].encode()
                await asyncio.sleep(1.0)
                yield raw[10:].encode()

            answer = await http.post(f"{server.url}/v2/models/digits/infer", content=body())
            return np.array(answer.json()["outputs"][0]["data"], dtype=np.float32)

        async with httpx.AsyncClient(timeout=30) as http:
            await by_grpc(0)  # the channel is open before the burst
            slow = asyncio.create_task(slowly(http))
            await asyncio.sleep(0.3)  # its first bytes are in
            got = await asyncio.gather(
                *(by_grpc(i) if i % 2 else by_rest(http, i) for i in range(24))
            )
            first = await slow
        await client.close()
        assert np.allclose(first, got[0], atol=1e-5)
        return list(got)

    try:
        got = asyncio.run(send_all())
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        assert "Traceback" not in server.stop()
    import onnxruntime

    session = onnxruntime.InferenceSession(str(models / "digits" / "model.onnx"))
    alone = session.run(["logits"], {"image": images})[0]
    assert np.allclose(np.stack(got), alone, atol=1e-5)
    requests = _sample(metrics, "loom_inference_requests_total")
    batches = _sample(metrics, "loom_inference_batches_total")
    assert requests == 26 and batches < 24, metrics


def _sample(text: str, name: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(name + "{"))
    return float(line.rsplit(" ", 1)[1])


def test_grpc_through_a_deployment(server: Server, model_zip: bytes) -> None:
    """A deployment answers gRPC on its second port: health without a token, everything else
    with the owner's token (UNAUTHENTICATED without), inference through its replicas."""
    images = np.random.default_rng(6).random((3, 1, 8, 8), dtype=np.float32)
    with server.client() as client:
        register(client, model_zip)
        client.deploy("digits", "digits")
        found = client.wait_deployment("digits")
        address = found["grpc_endpoint"]
        rest = found["endpoint"]
        try:
            grpc_client = grpcclient.InferenceServerClient(address)
            assert grpc_client.is_server_live() and grpc_client.is_server_ready()
            with pytest.raises(InferenceServerException, match="UNAUTHENTICATED"):
                grpc_client.get_model_metadata("digits")
            headers = {"authorization": f"Bearer {server.admin_token}"}
            meta = grpc_client.get_model_metadata("digits", headers=headers, as_json=True)
            assert meta["inputs"][0]["name"] == "image"
            assert grpc_client.is_model_ready("digits", headers=headers)
            tensor = grpcclient.InferInput("image", list(images.shape), "FP32")
            tensor.set_data_from_numpy(images)
            result = grpc_client.infer("digits", [tensor], headers=headers)
            logits = result.as_numpy("logits")
            body = {"inputs": [{"name": "image", "shape": list(images.shape), "datatype": "FP32",
                                "data": images.reshape(-1).tolist()}]}  # fmt: skip
            answer = httpx.post(
                f"{rest}/v2/models/digits/infer",
                json=body,
                headers={"Authorization": headers["authorization"]},
            ).json()
            want = np.array(answer["outputs"][0]["data"], dtype=np.float32).reshape(3, 10)
            assert np.allclose(logits, want, atol=1e-5)
            metrics = httpx.get(
                f"{rest}/metrics", headers={"Authorization": headers["authorization"]}
            )
            counted = {
                line.split('code="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
                for line in metrics.text.splitlines()
                if line.startswith("loom_deployment_requests_total{")
            }
            # metadata, ready and infer over gRPC, infer over REST; the call without a token
            assert counted == {"200": 4.0, "401": 1.0}, metrics.text
        finally:
            client.delete_deployment("digits")
