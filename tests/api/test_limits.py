"""What one account may cost the platform, against a real server: manifest bombs answered at
once while the API stays responsive, rate limits, the queued-jobs cap, the log cap and retention."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

CODE = make_zip({"train.py": "print(1)"})
CEILING_S = 5.0  # generous: the API used to stall for 138 s on an 8.5 MB manifest
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


def start(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Server:
    return Server(tmp_path_factory.mktemp(name) / "home", **env).start()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Jobs stay queued (a quota of no running jobs); at most 3 queued per user."""
    server = start(tmp_path_factory, "limits", LOOM_QUOTA_JOBS="0", LOOM_MAX_QUEUED_JOBS="3")
    yield server
    server.stop()


def post_manifest(srv: Server, text: bytes) -> tuple[httpx.Response, float]:
    files = {
        "manifest": ("manifest.yml", text, "application/yaml"),
        "model_definition": ("model.zip", CODE, "application/zip"),
    }
    headers = {"Authorization": f"Bearer {srv.admin_token}"}
    began = time.monotonic()
    response = httpx.post(f"{srv.url}/v1/jobs", files=files, headers=headers, timeout=300)
    return response, time.monotonic() - began


class HealthProbe:
    """Polls `GET /health` from a thread and keeps the slowest answer."""

    def __init__(self, srv: Server) -> None:
        self.url, self.slowest, self._stop = f"{srv.url}/health", 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            httpx.get(self.url, timeout=300).raise_for_status()
            self.slowest = max(self.slowest, time.monotonic() - began)
            time.sleep(0.02)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def report(what: str, took: float, probe: HealthProbe) -> None:
    print(f"\n{what}: answered in {took:.3f} s; slowest /health meanwhile {probe.slowest:.3f} s")


