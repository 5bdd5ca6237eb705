"""`loom tokens`, `loom users` and `loom audit` against a real server, as an admin types them."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import loom
from tests.conftest import Server

pytestmark = pytest.mark.integration


def test_tokens_users_and_audit_commands(server: Server) -> None:
    """Create, list, rotate and revoke a token; set a user's maximum priority, list their
    tokens, delete them; and read all of it back from `loom audit`."""
    made = loom(server, "tokens", "create", "--name", "ci", "--ttl-days", "2")
    assert made.returncode == 0, made.stderr
    token_id = made.stdout.split("token ")[1].split()[0]
    assert token_id in loom(server, "tokens", "list").stdout
    rotated = loom(server, "tokens", "rotate", token_id)
    assert rotated.returncode == 0, rotated.stderr
    new_id = rotated.stdout.split("token ")[1].split()[0]
    assert loom(server, "tokens", "revoke", new_id).returncode == 0
    assert new_id not in loom(server, "tokens", "list").stdout

    assert loom(server, "users", "add", "dee").returncode == 0
    quota = loom(server, "users", "quota", "dee", "--max-priority", "4")
    assert "'max_priority': 4" in quota.stdout, quota.stderr
    assert "first" in loom(server, "users", "tokens", "dee").stdout
    deleted = loom(server, "users", "delete", "dee")
    assert "deleted user dee with 0 jobs" in deleted.stdout, deleted.stderr
    missing = loom(server, "users", "delete", "dee")
    assert missing.returncode == 1 and "no user 'dee'" in missing.stderr

    log = loom(server, "audit", "--actor", "admin", "--limit", "100")
    for action in ("token.create", "token.rotate", "token.revoke", "user.change", "user.delete"):
        assert action in log.stdout, (action, log.stdout)
