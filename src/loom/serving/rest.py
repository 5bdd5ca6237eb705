"""The REST adapters over the data plane: the V2 / Open Inference Protocol, exactly, and V1.

Bodies are parsed whatever their Content-Type (some V2 clients send none); errors are
`{"error": message}`, the form V2 clients expect, with 400 or 404 — never a 500.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from loom.serving.admission import Admission, Busy
from loom.serving.dataplane import DataPlane, InferenceError, ServedHandler
from loom.serving.exposition import CONTENT_TYPE, histogram, render
from loom.serving.kserve_model import Answer

MAX_LINE = 4096  # inference requests waiting their turn at most; more get 503 at once


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status, media_type="application/json")


def _error(message: str, status: int) -> Response:
    return _json({"error": message}, status)


def _answer(answer: Answer) -> Response:
    headers = {"content-type": "application/json", **answer.headers}
    return Response(answer.body, answer.status, headers=headers)


async def _body(request: Request) -> tuple[Any, bytes]:
    raw = await request.body()
    return parse(raw, request.headers.get("inference-header-content-length"))


def parse(raw: bytes, header: str | None) -> tuple[Any, bytes]:
    """The JSON body, and the binary section when the binary tensor extension is used
    (`header`: the Inference-Header-Content-Length)."""
    binary = b""
    if header is not None:
        if not header.isdigit() or int(header) > len(raw):
            raise InferenceError(
                f"Inference-Header-Content-Length must be the JSON header's size in bytes (at "
                f"most {len(raw)}), got {header[:40]!r}"
            )
        raw, binary = raw[: int(header)], raw[int(header) :]
    try:
        return orjson.loads(raw), binary
    except orjson.JSONDecodeError as exc:
        raise InferenceError(f"the body is not valid JSON: {exc}") from exc


Handler = Callable[[Request, dict[str, str]], Awaitable[Response]]


def build_app(
    plane: DataPlane, max_inflight: int = 0, max_wait_s: float = 30.0, max_line: int = MAX_LINE
) -> ASGIApp:
    """The V2 and V1 routes over `plane`, as ASGI (`serving_app`'s app)."""
    return serving_app(plane, max_inflight, max_wait_s, max_line)[0]


def serving_app(
    plane: DataPlane, max_inflight: int = 0, max_wait_s: float = 30.0, max_line: int = MAX_LINE
) -> tuple[ASGIApp, InferRoute]:
    """The V2 and V1 routes over `plane`, and its hot route alone (for the server's HTTP/1
    protocol to call without ASGI). With `max_inflight`, at most that many inference
    requests run at once and the others wait their turn in arrival order (at most
    `max_wait_s`, and `max_line` of them: past that, 503)."""
    line = (
        Admission(lambda: max_inflight, max_wait_s=max_wait_s, max_line=max_line)
        if max_inflight > 0
        else None
    )
    route = InferRoute(plane, line)

    def handle(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request, request.path_params)
            except InferenceError as exc:
                return _error(exc.message, exc.status)

        return endpoint

    async def live(_r: Request, _p: dict[str, str]) -> Response:
        return _json({"live": True})

    async def ready(_r: Request, _p: dict[str, str]) -> Response:
        return _json({"ready": bool(plane.names)})

    async def server(_r: Request, _p: dict[str, str]) -> Response:
        return _json(plane.server_metadata())

    async def metadata(_r: Request, p: dict[str, str]) -> Response:
        return _json(await plane.model_metadata(p["model"], p.get("version")))

    async def model_ready(_r: Request, p: dict[str, str]) -> Response:
        if plane.handler(p["model"], p.get("version")) is None:
            plane.model(p["model"], p.get("version"))
        return _json({"name": p["model"], "ready": True})

    async def v1_alive(_r: Request, _p: dict[str, str]) -> Response:
        return _json({"status": "alive"})  # KServe's V1 liveness

    async def v1_models(_r: Request, _p: dict[str, str]) -> Response:
        return _json({"models": plane.names})

    async def v1_model(_r: Request, p: dict[str, str]) -> Response:
        if plane.handler(p["model"]) is None:
            plane.model(p["model"])
        return _json({"name": p["model"], "ready": True})

    async def v1_predict(request: Request, p: dict[str, str]) -> Response:
        return await _v1_verb(plane, request, p["model"], "predict")

    async def v1_explain(request: Request, p: dict[str, str]) -> Response:
        return await _v1_verb(plane, request, p["model"], "explain")

    async def transform(request: Request, p: dict[str, str]) -> Response:
        """A transformer replica's halves, called by its gateway (`gateway_transform`)."""
        found = next((h for h in plane.handlers.values() if h.handler.role == "transformer"), None)
        if found is None or p["half"] not in ("preprocess", "postprocess"):
            raise InferenceError("no such endpoint", 404)
        call = found.handler.preprocess if p["half"] == "preprocess" else found.handler.postprocess
        headers = dict(request.headers.items())
        return _answer(await found.run(call, await request.body(), headers))

    async def metrics(_r: Request, _p: dict[str, str]) -> Response:
        return Response(prometheus(plane), media_type=CONTENT_TYPE)

    routes = [
        Route("/metrics", handle(metrics)),
        Route("/v2/health/live", handle(live)),
        Route("/v2/health/ready", handle(ready)),
        Route("/v2", handle(server)),
        Route("/v2/models/{model}", handle(metadata)),
        Route("/v2/models/{model}/versions/{version}", handle(metadata)),
        Route("/v2/models/{model}/ready", handle(model_ready)),
        Route("/v2/models/{model}/versions/{version}/ready", handle(model_ready)),
        Route("/v1/models/{model}:predict", handle(v1_predict), methods=["POST"]),
        Route("/v1/models/{model}:explain", handle(v1_explain), methods=["POST"]),
        Route("/v1/models/{model}", handle(v1_model)),
        Route("/v1/models", handle(v1_models)),
        Route("/loom/transformer/{half:str}", handle(transform), methods=["POST"]),
        Route("/", handle(v1_alive)),
    ]

    async def not_found(_r: Request, exc: Exception) -> Response:
        return _error("no such endpoint", 404)

    async def not_allowed(_r: Request, exc: Exception) -> Response:
        return _error("method not allowed here", 405)

    async def unexpected(_r: Request, exc: Exception) -> Response:
        return _error(f"internal error: {type(exc).__name__}", 500)

    app = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_allowed, Exception: unexpected},
    )

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        """Count the requests this server has begun and not answered (the data plane runs a
        request on the event loop only when it is the only one)."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        plane.active += 1
        try:
            target = infer_target(scope["method"], scope["path"])
            if target is None:
                await app(scope, receive, send)
            else:
                await fast_infer(route, *target, scope, receive, send)
        finally:
            plane.active -= 1

    return counted, route


async def _v1_verb(plane: DataPlane, request: Request, model: str, verb: str) -> Response:
    """V1's `:predict` or `:explain`: a handler takes the body whole; a runtime's model gets
    the instances as a batch (and its explainer, the same)."""
    found = plane.handler(model)
    if found is not None:
        headers = dict(request.headers.items())
        answer = await found.run(found.handler.v1, verb, await request.body(), headers)
        return _answer(answer)
    body, binary = await _body(request)
    if binary:
        raise InferenceError("the V1 protocol has no binary tensors; send JSON")
    if verb == "explain":
        return _json(await plane.explain(model, body))
    return _json(await plane.predict(model, None, body))


__all__ = ["build_app", "serving_app"]


def prometheus(plane: DataPlane) -> bytes:
    """Requests, in flight, inference latency, batches and batch sizes per model, in
    Prometheus' text format."""
    served = list(plane.models.values())
    stats = [(m, m.batcher.stats if m.batcher else None) for m in served]
    requests = CounterMetricFamily(
        "loom_inference_requests", "Inference requests answered", labels=["model"]
    )
    inflight = GaugeMetricFamily(
        "loom_inference_inflight_requests", "Inference requests being run", labels=["model"]
    )
    batches = CounterMetricFamily(
        "loom_inference_batches", "Batches the model ran (a request alone is one)", labels=["model"]
    )
    for model, found in stats:
        requests.add_metric([model.name], found.requests if found else model.calls)
        inflight.add_metric([model.name], model.inflight)
        batches.add_metric([model.name], found.batches if found else model.calls)
    handled = list(plane.handlers.values())
    for each in handled:
        requests.add_metric([each.name], each.calls)
        inflight.add_metric([each.name], each.inflight)
    latency = histogram(
        "loom_inference_duration_seconds",
        "Time to run a request through the model",
        ["model"],
        [([m.name], m.latency) for m in served] + [([h.name], h.latency) for h in handled],
    )
    sizes = histogram(
        "loom_inference_batch_size",
        "Samples in each batch the model ran",
        ["model"],
        [([m.name], found.sizes) for m, found in stats if found],
    )
    return render([requests, inflight, latency, batches, sizes])


