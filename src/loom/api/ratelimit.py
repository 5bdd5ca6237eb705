"""Rate limits as token buckets held in memory: per user, per job's learners (a larger budget:
they batch, and must never be starved), and per client address for failed authentication (it
slows token guessing). A check is a dictionary lookup and some arithmetic: no database.

Over a limit, the API answers 429 with `Retry-After`; learners' shippers resend after a 429.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loom.domain.errors import TooManyRequests
from loom.settings import Settings

Clock = Callable[[], float]


@dataclass
class Bucket:
    """Holds up to `burst` tokens and gains `rate` a second; a request takes one."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self) -> float:
        """Seconds until a token is there; 0 if one is there now."""
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate


class Buckets:
    """Buckets of one rate and burst, by key; past `max_keys` the least recently used goes
    (a forgotten bucket comes back full, which only errs on the caller's side)."""

    def __init__(
        self, rate: float, burst: float, max_keys: int = 100_000, clock: Clock = time.monotonic
    ) -> None:
        self.rate, self.burst, self.max_keys, self.clock = rate, burst, max_keys, clock
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def _bucket(self, key: str) -> Bucket:
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = Bucket(self.rate, self.burst, self.burst, now)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(key)
        bucket.refill(now)
        return bucket

    def take(self, key: str) -> float:
        """Take a token: 0.0 if there was one, else the seconds to wait (nothing taken)."""
        with self._lock:
            bucket = self._bucket(key)
            wait = bucket.wait()
            if wait == 0.0:
                bucket.tokens -= 1
            return wait

    def spend(self, key: str) -> None:
        """Take a token whether or not there is one (down to one request's worth of debt)."""
        with self._lock:
            bucket = self._bucket(key)
            bucket.tokens = max(bucket.tokens - 1, -1.0)

    def wait(self, key: str) -> float:
        """The seconds until `key` has a token; takes nothing."""
        with self._lock:
            return self._bucket(key).wait()


class RateLimits:
    """The platform's three kinds of bucket, sized by `Settings`."""

    def __init__(self, settings: Settings, clock: Clock = time.monotonic) -> None:
        self.users = Buckets(settings.rate_per_s, settings.rate_burst, clock=clock)
        self.learners = Buckets(
            settings.learner_rate_per_s, settings.learner_rate_burst, clock=clock
        )
        self.failures = Buckets(
            settings.auth_failures_per_min / 60, settings.auth_failures_burst, clock=clock
        )

    def charge(self, user_id: str, user_name: str, job_scope: str | None) -> None:
        """Take one request from the caller's bucket; raises `TooManyRequests` if empty."""
        if job_scope is not None:
            buckets, key, who, names = self.learners, job_scope, f"job {job_scope}", "LEARNER_RATE"
        else:
            buckets, key, who, names = self.users, user_id, f"user {user_name!r}", "RATE"
        wait = buckets.take(key)
        if wait:
            raise TooManyRequests(
                f"rate limit: {who} sent more than {buckets.burst:g} requests at once or "
                f"{buckets.rate:g} a second (LOOM_{names}_BURST, LOOM_{names}_PER_S); "
                f"retry in {math.ceil(wait)} s",
                retry_after=wait,
            )


def charge(request: Request, user_id: str, user_name: str, job_scope: str | None) -> None:
    """Charge an authenticated request to its caller's bucket (the app's `RateLimits`)."""
    limits: RateLimits | None = getattr(request.app.state, "rate_limits", None)
    if limits is not None:
        limits.charge(user_id, user_name, job_scope)


class AuthFailureLimit:
    """ASGI middleware: each 401 spends a token of the client address's bucket; while that
    bucket is empty, every `/v1/` request from the address is answered 429 before any work."""

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self.failures = limits.failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        wait = self.failures.wait(address)
        if wait:
            await _refuse(send, address, wait)
            return

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self.failures.spend(address)
            await send(message)

        await self.app(scope, receive, watched)


async def _refuse(send: Send, address: str, wait: float) -> None:
    seconds = max(1, math.ceil(wait))
    message = (
        f"too many failed authentications from {address} (LOOM_AUTH_FAILURES_PER_MIN); "
        f"retry in {seconds} s"
    )
    headers = [
        (b"content-type", b"application/json"),
        (b"retry-after", str(seconds).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})
