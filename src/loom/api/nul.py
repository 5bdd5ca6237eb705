"""Requests whose path or query holds a NUL character get a 400 naming where.

Loom stores names and ids as text, and PostgreSQL's text cannot hold NUL: such a value would
otherwise reach a query and fail there. Bodies are checked where they are read (the manifest, the
stores' boundary); lines a learner prints keep theirs as U+FFFD."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, unquote

from starlette.types import ASGIApp, Receive, Scope, Send

from loom.api.errors import error_body
from loom.domain.errors import NUL_WHY


def nul_in(scope: Scope) -> str:
    """Where the request's path or query holds a NUL: "path", a query parameter's name, or ""."""
    if "\x00" in scope.get("path", ""):
        return "path"
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query and "\x00" not in query:
        return ""
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in value or "\x00" in name:
            return name.replace("\x00", "\\0") or "query"
    return "query" if "\x00" in unquote(query) else ""


class NoNul:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        where = nul_in(scope) if scope["type"] == "http" else ""
        if not where:
            await self.app(scope, receive, send)
            return
        body = json.dumps(error_body(f"{where}: {NUL_WHY}", field=where)).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
