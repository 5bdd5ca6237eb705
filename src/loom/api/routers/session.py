"""`/v1/session`: the web UI's sign-in. The token goes into an HttpOnly, SameSite=Strict cookie
that the page's scripts cannot read (a script injected into the page could otherwise take it
from storage), and which the platform takes only beside the UI's own header (`api.auth`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from loom.api.auth import SESSION_COOKIE, PlatformDep, UserDep
from loom.api.routers.users import me
from loom.domain.errors import InvalidInput

router = APIRouter(prefix="/v1/session", tags=["users"])


@router.post("")
def open_session(
    request: Request, response: Response, user: UserDep, loom: PlatformDep
) -> dict[str, Any]:
    """Sign the web UI in with the token in `Authorization` (a user's, not a learner's): the
    answer sets the session cookie and says who the user is, as `/v1/me`."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise InvalidInput("send the token to sign in with as `Authorization: Bearer <token>`")
    response.set_cookie(
        SESSION_COOKIE,
        token.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return me(user, loom)


@router.delete("", status_code=204)
def close_session(response: Response) -> None:
    """Sign the web UI out: its session cookie is removed."""
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
