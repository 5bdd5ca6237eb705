"""Rate limits as token buckets held in memory: per user, per job's learners (a larger budget:
they batch, and must never be starved), and per client address for failed authentication (it
slows token guessing). A check is a dictionary lookup and some arithmetic: no database.

Over a limit, the API answers 429 with `Retry-After`; learners' shippers resend after a 429.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from loom.domain.errors import LoomError, TooManyRequests, Unauthorized
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
    """Charge an authenticated request to its caller's bucket."""
    limits: RateLimits = request.app.state.rate_limits
    limits.charge(user_id, user_name, job_scope)


def refuse_credentials(request: Request, refusal: Unauthorized) -> LoomError:
    """What to raise for a request whose credentials failed: the 401 itself, or a 429 once its
    address has failed too often. Only failing requests are ever refused this way, so a guesser
    on a shared address (loopback, a proxy) cannot lock out callers with good tokens."""
    limits: RateLimits = request.app.state.rate_limits
    address = request.client.host if request.client else "unknown"
    wait = limits.failures.wait(address)
    limits.failures.spend(address)
    if not wait:
        return refusal
    return TooManyRequests(
        f"too many failed authentications from {address} (LOOM_AUTH_FAILURES_PER_MIN); "
        f"retry in {max(1, math.ceil(wait))} s",
        retry_after=wait,
    )
