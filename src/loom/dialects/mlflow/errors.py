"""MLflow's error shapes on MLflow's paths only: `{"error_code": "RESOURCE_DOES_NOT_EXIST",
"message": …}` with the status MLflow gives each code, where Loom's own API answers `{"error":
…}`. Loom's errors are mapped here, at the dialect's edge; nothing below knows of MLflow's codes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException

from loom.domain.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    InvalidInput,
    LoomError,
    NotFound,
    PayloadTooLarge,
    PlatformError,
    TooManyRequests,
    Unauthorized,
)

log = logging.getLogger("loom.dialects.mlflow")

# Most specific first. MLflow answers INVALID_STATE with 500, which its client retries for
# minutes; Loom says 400: the state will not change by asking again.
CODES: list[tuple[type[LoomError], str, int]] = [
    (InvalidInput, "INVALID_PARAMETER_VALUE", 400),
    (NotFound, "RESOURCE_DOES_NOT_EXIST", 404),
    (AlreadyExists, "RESOURCE_ALREADY_EXISTS", 400),
    (Conflict, "INVALID_STATE", 400),
    (Forbidden, "PERMISSION_DENIED", 403),
    (Unauthorized, "UNAUTHENTICATED", 401),
    (PayloadTooLarge, "RESOURCE_LIMIT_EXCEEDED", 413),
    (TooManyRequests, "REQUEST_LIMIT_EXCEEDED", 429),
    (PlatformError, "TEMPORARILY_UNAVAILABLE", 503),
]


def answer(code: str, message: str, status: int) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error_code": code, "message": message}, status, headers=headers)


def translated(exc: Exception) -> JSONResponse:
    """MLflow's answer for an error raised while serving one of its routes."""
    if isinstance(exc, LoomError):
        for kind, code, status in CODES:
            if isinstance(exc, kind):
                return answer(code, exc.message, status)
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query"))
        return answer("INVALID_PARAMETER_VALUE", f"{where}: {first.get('msg')}", 400)
    if isinstance(exc, HTTPException):
        code = "ENDPOINT_NOT_FOUND" if exc.status_code in (404, 405) else "BAD_REQUEST"
        return answer(code, str(exc.detail), exc.status_code)
    if isinstance(exc, OperationalError | InterfaceError):
        log.warning("the database does not answer: %s", exc)
        return answer("TEMPORARILY_UNAVAILABLE", "the database does not answer; try again", 503)
    log.exception("unexpected error in MLflow's API")
    return answer("INTERNAL_ERROR", "internal error; see the server log", 500)


class MlflowRoute(APIRoute):
    """A route whose errors, its dependencies' (authentication) included, come out in MLflow's
    shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def shaped(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every error of this route, in MLflow's words
                return translated(exc)

        return shaped
