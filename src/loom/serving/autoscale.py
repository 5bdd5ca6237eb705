"""The autoscaler's policy, pure: how many replicas a deployment wants, from the in-flight
requests it has seen.

Load is sampled into one-second buckets (mean in-flight requests, requests started). The
replicas wanted for a bucket are `ceil(mean in-flight / target)`, at least one if any request
started in it. Scaling up follows the newest bucket at once; scaling down follows the busiest
bucket of the last `scale_down_delay_s`, so a deployment shrinks only after that long below its
size, and goes to zero (when `min_replicas` is 0) only after that long without a request.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

BUCKET_S = 1.0


@dataclass(frozen=True)
class Policy:
    min_replicas: int
    max_replicas: int
    target_concurrency: float
    scale_down_delay_s: float

    def clamp(self, wanted: int) -> int:
        return max(self.min_replicas, min(self.max_replicas, wanted))


@dataclass
class _Bucket:
    start: float
    inflight_sum: float = 0.0
    samples: int = 0
    requests: int = 0

    def wanted(self, target: float) -> int:
        mean = self.inflight_sum / self.samples if self.samples else 0.0
        by_load = math.ceil(mean / target - 1e-9) if mean > 0 else 0
        return max(by_load, 1 if self.requests else 0)


@dataclass
class Autoscaler:
    policy: Policy
    buckets: deque[_Bucket] = field(default_factory=deque)
    born: float | None = None

    def sample(self, now: float, inflight: int) -> None:
        """Record how many requests are in flight now (called several times a second)."""
        bucket = self._bucket(now)
        bucket.inflight_sum += inflight
        bucket.samples += 1

    def started(self, now: float) -> None:
        """Record a request's arrival, so that short requests between samples count too."""
        self._bucket(now).requests += 1

    def _bucket(self, now: float) -> _Bucket:
        if self.born is None:
            self.born = now
        if not self.buckets or now - self.buckets[-1].start >= BUCKET_S:
            self.buckets.append(_Bucket(now))
        horizon = now - max(self.policy.scale_down_delay_s, BUCKET_S) - BUCKET_S
        while self.buckets and self.buckets[0].start < horizon:
            self.buckets.popleft()
        return self.buckets[-1]

    def desired(self, now: float, current: int) -> int:
        """The replicas wanted now, given `current` (those ready or starting)."""
        self._bucket(now)
        assert self.born is not None
        target = self.policy.target_concurrency
        newest = self.buckets[-1].wanted(target)
        if len(self.buckets) > 1:  # the newest bucket may be only a few samples old
            newest = max(newest, self.buckets[-2].wanted(target))
        if newest > current:
            return self.policy.clamp(newest)
        if now - self.born < self.policy.scale_down_delay_s:  # no history yet: hold
            return self.policy.clamp(current)
        window_start = now - self.policy.scale_down_delay_s
        busiest = max(
            (b.wanted(target) for b in self.buckets if b.start + BUCKET_S > window_start),
            default=0,
        )
        return self.policy.clamp(min(current, max(busiest, newest)))
