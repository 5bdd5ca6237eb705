"""Accounts over the real server: tokens that expire, are revoked and rotated; admins who see
and halt any job and delete users; each user's maximum priority."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import count
from typing import Any

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

_names = count(1)


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One platform for the module: each test makes its own users."""
    started = Server(tmp_path_factory.mktemp("accounts") / "home").start()
    yield started
    started.stop()


def new_user(srv: Server, prefix: str = "user") -> tuple[str, LoomClient]:
    name = f"{prefix}{next(_names)}"
    with srv.client() as admin:
        token = admin.add_user(name)["token"]
    return name, LoomClient(srv.url, token)


def status_of(srv: Server, token: str, path: str = "/v1/me", method: str = "GET") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.request(method, f"{srv.url}{path}", headers=headers)


def refused(call: Any, *args: Any, **kwargs: Any) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    return caught.value


def test_revoked_token_is_401_and_gone_from_the_list(srv: Server) -> None:
    """A named token works, is listed without its value, and once revoked answers 401."""
    _, user = new_user(srv)
    with user:
        made = user.create_token("laptop")
        assert status_of(srv, made["token"]).status_code == 200
        listed = {t["id"]: t for t in user.tokens()}
        assert listed[made["id"]]["name"] == "laptop"
        assert "token" not in listed[made["id"]]
        assert sum(t["current"] for t in listed.values()) == 1  # the one this client uses
        user.revoke_token(made["id"])
        answer = status_of(srv, made["token"])
        assert answer.status_code == 401
        assert f"token {made['id']} was revoked at" in answer.json()["error"]
        assert made["id"] not in {t["id"] for t in user.tokens()}
        assert refused(user.revoke_token, made["id"]).status == 404


def test_expired_token_is_401_with_its_time(srv: Server) -> None:
    """A token past its `expires_at` answers 401 saying when it expired, and is listed so."""
    _, user = new_user(srv)
    with user:
        made = user.create_token("brief", ttl_days=1.5 / 86_400)
        assert status_of(srv, made["token"]).status_code == 200
        time.sleep(1.6)
        answer = status_of(srv, made["token"])
        assert answer.status_code == 401
        assert answer.json()["error"].startswith(f"token expired at {made['expires_at']}")
        assert answer.headers["www-authenticate"] == "Bearer"
        assert {t["id"]: t["expired"] for t in user.tokens()}[made["id"]] is True


def test_token_lifetime_cannot_exceed_the_platform_default(srv: Server) -> None:
    """Asking for a longer life than LOOM_TOKEN_TTL_DAYS is a 400 naming `ttl_days`."""
    _, user = new_user(srv)
    with user:
        error = refused(user.create_token, "forever", ttl_days=1000)
    assert error.status == 400 and "ttl_days: 1000 is longer than" in error.message


def test_rotation_replaces_the_token(srv: Server) -> None:
    """Rotating gives a new token with the same name; the old one is refused from then on."""
    _, user = new_user(srv)
    with user:
        old = user.create_token("ci", ttl_days=3)
        new = user.rotate_token(old["id"])
    assert new["name"] == "ci" and new["id"] != old["id"] and new["token"] != old["token"]
    assert status_of(srv, old["token"]).status_code == 401
    assert status_of(srv, new["token"]).status_code == 200


def test_admins_list_and_revoke_a_users_tokens(srv: Server) -> None:
    """Admins list and revoke another user's tokens; users cannot reach each other's."""
    name, user = new_user(srv)
    _, other = new_user(srv)
    with srv.client() as admin, user, other:
        made = user.create_token("spare")
        assert made["id"] in {t["id"] for t in admin.user_tokens(name)}
        assert refused(other.user_tokens, name).status == 403
        assert refused(other.revoke_token, made["id"]).status == 404
        admin.revoke_user_token(name, made["id"])
    assert status_of(srv, made["token"]).status_code == 401


