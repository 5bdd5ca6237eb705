"""Tokens and ownership: every job is its submitter's; another user's job is simply not there."""

from __future__ import annotations

import stat

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration


def test_admin_token_written_privately(server: Server) -> None:
    """The first start writes the admin token to LOOM_HOME with mode 0600."""
    mode = stat.S_IMODE((server.home / "token").stat().st_mode)
    assert mode == 0o600
    with server.client() as client:
        assert client.users()[0]["name"] == "admin"


def test_no_or_bad_token_is_401(server: Server) -> None:
    """Without a valid bearer token every endpoint answers 401."""
    assert httpx.get(f"{server.url}/v1/jobs").status_code == 401
    bad = httpx.get(f"{server.url}/v1/jobs", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"] == "Bearer"


def test_users_cannot_see_each_others_jobs(server: Server) -> None:
    """User B gets 404 for user A's job on every endpoint, logs included, and cannot halt it."""
    with server.client() as admin:
        alice = admin.add_user("alice")
        bob = admin.add_user("bob")
        assert alice["token"] != bob["token"]
    with LoomClient(server.url, alice["token"]) as a, LoomClient(server.url, bob["token"]) as b:
        job_id = a.submit(manifest("echo private data; sleep 30"), make_zip({"x": ""}))
        wait_for_state(a, job_id, {"PROCESSING"})
        headers = {"Authorization": f"Bearer {bob['token']}"}
        for method, path in [
            ("GET", ""),
            ("GET", "/logs"),
            ("GET", "/logs?follow=true"),
            ("GET", "/definition"),
            ("GET", "/results"),
            ("PATCH", ""),
            ("DELETE", ""),
        ]:
            body = {"action": "halt"} if method == "PATCH" else None
            response = httpx.request(
                method, f"{server.url}/v1/jobs/{job_id}{path}", json=body, headers=headers
            )
            assert response.status_code == 404, (method, path)
            assert "private data" not in response.text
        assert b.jobs()["total"] == 0
        assert a.job(job_id)["state"] == "PROCESSING"
        a.halt(job_id)
        wait_for_state(a, job_id, {"HALTED"})


def test_only_admins_create_users(server: Server) -> None:
    """A user's token cannot create users (403); the admin's can, once per name (409)."""
    with server.client() as admin:
        carol = admin.add_user("carol")
        with pytest.raises(ClientError) as caught:
            admin.add_user("carol")
        assert caught.value.status == 409
    with LoomClient(server.url, carol["token"]) as client, pytest.raises(ClientError) as caught:
        client.add_user("mallory")
    assert caught.value.status == 403


STRONG = "deploy-token-7f3a9c2e41b86d05e9a1c4b7f20d6e38"


def test_admin_token_from_environment(tmp_path: pytest.TempPathFactory) -> None:
    """LOOM_ADMIN_TOKEN, as deployments set it, is the admin's token from the first start."""
    srv = Server(tmp_path / "home", LOOM_ADMIN_TOKEN=STRONG).start()  # type: ignore[operator]
    try:
        with LoomClient(srv.url, STRONG) as client:
            assert client.users()[0]["name"] == "admin"
            assert [t["name"] for t in client.tokens()] == ["LOOM_ADMIN_TOKEN"]
            assert client.tokens()[0]["expires_at"] is None
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("deploy-token-1234567890", "23 characters"),
        ("x" * 40, "only repeats a 1-character pattern"),
    ],
)
def test_weak_admin_token_stops_the_server(
    tmp_path: pytest.TempPathFactory, token: str, why: str
) -> None:
    """A short or repetitive LOOM_ADMIN_TOKEN makes the server refuse to start, saying why
    and how to make a good one."""
    srv = Server(tmp_path / "home", LOOM_ADMIN_TOKEN=token)  # type: ignore[operator]
    with pytest.raises(RuntimeError) as caught:
        srv.start()
    said = str(caught.value)
    assert "LOOM_ADMIN_TOKEN is too weak" in said and why in said
    assert "secrets.token_urlsafe(32)" in said and "Traceback" not in said
    assert token not in said
