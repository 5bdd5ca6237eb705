"""FfDL's clients on FfDL's own paths: `/v1/models` is Loom's model registry, so a request
there is FfDL's only when it says so — by FfDL's credentials (`Authorization: Basic`, which
Loom's own API never takes, or FfDL's `X-Watson-Userinfo` / `X-Watson-Authorization-Token`
headers). Such a request is served by the FfDL API under `/ffdl`; every other request is Loom's.
So FfDL's CLI works with `DLAAS_URL` at the platform's root as well as at `/ffdl`.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from loom.dialects.ffdl.routes import PREFIX

FFDL_PATHS = ("/v1/models", "/v1/logs/")
_MARKS = (b"x-watson-userinfo", b"x-watson-authorization-token")


def is_ffdl_client(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name in _MARKS:
            return True
        if name == b"authorization" and value[:6].lower() == b"basic ":
            return True
    return False


class RecogniseFfdlClients:
    """ASGI middleware: an FfDL client's request on FfDL's bare paths goes to `/ffdl`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path: str = scope["path"]
            if path.startswith(FFDL_PATHS) and is_ffdl_client(scope["headers"]):
                scope = {**scope, "path": PREFIX + path, "raw_path": (PREFIX + path).encode()}
        await self.app(scope, receive, send)