def test_learner_tokens_are_not_listed(srv: Server) -> None:
    """A running job's learner token is not among its owner's tokens."""
    _, user = new_user(srv)
    with user:
        before = {t["id"] for t in user.tokens()}
        job_id = user.submit(manifest("sleep 30"), make_zip({"x": ""}))
        wait_for_state(user, job_id, {"PROCESSING"})
        assert {t["id"] for t in user.tokens()} == before
        user.delete(job_id)


def test_admin_sees_and_halts_any_job(srv: Server) -> None:
    """Admins read, list, halt, resume and delete another user's job; users still get 404."""
    name, owner = new_user(srv)
    _, other = new_user(srv)
    with srv.client() as admin, owner, other:
        job_id = owner.submit(manifest("echo hello; sleep 30"), make_zip({"x": ""}))
        wait_for_state(admin, job_id, {"PROCESSING"})
        assert admin.job(job_id)["owner"] == name
        assert admin.metrics(job_id)["job_id"] == job_id
        assert [j["id"] for j in admin.jobs(owner=name)["jobs"]] == [job_id]
        assert job_id in {j["id"] for j in admin.jobs(everyone=True)["jobs"]}
        assert refused(other.job, job_id).status == 404
        assert refused(other.jobs, everyone=True).status == 403
        assert refused(other.jobs, owner=name).status == 403
        admin.halt(job_id)
        wait_for_state(owner, job_id, {"HALTED"})
        admin.resume(job_id)
        wait_for_state(owner, job_id, {"PROCESSING"})
        admin.delete(job_id)
        assert refused(owner.job, job_id).status == 404


def test_delete_user_refuses_while_running_unless_forced(srv: Server) -> None:
    """Deleting a user with a running job is a 409 naming it; with force the job stops, the
    user and their tokens are gone, and the name can be used again."""
    name, user = new_user(srv)
    with srv.client() as admin, user:
        job_id = user.submit(manifest("sleep 60"), make_zip({"x": ""}))
        wait_for_state(user, job_id, {"PROCESSING"})
        error = refused(admin.delete_user, name)
        assert error.status == 409 and job_id in error.message and "force=true" in error.message
        gone = admin.delete_user(name, force=True)
        assert gone == {"deleted": name, "jobs": 1, "deployments": 0, "models": 0}
        assert refused(user.me).status == 401
        assert refused(admin.job, job_id).status == 404
        assert name not in {u["name"] for u in admin.users()}
        assert admin.add_user(name)["name"] == name


def test_admin_cannot_delete_themselves(srv: Server) -> None:
    """An admin deleting their own account is a 409; a user deleting anyone is a 403."""
    name, user = new_user(srv)
    with srv.client() as admin, user:
        assert refused(admin.delete_user, "admin").status == 409
        assert refused(user.delete_user, name).status == 403
        assert refused(admin.delete_user, "nobody").status == 404


def test_priority_above_the_users_maximum_is_refused(srv: Server) -> None:
    """Priority above the default maximum (10) is a 400 on `priority`; an admin raises it."""
    name = f"prio{next(_names)}"
    with srv.client() as admin:
        token = admin.add_user(name)["token"]
    with srv.client() as admin, LoomClient(srv.url, token) as user:
        assert user.me()["max_priority"] == 10
        answer = httpx.post(
            f"{srv.url}/v1/jobs",
            headers={"Authorization": f"Bearer {token}"},
            files={
                "manifest": ("m.yml", manifest("true", priority=11)),
                "model_definition": ("m.zip", make_zip({"x": ""})),
            },
        )
        assert answer.status_code == 400
        assert answer.json()["field"] == "priority"
        assert "11 is above your maximum priority of 10" in answer.json()["error"]
        changed = admin.set_quota(name, cpus=None, gpus=None, jobs=None, max_priority=20)
        assert changed["quota"]["max_priority"] == 20
        job_id = user.submit(manifest("true", priority=11), make_zip({"x": ""}))
        wait_for_state(user, job_id, {"COMPLETED"})