def infer_target(method: str, path: str) -> tuple[str, str | None] | None:
    """(model, version) for a V2 infer request, the server's hot route; else None."""
    if method != "POST" or not path.endswith("/infer"):
        return None
    parts = path.split("/")
    if len(parts) == 5 and parts[1:3] == ["v2", "models"] and parts[3]:
        return parts[3], None
    if len(parts) == 7 and parts[1:3] == ["v2", "models"] and parts[4] == "versions":
        return parts[3], parts[5]
    return None


Headers = list[tuple[bytes, bytes]]
Reply = tuple[int, Headers, bytes]  # status, headers (its content-length among them), body
INFERENCE_HEADER = b"inference-header-content-length"


class InferRoute:
    """`POST /v2/models/{model}[/versions/{version}]/infer`, the server's hot route, from a
    whole body to a whole reply: run at once, or in turn when the server has a line (first
    come, first served across connections, so that under more load than the model can take
    every request waits about as long; 503 with Retry-After past the line). The caller
    counts the request as begun (`DataPlane.active`)."""

    def __init__(self, plane: DataPlane, line: Admission | None) -> None:
        self.plane = plane
        self.line = line

    async def __call__(
        self, model: str, version: str | None, raw: bytes, headers: Headers
    ) -> Reply:
        if self.line is None:
            return await reply(self.plane, model, version, raw, headers)
        try:
            await self.line.enter()
        except Busy as exc:
            payload = orjson.dumps({"error": f"busy: {exc.message}; retry"})
            return 503, [
                (b"content-type", b"application/json"),
                (b"retry-after", str(exc.retry_after_s).encode()),
                (b"content-length", b"%d" % len(payload)),
            ], payload  # fmt: skip
        try:
            return await reply(self.plane, model, version, raw, headers)
        finally:
            self.line.leave()


