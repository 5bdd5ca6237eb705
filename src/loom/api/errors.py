"""Errors mapped to HTTP in one place: `{"error": message, "code": …, "field": …}`, never a 500
with a traceback."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from loom.domain.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LoomError,
    NotFound,
    PayloadTooLarge,
    PlatformError,
    SecretKeyError,
    TooManyRequests,
    Unauthorized,
)

log = logging.getLogger("loom.api")

STATUS: list[tuple[type[LoomError], int]] = [
    (InvalidInput, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (SecretKeyError, 409),  # the stored credentials do not allow it until the keys are mended
    (PayloadTooLarge, 413),
    (PlatformError, 503),  # the platform could not do it now; the message says why
    (TooManyRequests, 429),
]


def error_body(message: str, code: str | None = None, field: str | None = None) -> dict[str, str]:
    body = {"error": message}
    if code:
        body["code"] = code
    if field:
        body["field"] = field
    return body


def _loom_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LoomError)
    status = next((s for kind, s in STATUS if isinstance(exc, kind)), 500)
    field = exc.field if isinstance(exc, InvalidInput) else None
    code = exc.code.value if exc.code else None
    return JSONResponse(error_body(exc.message, code, field), status, headers=_headers(exc))


def _headers(exc: LoomError) -> dict[str, str] | None:
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, TooManyRequests) and exc.retry_after is not None:
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    return None


def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    message = f"{where}: {first.get('msg')}, got {first.get('input')!r}"
    return JSONResponse(error_body(message, field=where), 400)


def _allowed(request: Request) -> str:
    """Every method some route serves at this path: Starlette names only the first route's."""
    path = request.url.path
    methods: set[str] = set()
    for route in request.app.routes:
        regex, route_methods = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and route_methods and regex.match(path):
            methods |= route_methods
    return ", ".join(sorted(methods))


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed(request)}
    return JSONResponse(error_body(str(exc.detail)), exc.status_code, headers=headers)


def _database_down(request: Request, exc: Exception) -> JSONResponse:
    """The database does not answer (PostgreSQL stopped, the network to it cut): the request
    may well work again soon, so 503 with `Retry-After`, not a 500. Its address stays out of the
    answer; the log has the driver's words."""
    log.warning("the database does not answer (%s %s): %s", request.method, request.url.path, exc)
    body = error_body("the database does not answer now; try again shortly", "S101")
    return JSONResponse(body, 503, headers={"Retry-After": "5"})


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal error; see the server log", "S101"), 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(LoomError, _loom_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(OperationalError, _database_down)
    app.add_exception_handler(InterfaceError, _database_down)
    app.add_exception_handler(Exception, _unexpected)