def test_an_oversized_manifest_is_413_at_once(srv: Server) -> None:
    """An 8.5 MB manifest is refused with 413 in seconds, not parsed, while /health stays fast."""
    text = b"name: big\ndata: [" + b"{a: 1}, " * (8_500_000 // 8) + b"]\n"
    with HealthProbe(srv) as probe:
        response, took = post_manifest(srv, text)
    report("8.5 MB manifest", took, probe)
    assert response.status_code == 413
    assert "LOOM_MAX_MANIFEST_BYTES" in response.json()["error"]
    assert took < CEILING_S
    assert probe.slowest < CEILING_S


def test_an_alias_bomb_is_400_c101_at_once(srv: Server) -> None:
    """A 'billion laughs' manifest is refused 400 C101 with the reason, in seconds."""
    assert len(LAUGHS) < 500
    with HealthProbe(srv) as probe:
        response, took = post_manifest(srv, LAUGHS.encode())
    report("alias bomb", took, probe)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "C101"
    assert "anchors and aliases" in body["error"]
    assert took < CEILING_S
    assert probe.slowest < CEILING_S


@pytest.mark.parametrize(
    ("what", "tail", "status"),
    [
        ("1 MiB of nodes", b"extra:\n" + b"  - {a: 1, b: [x, y]}\n" * 45_000, 400),
        ("1 MiB description", b"description: '" + b"word " * 200_000 + b"'\n", 201),
    ],
)
def test_a_manifest_just_under_the_cap_is_answered_at_once(
    srv: Server, what: str, tail: bytes, status: int
) -> None:
    """Nearly 1 MiB of YAML is answered in seconds while /health stays fast: too many nodes
    is 400 C101 saying so, one long value is accepted."""
    text = manifest("true").encode() + tail
    assert 900_000 < len(text) < 2**20
    with HealthProbe(srv) as probe:
        response, took = post_manifest(srv, text)
    report(what, took, probe)
    assert response.status_code == status, response.text[:500]
    if status == 400:
        assert response.json()["code"] == "C101"
        assert "more than 10000 values" in response.json()["error"]
    assert took < CEILING_S
    assert probe.slowest < CEILING_S


def test_deep_nesting_is_400_c101(srv: Server) -> None:
    """A manifest nested thousands of levels deep is refused, naming the limit."""
    response, _took = post_manifest(srv, b"a: " + b"[" * 50_000 + b"]" * 50_000)
    assert response.status_code == 400
    assert "nesting deeper than" in response.json()["error"]


def test_a_large_json_body_is_413(srv: Server) -> None:
    """A JSON body past LOOM_MAX_JSON_MB is refused before the framework parses it."""
    headers = {"Authorization": f"Bearer {srv.admin_token}", "Content-Type": "application/json"}
    body = b'{"name": "' + b"x" * (17 * 2**20) + b'"}'
    response = httpx.post(f"{srv.url}/v1/deployments", content=body, headers=headers)
    assert response.status_code == 413


def test_queued_jobs_are_capped_per_user(srv: Server) -> None:
    """A user's 4th queued job is 429 naming the setting; halting one makes room, resuming it
    again is refused while the queue is full, and another user is not held up."""
    admin = srv.client()
    user = admin.add_user("queuer")
    client = srv.client(user["token"])
    ids = [client.submit(manifest("true"), CODE) for _ in range(3)]
    with pytest.raises(ClientError) as caught:
        client.submit(manifest("true"), CODE)
    assert caught.value.status == 429
    assert "3 queued jobs" in str(caught.value)
    assert "LOOM_MAX_QUEUED_JOBS" in str(caught.value)
    other = srv.client(admin.add_user("other")["token"])
    other.submit(manifest("true"), CODE)
    client.halt(ids[0])
    ids.append(client.submit(manifest("true"), CODE))
    with pytest.raises(ClientError) as caught:
        client.resume(ids[0])
    assert caught.value.status == 429


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A low rate per user (1 a second, 8 at once) and a cap of 1,000 log lines a job."""
    server = start(
        tmp_path_factory,
        "rated",
        LOOM_RATE_PER_S="1",
        LOOM_RATE_BURST="8",
        LOOM_MAX_LOG_LINES="1000",
    )
    yield server
    server.stop()


def test_a_user_over_the_rate_gets_429_with_retry_after(limited: Server) -> None:
    """Past the burst a user's requests are 429 with Retry-After and the JSON error body: after
    its 8 at once, a user gets no more than the rate (1 a second) lets through — however long
    the requests took on a loaded machine (12 in a row once took over 4 s, and all passed)."""
    token = limited.client().add_user("hasty")["token"]
    headers = {"Authorization": f"Bearer {token}"}
    began = time.monotonic()
    answers: list[httpx.Response] = []
    while len(answers) < 60 and 429 not in (a.status_code for a in answers):
        answers.append(httpx.get(f"{limited.url}/v1/jobs", headers=headers))
    earned = int(time.monotonic() - began) + 1  # what the rate refilled meanwhile, at most
    statuses = [a.status_code for a in answers]
    assert statuses[:8] == [200] * 8
    assert 429 in statuses, statuses
    assert statuses.index(429) <= 8 + earned, (statuses, earned)
    refused = next(a for a in answers if a.status_code == 429)
    assert int(refused.headers["Retry-After"]) >= 1
    assert "LOOM_RATE_PER_S" in refused.json()["error"]
    assert httpx.get(f"{limited.url}/health").status_code == 200


def poll_finished(client: LoomClient, job_id: str, timeout: float = 120) -> dict[str, object]:
    """Wait for the job's end at less than the user's rate (one request every 1.2 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.job(job_id)
        if job["state"] in ("COMPLETED", "FAILED", "HALTED"):
            return job
        time.sleep(1.2)
    raise AssertionError(f"job {job_id} did not finish")


def test_learners_are_not_starved_and_the_log_is_cut_with_a_notice(limited: Server) -> None:
    """A job printing 3,000 lines in many small batches completes though its owner's own
    budget is 8 requests; the TDS keeps 1,000 lines and one notice saying where it cut."""
    client = limited.client(limited.client().add_user("chatty")["token"])
    code = make_zip(
        {"train.py": "import time\nfor i in range(3000):\n"
                     "    print(i, flush=True)\n    time.sleep(0.0005)\n"}
    )  # fmt: skip
    job_id = client.submit(manifest("python train.py"), code)
    job = poll_finished(client, job_id)
    assert job["state"] == "COMPLETED", job
    last = client.logs(job_id, pos=-1, pagesize=3)
    assert [line["line"] for line in last[:2]] == ["998", "999"]
    assert last[2]["learner"] == 0
    assert "the log of this job was cut at 1,000 lines" in last[2]["line"]


def test_failed_authentication_is_slowed_per_address(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """After 3 bad tokens from one address its bad tokens are 429 with Retry-After, while a
    good token from the same address is still served (a learner guessing on loopback cannot
    lock out the others); /health still answers."""
    server = start(
        tmp_path_factory, "guarded", LOOM_AUTH_FAILURES_BURST="3", LOOM_AUTH_FAILURES_PER_MIN="6"
    )
    try:
        bad = {"Authorization": "Bearer not-a-token"}
        statuses = [httpx.get(f"{server.url}/v1/jobs", headers=bad).status_code for _ in range(3)]
        assert statuses == [401, 401, 401]
        refused = httpx.get(f"{server.url}/v1/jobs", headers=bad)
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert "failed authentications" in refused.json()["error"]
        good = {"Authorization": f"Bearer {server.admin_token}"}
        assert httpx.get(f"{server.url}/v1/jobs", headers=good).status_code == 200
        assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.stop()


def test_retention_deletes_an_old_jobs_logs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With a retention of 0.0001 days (under 9 s), a finished job's lines are deleted by the
    periodic sweep, and the job itself stays."""
    server = start(
        tmp_path_factory,
        "retained",
        LOOM_LOG_RETENTION_DAYS="0.0001",
        LOOM_RETENTION_INTERVAL_S="0.5",
    )
    try:
        client = server.client()
        job_id = client.submit(manifest("python -c 'print(42)'"), CODE)
        wait_for_state(client, job_id, {"COMPLETED"})
        assert any(line["line"] == "42" for line in client.logs(job_id))
        deadline = time.monotonic() + 60
        while client.logs(job_id) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.logs(job_id) == []
        assert client.job(job_id)["state"] == "COMPLETED"
    finally:
        server.stop()