async def fast_infer(
    route: InferRoute, model: str, version: str | None, scope: Scope, receive: Receive, send: Send
) -> None:
    """The hot route straight on ASGI (what a routed endpoint and its request object would
    cost is a sixth of a small request's time); the server's own HTTP/1 protocol calls the
    route itself (`WholeResponses`)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    status, headers, payload = await route(model, version, b"".join(chunks), scope["headers"])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def reply(
    plane: DataPlane, model: str, version: str | None, raw: bytes, headers: Headers
) -> Reply:
    """A V2 inference request's reply: the V2 response, or `{"error": …}` with its status
    (never a traceback)."""
    found = plane.handler(model, version) if plane.handlers else None
    if found is not None:
        return await _handler_reply(found, raw, headers)
    header = next((v.decode("latin-1") for k, v in headers if k == INFERENCE_HEADER), None)
    sent = [(b"content-type", b"application/json")]
    try:
        body, binary = parse(raw, header)
        answer, section = await plane.infer(model, version, body, binary)
        status, payload = 200, orjson.dumps(answer)
        if section:
            sent = [
                (b"content-type", b"application/octet-stream"),
                (INFERENCE_HEADER, b"%d" % len(payload)),
            ]
            payload += section
    except InferenceError as exc:
        status, payload = exc.status, orjson.dumps({"error": exc.message})
    except Exception as exc:  # as the routed endpoints answer it: never a traceback
        status, payload = 500, orjson.dumps({"error": f"internal error: {type(exc).__name__}"})
    sent.append((b"content-length", b"%d" % len(payload)))
    return status, sent, payload


async def _handler_reply(found: ServedHandler, raw: bytes, headers: Headers) -> Reply:
    """A V2 request, whole, to a model that decodes its own (a `kserve.Model`)."""
    given = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
    try:
        answer = await found.run(found.handler.v2, raw, given)
    except Exception as exc:  # the handler answers its model's errors; this is Loom's own
        answer = Answer.error(500, f"internal error: {type(exc).__name__}")
    sent = {"content-type": "application/json", **answer.headers}
    sent["content-length"] = str(len(answer.body))
    encoded = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in sent.items()]
    return answer.status, encoded, answer.body


# A replica on a cluster node listens on a TCP port others on the network could reach: it
# answers only requests that carry its gateway's secret.
TOKEN_HEADER = b"x-loom-replica"
TOKEN_ENV = "LOOM_REPLICA_TOKEN"


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    wanted = token.encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == TOKEN_HEADER), b"")
            if not hmac.compare_digest(given, wanted):
                payload = orjson.dumps({"error": "this replica answers its gateway only"})
                headers = [(b"content-type", b"application/json"),
                           (b"content-length", b"%d" % len(payload))]  # fmt: skip
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": payload})
                return
        await app(scope, receive, send)

    return guarded
