"""What every MLflow route needs: the caller as an `Actor`, the request's fields (a GET's query
string, another method's JSON body), and answers as MLflow writes them."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request, Response

from loom.api.auth import CallerDep
from loom.dialects.mlflow.errors import MlflowRoute
from loom.domain.errors import InvalidInput
from loom.domain.runs import Actor

API = "/api/2.0/mlflow"


def mlflow_router(prefix: str = API) -> APIRouter:
    """A router whose errors come out in MLflow's shape (and stay out of Loom's OpenAPI)."""
    return APIRouter(prefix=prefix, route_class=MlflowRoute, include_in_schema=False)


def actor(who: CallerDep) -> Actor:
    """The caller: a user, or a job's learners acting for the job's owner."""
    return Actor(who.user.id, who.user.name, who.user.is_admin, who.job_scope)


async def fields(request: Request) -> dict[str, Any]:
    """A GET's query string (a repeated key as a list), or the JSON object of another method's
    body (with the query string's keys under it)."""
    query: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        if key not in query:
            query[key] = value
        elif isinstance(query[key], list):
            query[key].append(value)
        else:
            query[key] = [query[key], value]
    if request.method == "GET":
        return query
    raw = await request.body()
    if not raw.strip():
        return query
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object")
    return {**query, **body}


ActorDep = Annotated[Actor, Depends(actor)]
Fields = Annotated[dict[str, Any], Depends(fields)]


def ok(content: Any = None) -> Response:
    return Response(orjson.dumps({} if content is None else content), media_type="application/json")
