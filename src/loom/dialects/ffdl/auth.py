"""FfDL's credentials as a Loom user's: `Authorization: Basic user:<Loom token>` (what FfDL's CLI
sends from `DLAAS_USERNAME` and `DLAAS_PASSWORD`), with or without `X-Watson-Userinfo:
bluemix-instance-id=user`; Loom's own `Bearer <token>` and the swagger's
`X-Watson-Authorization-Token: <token>` too.

FfDL trusted a gateway in front of it to have checked the user it named in `X-Watson-Userinfo`;
Loom has no such gateway, so the header never chooses a user: the token does, and a header (or a
Basic user name) naming someone else is refused like a wrong password.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import Depends, Request

from loom.api import ratelimit
from loom.api.auth import PlatformDep, caller_with
from loom.domain.errors import Forbidden, Unauthorized
from loom.store.tables import User

USERINFO = "x-watson-userinfo"
WATSON_TOKEN = "x-watson-authorization-token"


def _credentials(request: Request) -> tuple[str | None, str]:
    """The user name the request claims (None: it names none) and its token."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthorized("Authorization: Basic needs base64 of user:password") from None
        name, colon, token = decoded.partition(":")
        if not colon or not token:
            raise Unauthorized(
                "Authorization: Basic needs user:password, the password a Loom token"
            )
        return name, token
    if scheme.lower() == "bearer" and value.strip():
        return None, value.strip()
    watson = request.headers.get(WATSON_TOKEN, "").strip()
    if watson:
        return None, watson
    raise Unauthorized(
        "send `Authorization: Basic user:password` with a Loom token as the password "
        "(FfDL's CLI: DLAAS_USERNAME and DLAAS_PASSWORD)"
    )


def _userinfo(request: Request) -> str | None:
    """The user `X-Watson-Userinfo` names (`bluemix-instance-id=NAME`), if it is sent."""
    header = request.headers.get(USERINFO)
    if header is None:
        return None
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "bluemix-instance-id":
            return value.strip()
    return None


def ffdl_user(request: Request, loom: PlatformDep) -> User:
    """The Loom user FfDL's credentials stand for; 401 for a wrong password or a name that is
    not the token's user."""
    try:
        claimed, token = _credentials(request)
    except Unauthorized as bad:
        raise ratelimit.refuse_credentials(request, bad) from None
    who = caller_with(request, loom, token)
    if who.job_scope is not None:
        raise Forbidden("a learner's token cannot be used for this")
    named = {n for n in (claimed, _userinfo(request)) if n}
    for name in named:
        if name != who.user.name:
            mismatch = Unauthorized(f"user {name!r} does not hold this token")
            raise ratelimit.refuse_credentials(request, mismatch)
    return who.user


FfdlUser = Annotated[User, Depends(ffdl_user)]
