"""`/v1/events`: a user's jobs' state changes as server-sent events, resumable by id; and the
jobs listing's name filter. Both are what the web UI's jobs page stands on."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def read_events(url: str, token: str, count: int, **headers: str) -> list[dict[str, Any]]:
    """The first `count` `job` events of the stream (with their ids)."""
    found: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    with httpx.stream(
        "GET", url, headers={"Authorization": f"Bearer {token}", **headers}, timeout=60
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id: "):
                event["id"] = int(line[4:])
            elif line.startswith("data: "):
                event.update(json.loads(line[6:]))
            elif line == "" and "state" in event:
                found.append(event)
                event = {}
                if len(found) == count:
                    return found
    return found


def test_a_users_stream_tells_their_jobs_changes_and_resumes(server: Server) -> None:
    with server.client() as admin:
        eve_token = admin.add_user("eve")["token"]
        url = f"{server.url}/v1/events"
        seen: list[dict[str, Any]] = []
        reader = threading.Thread(
            target=lambda: seen.extend(read_events(url, server.admin_token, 3)), daemon=True
        )
        reader.start()
        eve_seen: list[dict[str, Any]] = []
        eve_reader = threading.Thread(
            target=lambda: eve_seen.extend(read_events(url, eve_token, 1)), daemon=True
        )
        eve_reader.start()
        threading.Event().wait(1.0)  # both streams listen from now on
        job_id = admin.submit(
            manifest("python -c 'print(1)'", name="evented"), make_zip({"a.py": ""})
        )
        wait_for_state(admin, job_id, FINAL)
        reader.join(30)
        with server.client(eve_token) as eve:
            mine = eve.submit(manifest("python -c 'print(2)'", name="eves"), make_zip({"a.py": ""}))
            wait_for_state(eve, mine, FINAL)
        eve_reader.join(30)
    assert [e["job_id"] for e in seen] == [job_id] * 3
    assert [e["state"] for e in seen][:1] == ["QUEUED"]
    assert all(e["name"] == "evented" and e["owner"] == "admin" for e in seen)
    assert [e["job_id"] for e in eve_seen] == [mine]  # never the admin's
    # from an event id on: exactly what came after it
    again = read_events(url, server.admin_token, 2, **{"Last-Event-ID": str(seen[0]["id"])})
    assert [e["id"] for e in again] == [e["id"] for e in seen[1:3]]
    bad = httpx.get(url, headers={"Authorization": f"Bearer {eve_token}", "Last-Event-ID": "x"})
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]


def test_jobs_are_filtered_by_name(server: Server) -> None:
    with server.client() as client:
        for name in ("cnn-small", "CNN-large", "mlp", "a_b"):
            client.submit(manifest("python -c 'pass'", name=name), make_zip({"a.py": ""}))
        http = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {server.admin_token}"}
        )
        names = lambda q: sorted(  # noqa: E731
            j["name"] for j in http.get("/v1/jobs", params={"name": q}).json()["jobs"]
        )
        assert names("cnn") == ["CNN-large", "cnn-small"]
        listed = http.get("/v1/jobs", params={"name": "mlp"}).json()["jobs"]
        assert listed[0]["framework"] == "python"  # the jobs page's column
        assert names("_") == ["a_b"]  # a wildcard in SQL, a character here
        assert names("%") == []
        assert http.get("/v1/jobs", params={"name": "a\x01"}).status_code == 400


def test_query_counts_are_digits(server: Server) -> None:
    """`offset=0.0` or `limit=1e2` would pass as whole numbers, loosely: 400 naming the field."""
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.admin_token}"}
    )
    for query in ("offset=0.0", "limit=1e2", "limit=%205", "offset=-0.0"):
        answer = http.get(f"/v1/jobs?{query}")
        assert answer.status_code == 400, query
        assert answer.json()["field"] in ("query.offset", "query.limit"), answer.json()
    assert http.get("/v1/jobs?offset=0&limit=5").status_code == 200
