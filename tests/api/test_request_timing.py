"""Request latency by route template: the middleware names the matched route, never the raw
path, and times a stream until it starts without holding its body back."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from loom.api.request_timing import RequestTiming
from loom.observability import PlatformMetrics

NAME = "loom_http_request_duration_seconds_count"


def count(metrics: PlatformMetrics, route: str, method: str, status_class: str) -> float:
    labels = {"route": route, "method": method, "status_class": status_class}
    return metrics.registry.get_sample_value(NAME, labels) or 0.0


def timed_app(metrics: PlatformMetrics) -> FastAPI:
    app = FastAPI()
    app.add_middleware(RequestTiming, platform_metrics=metrics)

    @app.get("/things/{thing_id}")
    def thing(thing_id: str) -> dict[str, str]:
        return {"id": thing_id}

    @app.get("/stream")
    def stream() -> StreamingResponse:
        def chunks() -> Iterator[bytes]:
            # The response has started; its body has not been sent.
            seen = count(metrics, "/stream", "GET", "2xx")
            yield f"observed before the body: {seen:g}\n".encode()
            yield b"end\n"

        return StreamingResponse(chunks(), media_type="text/plain")

    @app.get("/broken")
    def broken() -> None:
        raise RuntimeError("a bug")

    return app


def get(app: FastAPI, *paths: str, method: str = "GET") -> list[httpx.Response]:
    """Each path's answer, the app driven in this process (an error it raises is a 500)."""

    async def requests() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://loom") as client:
            return [await client.request(method, path) for path in paths]

    return anyio.run(requests)


def test_route_template_method_and_status_class() -> None:
    """Two jobs' ids make one series, labelled by the template; an unknown path is
    `unmatched`, an unknown method `other`."""
    metrics = PlatformMetrics()
    app = timed_app(metrics)
    paths = ("/things/training-abc", "/things/training-xyz", "/no/such/path/training-abc")
    assert [answer.status_code for answer in get(app, *paths)] == [200, 200, 404]
    assert get(app, "/things/1", method="BREW")[0].status_code == 405
    assert count(metrics, "/things/{thing_id}", "GET", "2xx") == 2
    assert count(metrics, "unmatched", "GET", "4xx") == 1
    assert count(metrics, "/things/{thing_id}", "other", "4xx") == 1
    text = metrics.exposition().decode()
    assert "training-abc" not in text and "training-xyz" not in text


def test_a_stream_is_timed_when_it_starts() -> None:
    """The observation is made as the headers go out, before the stream's first chunk: a long
    stream neither waits for its timing nor counts as slow."""
    metrics = PlatformMetrics()
    [answer] = get(timed_app(metrics), "/stream")
    assert answer.text == "observed before the body: 1\nend\n"


def test_an_unhandled_error_counts_as_5xx() -> None:
    """A request whose handler raises is counted as a server error, and the error goes on."""
    metrics = PlatformMetrics()
    [answer] = get(timed_app(metrics), "/broken")
    assert answer.status_code == 500
    assert count(metrics, "/broken", "GET", "5xx") == 1
