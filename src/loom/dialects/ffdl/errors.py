"""FfDL's error shape on FfDL's routes: `{"code": 404, "error": "Not found", "description": …}`.

Loom's own error mapping (`loom.api.errors`) decides the status and the sentence, in one place
for both APIs; a route of this dialect reshapes its answer for FfDL's clients.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from loom.dialects.ffdl import shapes

# FfDL's clients send Basic credentials: a 401 asks for them.
CHALLENGE = 'Basic realm="FfDL API of Loom"'
_KEPT_HEADERS = ("retry-after", "allow")


class FfdlRoute(APIRoute):
    """A route whose errors, Loom's or the request's, answer in FfDL's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return await ffdl_error(request, exc)

        return answer


async def ffdl_error(request: Request, exc: Exception) -> Response:
    """The app's own answer to `exc`, reshaped; what it has no handler for goes on up."""
    handler = _handler_for(request, exc)
    if handler is None:
        raise exc
    answer = handler(request, exc)
    loom: Response = await answer if inspect.isawaitable(answer) else answer
    try:
        said = json.loads(bytes(loom.body))
    except ValueError:
        said = {}
    status = loom.status_code
    body = shapes.error(status, str(said.get("error", "")), said.get("code"), said.get("field"))
    headers = {k: v for k, v in loom.headers.items() if k.lower() in _KEPT_HEADERS}
    if status == 401:
        headers["WWW-Authenticate"] = CHALLENGE
    return JSONResponse(body, status, headers=headers)


def _handler_for(request: Request, exc: Exception) -> Callable[..., Any] | None:
    handlers: dict[Any, Callable[..., Any]] = request.app.exception_handlers
    for kind in type(exc).__mro__:
        if kind in handlers:
            return handlers[kind]
    return None
