"""Token buckets refill at their rate, hold at most their burst, and say how long to wait."""

from __future__ import annotations

import pytest

from loom.api.ratelimit import Buckets, RateLimits
from loom.domain.errors import TooManyRequests
from loom.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_refills_at_its_rate() -> None:
    """Three at once, then one more each half second at 2 a second."""
    clock = Clock()
    buckets = Buckets(rate=2, burst=3, clock=clock)
    assert [buckets.take("ann") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("ann") == pytest.approx(0.5)
    clock.now += 0.5
    assert buckets.take("ann") == 0.0
    clock.now += 1000
    assert [buckets.take("ann") for _ in range(4)][-1] > 0  # refilled to the burst, no more


def test_buckets_are_per_key() -> None:
    """One caller's empty bucket does not slow another."""
    buckets = Buckets(rate=1, burst=1, clock=Clock())
    assert buckets.take("ann") == 0.0
    assert buckets.take("ann") > 0
    assert buckets.take("bob") == 0.0


def test_the_least_recently_used_bucket_goes_past_max_keys() -> None:
    """Memory stays bounded however many addresses call; a forgotten bucket comes back full."""
    buckets = Buckets(rate=1, burst=1, max_keys=2, clock=Clock())
    for key in ("a", "b", "c"):
        buckets.take(key)
    assert len(buckets._buckets) == 2
    assert buckets.take("a") == 0.0


def test_spend_runs_into_debt_and_wait_takes_nothing() -> None:
    """Failed authentications spend even from an empty bucket; `wait` only looks."""
    clock = Clock()
    buckets = Buckets(rate=1, burst=2, clock=clock)
    for _ in range(5):
        buckets.spend("10.0.0.1")
    assert buckets.wait("10.0.0.1") == pytest.approx(2.0)
    assert buckets.wait("10.0.0.1") == pytest.approx(2.0)
    clock.now += 2
    assert buckets.wait("10.0.0.1") == 0.0


def test_users_and_learners_have_their_own_budgets() -> None:
    """A user over their rate gets TooManyRequests with retry_after; their job's learners do not."""
    limits = RateLimits(Settings(rate_per_s=1, rate_burst=2, learner_rate_burst=50), Clock())
    limits.charge("u1", "ann", None)
    limits.charge("u1", "ann", None)
    with pytest.raises(TooManyRequests, match="user 'ann' sent more than 2 requests") as caught:
        limits.charge("u1", "ann", None)
    assert caught.value.retry_after == pytest.approx(1.0)
    for _ in range(50):
        limits.charge("u1", "ann", "training-1")
