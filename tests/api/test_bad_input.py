"""Every bad request gets its status, FfDL's code and a message naming the problem; never a 500."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, make_zip, manifest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Server:
    server = Server(tmp_path_factory.mktemp("bad") / "home", LOOM_MAX_UPLOAD_MB="1").start()
    yield server  # type: ignore[misc]
    server.stop()


def post_job(srv: Server, manifest_text: str | None, code: bytes | None) -> httpx.Response:
    files = {}
    if manifest_text is not None:
        files["manifest"] = ("manifest.yml", manifest_text.encode(), "application/yaml")
    if code is not None:
        files["model_definition"] = ("model.zip", code, "application/zip")
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    return httpx.post(f"{srv.url}/v1/jobs", files=files or {"x": ("x", b"")}, headers=headers)


GOOD_ZIP = make_zip({"train.py": "print(1)"})


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (manifest("true", learners=0), "learners"),
        (manifest("true", memory="12parsecs"), "memory"),
        (manifest("true") + "favourite_colour: blue\n", "favourite_colour"),
        ("name: x\n", "framework"),
        ("this: [is: not: yaml", None),
    ],
)
def test_invalid_manifest_is_c101_naming_the_field(
    srv: Server, text: str, field: str | None
) -> None:
    """A bad manifest answers 400 C101 with the field."""
    response = post_job(srv, text, GOOD_ZIP)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "C101"
    if field:
        assert body["field"] == field
        assert field in body["error"]


def encrypted_zip() -> bytes:
    """A zip whose entry claims to be encrypted (general purpose flag bit 0)."""
    data = bytearray(make_zip({"train.py": "print(1)"}))
    data[6] |= 1
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 1
    return bytes(data)


@pytest.mark.parametrize(
    "code",
    [
        encrypted_zip(),
        b"PK\x03\x04 definitely not a zip",
        b"",
        make_zip({"../../etc/cron.d/evil": "x"}),
        make_zip({"/abs/path.py": "x"}),
    ],
)
def test_bad_zip_is_c102(srv: Server, code: bytes) -> None:
    """A corrupt, empty or escaping archive answers 400 C102."""
    response = post_job(srv, manifest("true"), code)
    assert response.status_code == 400
    assert response.json()["code"] == "C102"


def test_missing_parts(srv: Server) -> None:
    """Without a manifest part: C101; without the code part: C102."""
    assert post_job(srv, None, GOOD_ZIP).json()["code"] == "C101"
    assert post_job(srv, manifest("true"), None).json()["code"] == "C102"


def test_oversized_upload_is_413(srv: Server) -> None:
    """An upload over the limit answers 413, with a declared length or a chunked body."""
    big = make_zip({"weights.bin": "x"}) + b"\0" * (2 * 2**20)
    assert post_job(srv, manifest("true"), big).status_code == 413

    def chunks():  # type: ignore[no-untyped-def]
        yield (
            b'--xyz\r\nContent-Disposition: form-data; name="model_definition"; '
            b'filename="m.zip"\r\nContent-Type: application/zip\r\n\r\n'
        )
        for _ in range(3):
            yield b"\0" * 2**20
        yield b"\r\n--xyz--\r\n"

    response = httpx.post(
        f"{srv.url}/v1/jobs",
        content=chunks(),
        headers={
            "Authorization": f"Bearer {srv.admin_token}",
            "Content-Type": "multipart/form-data; boundary=xyz",
        },
    )
    assert response.status_code == 413


def test_not_multipart(srv: Server) -> None:
    """A JSON body where multipart is expected is a 400 that says what to send."""
    response = httpx.post(
        f"{srv.url}/v1/jobs", json={"a": 1}, headers={"Authorization": f"Bearer {srv.admin_token}"}
    )
    assert response.status_code == 400
    assert "multipart" in response.json()["error"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/v1/jobs/training-nope", None, 404),
        ("GET", "/v1/jobs?state=SLEEPING", None, 400),
        # no state at all is not "any state" (the fuzzer's find: the document says a state)
        ("GET", "/v1/jobs?state=", None, 400),
        ("GET", "/v1/jobs?state=RUNNING&state=%20,%20", None, 400),
        ("GET", "/v1/jobs?limit=0", None, 400),
        ("GET", f"/v1/jobs?offset={10**20}", None, 400),
        # past SQLite's 64-bit integers: the database refused it with a 500 (the fuzzer's find)
        ("GET", f"/v1/runs?offset={10**33}", None, 400),
        ("GET", f"/v1/deployments/nope/payloads?version={10**33}", None, 400),
        ("GET", "/v1/jobs?owner=a%00b", None, 400),  # PostgreSQL text cannot hold NUL: was a 500
        ("PATCH", "/v1/jobs/training-nope", {"action": "halt"}, 404),
        ("GET", "/v1/jobs/training-nope/logs?pagesize=0", None, 400),
        ("POST", "/v1/users", {"name": "has spaces"}, 400),
        ("POST", "/v1/users", {}, 400),
        ("PATCH", "/v1/users/admin", {"quota": {"jobs": 10**20}}, 400),
        ("PATCH", "/v1/users/admin", {"quota": {"cpus": -1}}, 400),
        ("PATCH", "/v1/users/nobody", {"quota": {"cpus": 1}}, 404),
        ("PATCH", "/v1/jobs/training-nope", {"action": "resume"}, 404),
        # A NUL anywhere (PostgreSQL's text cannot hold one) is a 400, never a 500.
        ("GET", "/v1/jobs/training-%00", None, 400),
        ("GET", "/v1/models/a%00b", None, 400),
        ("POST", "/v1/me/tokens", {"name": "a\u0000b"}, 400),
        ("POST", "/v1/deployments", {"name": "d", "model": "m\u0000"}, 400),
    ],
)
def test_bad_requests(srv: Server, method: str, path: str, body: object, status: int) -> None:
    """Unknown objects are 404, bad parameters 400, each with an `error` message."""
    response = httpx.request(
        method, srv.url + path, json=body, headers={"Authorization": f"Bearer {srv.admin_token}"}
    )
    assert response.status_code == status
    assert response.json()["error"]


def test_a_nul_is_named_where_it_is(srv: Server) -> None:
    """A NUL in a query parameter, a manifest field or a stored name is a 400 naming it."""
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    answer = httpx.get(f"{srv.url}/v1/jobs?state=QUEUED&owner=x%00", headers=headers)
    assert answer.status_code == 400 and answer.json()["field"] == "owner"
    answer = post_job(srv, manifest("true", name='"a\\0b"'), GOOD_ZIP)  # YAML's escaped NUL
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == "name" and "NUL" in answer.json()["error"]


def test_a_job_bigger_than_the_platform_is_refused(srv: Server) -> None:
    """64 CPUs on this machine: a 400 naming `cpus`, with what it has, and nothing queued."""
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    before = httpx.get(f"{srv.url}/v1/jobs", headers=headers).json()["total"]
    answer = post_job(srv, manifest("true", cpus=64), GOOD_ZIP)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["field"] == "cpus" and body["code"] == "S100"
    assert "needs 64 CPUs" in body["error"] and "in total" in body["error"]
    assert httpx.get(f"{srv.url}/v1/jobs", headers=headers).json()["total"] == before


def test_bad_action_and_since(srv: Server) -> None:
    """An unknown PATCH action or an unreadable `since` is a 400 naming it."""
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    job_id = post_job(srv, manifest("true"), GOOD_ZIP).json()["id"]
    response = httpx.patch(
        f"{srv.url}/v1/jobs/{job_id}", json={"action": "explode"}, headers=headers
    )
    assert response.status_code == 400
    assert "action" in response.json()["error"]
    response = httpx.get(f"{srv.url}/v1/jobs/{job_id}/logs?since=yesterday-ish", headers=headers)
    assert response.status_code == 400
    assert "since" in response.json()["error"]
    for query in (f"pos={10**20}", f"pos=-{10**20}", f"learner={10**20}", "since=" + "9" * 400):
        response = httpx.get(f"{srv.url}/v1/jobs/{job_id}/logs?{query}", headers=headers)
        assert response.status_code == 400, query


def test_server_keeps_serving_after_bad_input(srv: Server, tmp_path: Path) -> None:
    """After all of the above, the stored jobs are intact and the server answers."""
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    response = httpx.get(f"{srv.url}/v1/jobs", headers=headers)
    assert response.status_code == 200
    assert "Traceback" not in srv.log.read_text()
