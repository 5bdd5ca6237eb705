"""FfDL's REST API v1, operation by operation, against a real platform: a model posted as FfDL's
CLI posts it (multipart, Basic auth, X-Watson-Userinfo) runs to COMPLETED, and its status,
log lines, evaluation metrics, log stream, definition and trained model come back in FfDL's
shapes; the same job is seen through Loom's own API."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from websockets.sync.client import connect

from loom.client import LoomClient
from tests.conftest import Server, database_free, eventually, make_zip

pytestmark = [pytest.mark.integration, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
MANIFEST = """\
name: ffdl-rest
description: a model posted through FfDL's API
version: "1.0"
gpus: 0
cpus: 0.5
memory: 256MiB
learners: 1
framework:
  name: python
  version: "latest"
  command: python train.py
"""
TRAIN = """\
import os
from loom.tracking import log_metrics
for step in range(1, 4):
    print(f"step {step} loss {1.0 / step:.3f}", flush=True)
    log_metrics(step=step, loss=1.0 / step, accuracy=0.5 + step / 10)
with open(os.path.join(os.environ["RESULT_DIR"], "model.txt"), "w") as out:
    out.write("trained")
"""
SLEEPER = MANIFEST.replace("ffdl-rest", "ffdl-sleeper").replace(
    "python train.py", "python -c 'import time; print(\"up\", flush=True); time.sleep(300)'"
)


@dataclass
class FfdlUser:
    """A Loom user as FfDL's CLI sees one: DLAAS_URL, DLAAS_USERNAME, DLAAS_PASSWORD."""

    url: str
    name: str
    token: str

    def http(self, base: str = "/ffdl", *, password: str | None = None) -> httpx.Client:
        secret = f"{self.name}:{password or self.token}"
        headers = {
            "Authorization": "Basic " + base64.b64encode(secret.encode()).decode(),
            "X-Watson-Userinfo": f"bluemix-instance-id={self.name}",
        }
        return httpx.Client(base_url=self.url + base, headers=headers, timeout=30)


@pytest.fixture
def user(shared_server: Server, request: pytest.FixtureRequest) -> Iterator[FfdlUser]:
    name = f"ffdl-{request.node.name[5:30]}".replace("_", "-")
    with shared_server.client() as admin:
        token = admin.add_user(name)["token"]
    yield FfdlUser(shared_server.url, name, token)


def post_model(ffdl: httpx.Client, manifest: str, code: bytes) -> httpx.Response:
    files: dict[str, tuple[str, bytes, str]] = {
        "manifest": ("manifest.yml", manifest.encode(), "application/octet-stream"),
        "model_definition": ("model.zip", code, "application/zip"),
    }
    return ffdl.post("/v1/models", params={"version": "2017-02-13"}, files=files)


def status_of(ffdl: httpx.Client, model_id: str) -> str:
    found = ffdl.get(f"/v1/models/{model_id}")
    assert found.status_code == 200, found.text
    return str(found.json()["training"]["training_status"]["status"])


def wait_until(ffdl: httpx.Client, model_id: str, states: set[str], timeout: float = 90) -> str:
    eventually(lambda: status_of(ffdl, model_id) in states, timeout=timeout)
    return status_of(ffdl, model_id)


def test_a_model_posted_the_ffdl_way_trains_and_comes_back_in_ffdls_shapes(
    user: FfdlUser,
) -> None:
    """POST → COMPLETED; getModel, listModels, loglines, emetrics, logs (chunked and
    websocket), definition and trained_model all answer as FfDL's swagger says, and Loom's own
    API shows the same job."""
    code = make_zip({"train.py": TRAIN})
    with user.http() as ffdl:
        posted = post_model(ffdl, MANIFEST, code)
        assert posted.status_code == 201, posted.text
        model_id = posted.json()["model_id"]
        assert posted.json() == {"model_id": model_id, "location": f"/v1/models/{model_id}"}
        assert posted.headers["Location"] == f"/v1/models/{model_id}"
        assert wait_until(ffdl, model_id, FINAL) == "COMPLETED"

        model = ffdl.get(f"/v1/models/{model_id}", params={"version": "2017-02-13"}).json()
        assert model["name"] == "ffdl-rest"
        assert model["framework"] == {"name": "python", "version": "latest"}
        training = model["training"]
        assert (training["command"], training["cpus"], training["learners"]) == (
            "python train.py",
            0.5,
            1,
        )
        assert (training["memory"], training["memory_unit"]) == (256.0, "MiB")
        status = training["training_status"]
        assert status["status"] == "COMPLETED"
        assert status["submitted"].endswith("Z") and status["completed"].endswith("Z")

        listed = ffdl.get("/v1/models").json()["models"]
        assert [m["model_id"] for m in listed] == [model_id]

        lines = ffdl.get(f"/v1/logs/{model_id}/loglines", params={"pagesize": 100}).json()
        texts = [record["line"] for record in lines["models"]]
        assert "step 3 loss 0.333" in texts, texts
        first = lines["models"][0]["meta"]
        assert (first["training_id"], first["user_id"], first["rindex"]) == (
            model_id,
            user.name,
            "1",
        )
        last = ffdl.get(f"/v1/logs/{model_id}/loglines", params={"pos": -1, "pagesize": 1})
        assert [r["line"] for r in last.json()["models"]] == [texts[-1]]
        assert last.json()["models"][0]["meta"]["rindex"] == str(len(texts))
        back = ffdl.get(f"/v1/logs/{model_id}/loglines", params={"since_time": "-2"})
        assert [r["line"] for r in back.json()["models"]] == texts[-2:], back.text

        found = ffdl.get(f"/v1/logs/{model_id}/emetrics", params={"pagesize": 2}).json()
        assert len(found["models"]) == 2
        point = found["models"][0]
        assert point["grouplabel"] == "train"
        assert point["values"]["loss"] == {"type": "FLOAT", "value": "1.0"}
        assert point["meta"]["user_id"] == user.name and point["meta"]["rindex"] == "1"

        streamed = ffdl.get(f"/v1/models/{model_id}/logs")
        assert streamed.status_code == 200
        assert streamed.headers["content-type"].startswith("text/plain")
        assert streamed.text.splitlines() == texts

        definition = ffdl.get(f"/v1/models/{model_id}/definition")
        assert definition.status_code == 200 and definition.content == code
        trained = ffdl.get(f"/v1/models/{model_id}/trained_model")
        assert trained.status_code == 200
        with zipfile.ZipFile(io.BytesIO(trained.content)) as archive:
            assert archive.read("model.txt") == b"trained"

    websocket_url = user.url.replace("http://", "ws://") + f"/ffdl/v1/models/{model_id}/logs"
    auth = base64.b64encode(f"{user.name}:{user.token}".encode()).decode()
    with connect(websocket_url, additional_headers={"Authorization": f"Basic {auth}"}) as ws:
        received = "".join(str(message) for message in ws)
    assert received.splitlines() == texts

    with LoomClient(user.url, user.token) as loom:  # one job, seen from Loom's own API
        job = loom.job(model_id)
        assert (job["state"], job["name"]) == ("COMPLETED", "ffdl-rest")
        assert [j["id"] for j in loom.jobs()["jobs"]] == [model_id]


