"""The autoscaler's policy as a pure function of the load it has seen."""

from __future__ import annotations

from loom.serving.autoscale import Autoscaler, Policy


def scaler(low: int = 0, high: int = 4, target: float = 2, delay: float = 5) -> Autoscaler:
    return Autoscaler(Policy(low, high, target, delay))


def test_scales_up_at_once_to_in_flight_over_target() -> None:
    auto = scaler()
    for tick in range(10):
        auto.sample(tick * 0.1, 7)
    assert auto.desired(1.0, current=1) == 4  # ceil(7 / 2), at most max_replicas
    assert auto.desired(1.0, current=0) == 4


def test_never_beyond_the_bounds() -> None:
    auto = scaler(low=1, high=2)
    for tick in range(10):
        auto.sample(tick * 0.1, 50)
    assert auto.desired(1.0, current=1) == 2
    quiet = scaler(low=1, high=2)
    assert quiet.desired(100.0, current=0) == 1


def test_scales_down_only_after_the_delay_and_to_zero_when_idle() -> None:
    auto = scaler(delay=5)
    for tick in range(20):  # two busy seconds: 6 in flight
        auto.sample(tick * 0.1, 6)
    assert auto.desired(2.0, current=3) == 3
    for tick in range(20, 60):  # quiet, but within the delay: hold
        auto.sample(tick * 0.1, 0)
    assert auto.desired(6.0, current=3) == 3
    for tick in range(60, 90):  # more than the delay since the busy seconds
        auto.sample(tick * 0.1, 0)
    assert auto.desired(9.0, current=3) == 0


def test_a_request_between_samples_keeps_one_replica() -> None:
    auto = scaler(delay=2)
    for tick in range(40):
        auto.sample(tick * 0.1, 0)
    auto.started(3.95)
    assert auto.desired(4.0, current=1) == 1
    assert auto.desired(4.0, current=0) == 1  # a cold start


def test_no_history_holds_the_current_size() -> None:
    auto = scaler(low=0, delay=30)
    auto.sample(0.0, 0)
    assert auto.desired(0.5, current=3) == 3
