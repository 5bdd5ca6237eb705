"""Request latency for `loom_http_request_duration_seconds`, as a pure ASGI middleware.

It reads neither bodies nor streams: it times a request until its response starts (a log stream's
length is not its latency), and passes every other message on as it comes. The route is the
template the router matched (`/v1/jobs/{job_id}`), never the raw path, which names jobs and users.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loom.observability import PlatformMetrics

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # no route: a 404 for a path the API does not have


class RequestTiming:
    def __init__(self, app: ASGIApp, platform_metrics: PlatformMetrics) -> None:
        self.app = app
        self.histogram = platform_metrics.http_duration

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        started = False

        async def timed(message: Message) -> None:
            nonlocal started
            if not started and message["type"] == "http.response.start":
                started = True
                self._observe(scope, message["status"], time.perf_counter() - began)
            await send(message)

        try:
            await self.app(scope, receive, timed)
        except Exception:
            if not started:  # the server's outermost handler answers 500
                self._observe(scope, 500, time.perf_counter() - began)
            raise

    def _observe(self, scope: Scope, status: int, seconds: float) -> None:
        route = getattr(scope.get("route"), "path_format", None) or UNMATCHED
        method = scope["method"] if scope["method"] in METHODS else "other"
        self.histogram.labels(route, method, f"{status // 100}xx").observe(seconds)
