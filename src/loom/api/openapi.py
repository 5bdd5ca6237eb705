"""The OpenAPI document, made to tell the truth about errors.

Every route may answer with the platform's error body (`api.errors`), and request validation answers
400, not FastAPI's default 422. Clients generated from the document, and the fuzzing in the tests,
rely on both.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse

from loom.api.auth import caller, platform

# What any authenticated route may answer besides its success.
ERRORS: dict[str, str] = {
    "400": "bad input: the body names the field, the value and why",
    "401": "no token, or an expired, revoked or unknown one",
    "403": "the token may not do this",
    "404": "no such object, or not yours",
    "409": "the object's state does not allow it now",
    "413": "the body is over the platform's limit",
    "429": "over a rate limit or a cap; `Retry-After` says when to try again",
    "503": "the platform cannot do it now; the body says why",
}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "what is wrong, for a person"},
        "code": {"type": "string", "description": "a stable code, such as C101"},
        "field": {"type": "string", "description": "the field at fault"},
    },
}

_METHODS = ("get", "put", "post", "patch", "delete")
# Routes that take no token: they answer none of `ERRORS` but those they declare themselves.
OPEN_PATHS = frozenset({"/health", "/ready", "/v1/identity"})

# For routes that answer with something other than JSON: `responses=` in their decorators.
ZIP: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a zip file",
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    }
}
# A JSON object, or with `?format=markdown` the same as a Markdown document.
JSON_OR_MARKDOWN: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a JSON object, or with `format=markdown` a Markdown document",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }
}
# One server-sent event: its kind (`line` or `end`), a JSON text, and a cursor.
_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "description": "a JSON object"},
        "id": {"type": "string", "description": "send back as `Last-Event-ID` to resume"},
    },
}
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a page as JSON, or with `follow=true` a server-sent event stream",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": _EVENT},
        },
    }
}


# `/metrics`: Prometheus' text format.
PROMETHEUS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "metrics in Prometheus' text exposition format",
        "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
    }
}
READY: dict[int | str, dict[str, Any]] = {
    503: {
        "description": "not ready: the database does not answer, or its schema is not this "
        "server's; the body says which",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
}


def _error_responses() -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/Error"}
    return {
        status: {"description": text, "content": {"application/json": {"schema": ref}}}
        for status, text in ERRORS.items()
    }


def build(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    errors = _error_responses()
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            checked = responses.pop("422", None) is not None
            if path in OPEN_PATHS:  # no token: only FastAPI's 422, which is Loom's 400
                if checked:
                    responses.setdefault("400", errors["400"])
                continue
            for status, response in errors.items():
                responses.setdefault(status, response)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document


def install(app: FastAPI, public: bool = False) -> None:
    """Serve `build(app)` (made once) at /openapi.json, with /docs and /redoc to read it: to
    signed-in callers only, unless `public` (LOOM_DOCS_PUBLIC): the document lists every
    route the platform has, which is more than an anonymous caller needs to know."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    def reader(request: Request) -> None:
        if not public:
            caller(request, platform(request))  # 401 without a good token

    guard = [Depends(reader)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=guard)
    def document() -> dict[str, Any]:
        return openapi()

    @app.get("/docs", include_in_schema=False, dependencies=guard)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} API")

    @app.get("/redoc", include_in_schema=False, dependencies=guard)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} API")
