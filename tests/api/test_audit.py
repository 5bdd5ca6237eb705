"""The audit log over the real server: what is recorded, by whom and from where, that no
token is ever in it, that only admins read it, and that its pages follow a keyset."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

SAVE_MODEL = "mkdir -p $RESULT_DIR/model && echo weights > $RESULT_DIR/model/w.bin"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("audit") / "home").start()
    yield started
    started.stop()


def everything(admin: LoomClient, **filters: str) -> list[dict[str, object]]:
    """Every matching event, newest first, by following `next_before_id`."""
    found: list[dict[str, object]] = []
    before = None
    while True:
        page = admin.audit(before_id=before, limit=3, **filters)
        found += page["events"]
        before = page["next_before_id"]
        if before is None:
            return found


def test_changes_are_recorded_without_any_token(srv: Server) -> None:
    """Job, model, token and user changes are recorded with actor and address; no token
    value appears anywhere in the log."""
    with srv.client() as admin:
        made = admin.add_user("ada")
        admin.set_quota("ada", cpus=None, gpus=None, jobs=5, max_priority=3)
        secrets = [srv.admin_token, made["token"]]
        with LoomClient(srv.url, made["token"]) as ada:
            spare = ada.create_token("spare")
            rotated = ada.rotate_token(spare["id"])
            ada.revoke_token(rotated["id"])
            secrets += [spare["token"], rotated["token"]]
            trained = ada.submit(manifest(SAVE_MODEL, name="net"), make_zip({"x": ""}))
            wait_for_state(ada, trained, {"COMPLETED"})
            ada.set_alias("net", "production", 1)
            ada.delete_model("net", "1")
            job_id = ada.submit(manifest("sleep 30", priority=2), make_zip({"x": ""}))
            ada.halt(job_id)
            wait_for_state(ada, job_id, {"HALTED"})
            ada.resume(job_id)
            ada.delete(job_id)
        by_ada = everything(admin, actor="ada")
        by_admin = everything(admin, actor="admin")
        dump = json.dumps(everything(admin))
    assert [e["action"] for e in reversed(by_ada)] == [
        "token.create", "token.rotate", "token.revoke", "job.submit", "model.alias_set",
        "model.version_delete", "job.submit", "job.halt", "job.resume", "job.delete",
    ]  # fmt: skip
    assert {e["client"] for e in by_ada} == {"127.0.0.1"}
    assert {"user.add", "user.change"} <= {e["action"] for e in by_admin}
    submit = next(e for e in by_ada if e["target"]["id"] == job_id and e["action"] == "job.submit")
    assert submit["detail"] == {"name": "test-job", "priority": 2}
    assert all(secret not in dump for secret in secrets)


def test_admin_actions_on_others_name_the_owner(srv: Server) -> None:
    """An admin halting someone's job is recorded with that job's owner; deleting the user
    records what went with them."""
    with srv.client() as admin:
        token = admin.add_user("bo")["token"]
        with LoomClient(srv.url, token) as bo:
            job_id = bo.submit(manifest(SAVE_MODEL, name="bonet"), make_zip({"x": ""}))
            wait_for_state(bo, job_id, {"COMPLETED"})
        admin.delete(job_id)
        admin.delete_user("bo")
        deleted = everything(admin, action="job.delete")[0]
        gone = everything(admin, action="user.*")[0]
    assert deleted["detail"] == {"name": "bonet", "owner": "bo"}
    assert gone["action"] == "user.delete" and gone["target"]["id"] == "bo"
    assert gone["detail"] == {"force": False, "jobs": 0, "deployments": 0, "models": 1}


def test_only_admins_read_the_log_and_refusals_are_recorded(srv: Server) -> None:
    """A user reading the log or adding a user gets 403, and each refusal is an event."""
    with srv.client() as admin:
        token = admin.add_user("cy")["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{srv.url}/v1/audit", headers=headers).status_code == 403
    with LoomClient(srv.url, token) as cy, pytest.raises(ClientError) as caught:
        cy.add_user("mallory", admin=True)
    assert caught.value.status == 403
    with srv.client() as admin:
        denied = everything(admin, actor="cy", action="admin.denied")
    assert [e["target"]["id"] for e in denied] == ["POST /v1/users", "GET /v1/audit"]


def test_pages_are_keyset_and_since_filters(srv: Server) -> None:
    """Pages by `before_id` are strictly newer-to-older without repeats; `since` in the
    future finds nothing; a bad `before_id` is a 400."""
    with srv.client() as admin:
        for n in range(4):
            admin.create_token(f"t{n}", ttl_days=1)
        events = everything(admin)
        ids = [int(str(e["id"])) for e in events]
        assert ids == sorted(set(ids), reverse=True)
        assert admin.audit(since="2999-01-01T00:00:00Z")["events"] == []
        with pytest.raises(ClientError) as caught:
            admin.audit(before_id=0)
    assert caught.value.status == 400
