"""An existing V2 client, Triton's `tritonclient`, used as its documentation shows, unchanged:
against the model server and through a deployment's gateway, with its defaults (binary tensors
both ways) and with JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.conftest import Server, register
from tests.serving.test_rest import ModelServer, digits_models

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModelServer, Path]]:
    folder = tmp_path_factory.mktemp("v2client") / "digits"
    digits_models(folder)
    server = ModelServer(folder / "model.onnx", "digits")
    yield server, folder / "model.onnx"
    assert "Traceback" not in server.stop()


def ask(
    url: str, images: np.ndarray[Any, Any], *, binary: bool, headers: dict[str, str] | None = None
) -> np.ndarray[Any, Any]:
    client = httpclient.InferenceServerClient(url=url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("digits", headers=headers)
    metadata = client.get_model_metadata("digits", headers=headers)
    assert metadata["inputs"][0]["name"] == "image"
    tensor = httpclient.InferInput("image", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images, binary_data=binary)
    wanted = httpclient.InferRequestedOutput("logits", binary_data=binary)
    result = client.infer("digits", [tensor], outputs=[wanted], request_id="7", headers=headers)
    assert result.get_response()["id"] == "7"
    logits: np.ndarray[Any, Any] = result.as_numpy("logits")
    client.close()
    return logits


def expected(model: Path, images: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model))
    result: np.ndarray[Any, Any] = session.run(["logits"], {"image": images})[0]
    return result


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_against_the_model_server(
    digits: tuple[ModelServer, Path], binary: bool
) -> None:
    server, model = digits
    images = np.random.default_rng(3).random((5, 1, 8, 8), dtype=np.float32)
    logits = ask(server.url, images, binary=binary)
    assert logits.shape == (5, 10)
    assert np.allclose(logits, expected(model, images), atol=1e-5)


def test_tritonclient_through_a_deployment(server: Server, model_zip: bytes) -> None:
    """A deployment named `digits` answers the client the same way, through its gateway, with
    the owner's token in an Authorization header."""
    images = np.random.default_rng(4).random((3, 1, 8, 8), dtype=np.float32)
    with server.client() as client:
        register(client, model_zip)
        client.deploy("digits", "digits")
        found = client.wait_deployment("digits")
        model = server.home.parent / "d.onnx"
        client.download_model("digits", "latest", model, "model.onnx")
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        logits = ask(found["endpoint"], images, binary=True, headers=headers)
        assert np.allclose(logits, expected(model, images), atol=1e-5)
        client.delete_deployment("digits")
