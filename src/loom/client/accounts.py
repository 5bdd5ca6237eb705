"""The account calls of `LoomClient`: tokens, users and the audit log."""

from __future__ import annotations

from typing import Any

import httpx


class AccountCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # -- your own tokens -------------------------------------------------------------------
    def tokens(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._json("GET", "/v1/me/tokens")["tokens"]
        return found

    def create_token(self, name: str = "", ttl_days: float | None = None) -> dict[str, Any]:
        """A new token (in `token`, shown this once), living `ttl_days` or the default."""
        body = {"name": name, "ttl_days": ttl_days}
        made: dict[str, Any] = self._json("POST", "/v1/me/tokens", json=body)
        return made

    def revoke_token(self, token_id: str) -> None:
        self._request("DELETE", f"/v1/me/tokens/{token_id}")

    def rotate_token(self, token_id: str) -> dict[str, Any]:
        made: dict[str, Any] = self._json("POST", f"/v1/me/tokens/{token_id}/rotate")
        return made

    def me(self) -> dict[str, Any]:
        found: dict[str, Any] = self._json("GET", "/v1/me")
        return found

    # -- users (admins) --------------------------------------------------------------------
    def delete_user(self, name: str, *, force: bool = False) -> dict[str, Any]:
        params = {"force": "true"} if force else {}
        found: dict[str, Any] = self._json("DELETE", f"/v1/users/{name}", params=params)
        return found

    def user_tokens(self, name: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._json("GET", f"/v1/users/{name}/tokens")["tokens"]
        return found

    def revoke_user_token(self, name: str, token_id: str) -> None:
        self._request("DELETE", f"/v1/users/{name}/tokens/{token_id}")

    def audit(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        since: str | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """A page of the audit log, newest first; pass `next_before_id` on for the next."""
        given = {"actor": actor, "action": action, "since": since, "before_id": before_id}
        params = {k: v for k, v in given.items() if v is not None} | {"limit": limit}
        found: dict[str, Any] = self._json("GET", "/v1/audit", params=params)
        return found