def test_halt_and_delete_answer_as_ffdl_did(user: FfdlUser) -> None:
    """PATCH {"status": "halt"} halts (202), a bad status is FfDL's 400, DELETE answers 200
    with the model's id and the model is then 404 in FfDL's error shape."""
    with user.http() as ffdl:
        model_id = post_model(ffdl, SLEEPER, make_zip({"x.py": ""})).json()["model_id"]
        wait_until(ffdl, model_id, {"PROCESSING"})
        bad = ffdl.patch(f"/v1/models/{model_id}", json={"status": "pause"})
        assert bad.status_code == 400
        assert bad.json()["code"] == 400 and "pause" in bad.json()["error"]
        halted = ffdl.patch(f"/v1/models/{model_id}", json={"status": "halt"})
        assert (halted.status_code, halted.json()) == (202, {"model_id": model_id})
        assert wait_until(ffdl, model_id, FINAL) == "HALTED"

        deleted = ffdl.delete(f"/v1/models/{model_id}")
        assert (deleted.status_code, deleted.json()) == (200, {"model_id": model_id})
        gone = ffdl.get(f"/v1/models/{model_id}")
        assert gone.status_code == 404
        assert gone.json()["code"] == 404 and gone.json()["error"] == "Not found"
        assert model_id in gone.json()["description"]


def test_ffdls_credentials_are_a_loom_users_and_nothing_more(user: FfdlUser) -> None:
    """Basic user:<token> is accepted with or without X-Watson-Userinfo; a wrong password,
    another user's name, or no credentials are 401s in FfDL's shape asking for Basic."""
    with user.http() as ffdl:
        assert ffdl.get("/v1/models").status_code == 200
        without_userinfo = dict(ffdl.headers)
        without_userinfo.pop("x-watson-userinfo")
        assert ffdl.get("/v1/models", headers=without_userinfo).status_code == 200
        claimed = ffdl.get("/v1/models", headers={"X-Watson-Userinfo": "bluemix-instance-id=eve"})
        assert claimed.status_code == 401
    with user.http(password="not-the-token") as wrong:
        refused = wrong.get("/v1/models")
        assert refused.status_code == 401
        assert refused.json()["code"] == 401 and refused.json()["error"] == "Unauthorized"
        assert refused.headers["WWW-Authenticate"].startswith("Basic")
    assert httpx.get(user.url + "/ffdl/v1/models").status_code == 401


def test_bare_v1_paths_serve_ffdls_clients_and_leave_loom_its_registry(user: FfdlUser) -> None:
    """With DLAAS_URL at the platform's root, FfDL's credentials reach FfDL's API; Loom's own
    bearer token on /v1/models still reaches Loom's model registry."""
    with user.http(base="") as ffdl:
        assert ffdl.get("/v1/models").json() == {"models": []}
        ffdls = ffdl.get("/v1/models/nope")
        assert (ffdls.status_code, ffdls.json()["code"], ffdls.json()["error"]) == (
            404,
            404,
            "Not found",
        )
    looms = httpx.get(
        user.url + "/v1/models/nope", headers={"Authorization": f"Bearer {user.token}"}
    )
    assert looms.status_code == 404 and "code" not in looms.json()  # the registry's own answer


def test_bad_input_is_refused_in_ffdls_shape(user: FfdlUser) -> None:
    """A bad manifest names its field ("Incorrect manifest"); FfDL's unimplemented event
    endpoints answer 501 as FfDL's server did."""
    with user.http() as ffdl:
        bad = post_model(ffdl, MANIFEST.replace("learners: 1", "learnerz: 1"), make_zip({}))
        assert bad.status_code == 400
        body = bad.json()
        assert body["description"] == "Incorrect manifest" and body["loom_code"] == "C101"
        assert "learnerz" in body["error"]
        events = ffdl.get("/v1/models/x/events/update")
        assert events.status_code == 501 and events.json()["error"] == "Not implemented"
        json.dumps(body)  # plain JSON, no Loom-only types
