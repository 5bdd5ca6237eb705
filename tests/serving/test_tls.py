"""HTTPS with a certificate made at run time: the API and a deployment's gateway serve it, the
SDK and the CLI trust it through LOOM_CA_BUNDLE or --cacert, and nothing else does."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import (
    Server,
    make_zip,
    manifest,
    register,
    stop_deployments,
    wait_for_state,
)
from tests.tls import Certificates, make_certificates

pytestmark = pytest.mark.integration

IMAGE = {
    "inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [0.5] * 64}]
}


@pytest.fixture
def https(
    tmp_path: Path, model_zip: bytes, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, Certificates]]:
    """A platform serving HTTPS, with the digits model registered and deployment `early`
    created by a plain-HTTP start first (a gateway from before HTTPS was turned on)."""
    home = tmp_path / "home"
    plain = Server(home).start()
    with plain.client() as client:
        register(client, model_zip)
        client.deploy("early", "digits", min_replicas=0)
    plain.stop()
    certs = make_certificates(tmp_path / "tls")
    server = Server(home, LOOM_TLS_CERTFILE=str(certs.cert), LOOM_TLS_KEYFILE=str(certs.key))
    server.url = server.url.replace("http://", "https://")
    monkeypatch.setenv("LOOM_CA_BUNDLE", str(certs.ca))
    try:
        yield server.start(), certs
    finally:
        server.stop()
        stop_deployments(home)


def test_learners_report_over_https(https: tuple[Server, Certificates]) -> None:
    """A job's learners ship their lines and outcome to an HTTPS API, trusting the platform's
    own certificate (sent in their spec, never its key)."""
    server, _certs = https
    with server.client() as client:
        job_id = client.submit(manifest("echo over-tls"), make_zip({"a": ""}))
        job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, timeout=60)
        assert job["state"] == "COMPLETED", job
        assert [x["line"] for x in client.logs(job_id)] == ["over-tls"]
    spec = next(server.home.glob(f"jobs/{job_id}/learners/*/attempt-1/spec.json")).read_text()
    assert "BEGIN CERTIFICATE" in spec and "PRIVATE KEY" not in spec


def test_the_api_and_a_gateway_serve_https(https: tuple[Server, Certificates]) -> None:
    """A client trusting the CA gets its answers from the API and the deployment over HTTPS;
    one that does not trust it, or that speaks plain HTTP, gets none."""
    server, certs = https
    trusted = ssl.create_default_context(cafile=str(certs.ca))
    with server.client() as client:
        assert client.health()["status"] == "ok"
        client.deploy("secure", "digits")
        found = client.wait_deployment("secure")
    assert found["endpoint"].startswith("https://127.0.0.1:")
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    answer = httpx.post(found["urls"]["v2_infer"], json=IMAGE, headers=headers, verify=trusted)
    assert answer.status_code == 200, answer.text
    refused = httpx.post(found["urls"]["v2_infer"], json=IMAGE, verify=trusted)
    assert refused.status_code == 401
    for url in (f"{server.url}/health", f"{found['endpoint']}/v2/health/live"):
        with pytest.raises(httpx.ConnectError):  # the system's CAs do not know this one
            httpx.get(url, verify=ssl.create_default_context())
        with pytest.raises(httpx.TransportError):
            httpx.get(url.replace("https://", "http://"), timeout=5)
    assert '"url": "https://' in (server.home / "server.json").read_text()
    _grpc_over_tls(found["grpc_endpoint"], certs.ca, headers["Authorization"])


def _grpc_over_tls(address: str, ca: Path, authorization: str) -> None:
    """The gRPC port speaks TLS with the same certificate: a client trusting the CA gets its
    answer; a plaintext one gets none."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    secure = grpcclient.InferenceServerClient(address, ssl=True, root_certificates=str(ca))
    tensor = grpcclient.InferInput("image", [1, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 1, 8, 8), dtype=np.float32))
    result = secure.infer("secure", [tensor], headers={"authorization": authorization})
    assert result.as_numpy("logits").shape == (1, 10)
    with pytest.raises(InferenceServerException):
        grpcclient.InferenceServerClient(address).is_server_live(client_timeout=5)


def test_a_gateway_from_before_serves_https_after_a_restart(
    https: tuple[Server, Certificates],
) -> None:
    """A deployment made while the platform served plain HTTP is restarted on HTTPS."""
    server, certs = https
    trusted = ssl.create_default_context(cafile=str(certs.ca))
    with server.client() as client:
        early = client.deployment("early")
    assert early["endpoint"].startswith("https://")
    deadline = time.monotonic() + 30
    while True:
        try:
            live = httpx.get(f"{early['endpoint']}/v2/health/live", verify=trusted)
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the gateway never served HTTPS"
            time.sleep(0.2)
    assert live.json() == {"live": True}


def test_the_cli_trusts_cacert(https: tuple[Server, Certificates]) -> None:
    """`loom --cacert CA` reaches the HTTPS platform; without it, the CLI says it cannot."""
    server, certs = https
    env = {k: v for k, v in os.environ.items() if k != "LOOM_CA_BUNDLE"}
    env.update(LOOM_URL=server.url, LOOM_TOKEN=server.admin_token, LOOM_HOME=str(server.home))
    loom = [sys.executable, "-m", "loom.cli.main"]
    trusting = [*loom, "--cacert", str(certs.ca), "deployments", "list"]
    ok = subprocess.run(trusting, env=env, capture_output=True, check=False)
    assert ok.returncode == 0, ok.stderr
    failed = subprocess.run(
        [*loom, "deployments", "list"], env=env, capture_output=True, check=False
    )
    assert failed.returncode == 1 and b"cannot reach Loom" in failed.stderr


def test_a_bad_ca_bundle_is_named(tmp_path: Path) -> None:
    """A CA bundle that cannot be read is a client error that names it, not a traceback."""
    with pytest.raises(ClientError) as caught:
        LoomClient("https://127.0.0.1:1", None, ca_bundle=str(tmp_path / "none.pem"))
    assert "none.pem" in caught.value.message
