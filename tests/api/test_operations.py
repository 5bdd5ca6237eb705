"""Operating the platform: `/metrics` scraped from the real server after a real job, who may
scrape it, and `/ready` for load balancers, with the database up, down and at another schema."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import text

from loom.api.platform import Platform
from loom.app import create_app
from loom.settings import Settings
from loom.store.db import Database
from tests.conftest import ON_POSTGRES, Server, free_port, make_zip, manifest, wait_for_state

LINES = 30


def samples(answer: httpx.Response) -> list[Sample]:
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = text_string_to_metric_families(answer.text)
    return [sample for family in families for sample in family.samples]


def value(found: list[Sample], name: str, **labels: str) -> float:
    matching = [s.value for s in found if s.name == name and s.labels == labels]
    assert len(matching) == 1, (name, labels, [s for s in found if s.name == name])
    return matching[0]


def scrape(server: Server, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{server.url}/metrics", headers=headers)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("operations") / "home").start()
    yield started
    started.stop()


@pytest.mark.integration
def test_metrics_after_a_job(srv: Server) -> None:
    """After one job has printed its lines and completed: it is counted COMPLETED, it left
    the queue once, its lines were ingested, and its reads are timed under the route's
    template, with no job id anywhere in the scrape."""
    script = f"for i in range({LINES}):\n    print('line', i)\n"
    with srv.client() as client:
        job_id = client.submit(manifest("python job.py"), make_zip({"job.py": script}))
        job = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"})
        assert job["state"] == "COMPLETED", job
    answer = scrape(srv, srv.admin_token)
    found = samples(answer)
    assert value(found, "loom_jobs", state="COMPLETED") == 1
    assert value(found, "loom_jobs", state="QUEUED") == 0
    assert value(found, "loom_queue_length") == 0
    assert value(found, "loom_queue_wait_seconds_count") == 1
    assert value(found, "loom_admissions_total") == 1
    assert value(found, "loom_scheduler_pass_seconds_count") >= 1
    assert value(found, "loom_ingested_lines_total") >= LINES
    assert value(found, "loom_database_up") == 1
    read = {"route": "/v1/jobs/{job_id}", "method": "GET", "status_class": "2xx"}
    assert value(found, "loom_http_request_duration_seconds_count", **read) >= 1
    submitted = {"route": "/v1/jobs", "method": "POST", "status_class": "2xx"}
    assert value(found, "loom_http_request_duration_seconds_count", **submitted) == 1
    assert job_id not in answer.text
    [leader] = [s for s in found if s.name == "loom_lifecycle_leader"]
    assert leader.labels["server"].endswith(f":{srv.port}")  # host:port, its id among servers
    assert leader.value == 1


@pytest.mark.integration
def test_metrics_need_an_admin(srv: Server) -> None:
    """No token is 401 and a user's token 403: the scrape is the whole platform's activity."""
    assert scrape(srv).status_code == 401
    with srv.client() as admin:
        token = admin.add_user("scraper")["token"]
    refused = scrape(srv, token)
    assert refused.status_code == 403
    assert "admin" in refused.json()["error"]


@pytest.mark.integration
def test_public_metrics_and_readiness(tmp_path: Path) -> None:
    """With LOOM_METRICS_PUBLIC=true anyone may scrape; `/ready` and `/health` need no token."""
    server = Server(tmp_path / "home", LOOM_METRICS_PUBLIC="true").start()
    try:
        assert value(samples(scrape(server)), "loom_jobs", state="COMPLETED") == 0
        ready = httpx.get(f"{server.url}/ready")
        assert ready.status_code == 200
        dialect = "postgresql" if ON_POSTGRES else "sqlite"
        assert ready.json() == {"status": "ready", "database": dialect}
        assert httpx.get(f"{server.url}/health").json()["status"] == "ok"
    finally:
        server.stop()


# -- /ready in this process, against a database that is not there ------------------------------


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    """The app without its lifecycle running: `/ready` is all these tests ask."""
    built = create_app(Settings(home=tmp_path / "home", launcher="fake"))
    yield built
    built.state.platform.close()


def ready(app: FastAPI) -> httpx.Response:
    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://loom") as client:
            return await client.get("/ready")

    return anyio.run(ask)


def test_ready_answers_503_when_the_database_refuses(app: FastAPI) -> None:
    """A platform whose database is a PostgreSQL port nobody listens on is not ready: 503 with
    the error body, which does not give the database's address away."""
    assert ready(app).status_code == 200
    platform: Platform = app.state.platform
    closed = f"postgresql+psycopg://loom@127.0.0.1:{free_port()}/loom"
    app.state.platform = dataclasses.replace(platform, db=Database(closed))
    try:
        answer = ready(app)
    finally:
        app.state.platform.db.close()
        app.state.platform = platform
    assert answer.status_code == 503
    assert answer.json()["error"] == "not ready: the database does not answer"
    assert "127.0.0.1" not in answer.text


def test_ready_answers_503_when_the_schema_is_not_this_servers(app: FastAPI) -> None:
    """A database migrated by another version of Loom is not one this server can serve."""
    platform: Platform = app.state.platform
    with platform.db.session() as session:
        session.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    answer = ready(app)
    assert answer.status_code == 503
    assert "the database schema is at revision 9999_future" in answer.json()["error"]


@pytest.mark.integration
@pytest.mark.postgres
def test_ready_follows_a_postgres_outage(tmp_path: Path) -> None:
    """The real server on a real PostgreSQL: ready, then 503 once PostgreSQL stops, while a
    scrape still answers and says the database is down."""
    from tools.pgtemp import TempPostgres

    with TempPostgres() as pg:
        url = pg.create_database()
        server = Server(tmp_path / "home", LOOM_DATABASE_URL=url, LOOM_METRICS_PUBLIC="true")
        server.start()
        try:
            assert httpx.get(f"{server.url}/ready").json()["database"] == "postgresql"
            assert value(samples(scrape(server)), "loom_database_up") == 1
            stop_postgres(pg.data)
            answer = httpx.get(f"{server.url}/ready")
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == "not ready: the database does not answer"
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            jobs = httpx.get(f"{server.url}/v1/jobs", headers=auth)
            assert jobs.status_code == 503, jobs.text  # was a 500: a request needs the database
            assert jobs.json()["error"] == "the database does not answer now; try again shortly"
            assert jobs.headers["Retry-After"] == "5" and "127.0.0.1" not in jobs.text
            found = samples(scrape(server))
            assert value(found, "loom_database_up") == 0
            assert not [s for s in found if s.name == "loom_jobs"]
        finally:
            server.stop()


def stop_postgres(data: Path) -> None:
    """A fast shutdown (SIGINT to the postmaster): connections are cut, the server goes."""
    pid = int((data / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while (data / "postmaster.pid").exists():
        assert time.monotonic() < deadline, "PostgreSQL did not stop"
        time.sleep(0.1)
