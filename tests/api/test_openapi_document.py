"""The OpenAPI document's error answers, checked without a server."""

from __future__ import annotations

from fastapi import FastAPI

from loom.api.identity import router
from loom.api.openapi import build


def test_an_open_route_documents_its_400_and_no_422() -> None:
    """A route that takes no token but checks its query (the identity challenge) says it may
    answer 400, Loom's answer to bad input, and not FastAPI's 422, which Loom never sends."""
    app = FastAPI()
    app.include_router(router)
    responses = build(app)["paths"]["/v1/identity"]["get"]["responses"]
    assert "400" in responses and "422" not in responses
    assert "401" not in responses  # no token asked for
