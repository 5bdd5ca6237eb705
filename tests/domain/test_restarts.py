"""The failure policy as a pure decision."""

from __future__ import annotations

from loom.domain.restarts import Failure, decide

CRASH = Failure(1, 1, "C201")
KILLED = Failure(2, 137, "C201")
LOST = Failure(2, None, "S200")
OOM = Failure(1, 137, "C202")


def test_never_fails_at_once() -> None:
    """Under Never, any failure fails the job."""
    assert not decide("Never", 5, 1, [KILLED]).restart


def test_on_failure_restarts_until_the_budget_is_spent() -> None:
    """OnFailure restarts the gang up to max_restarts times."""
    assert decide("OnFailure", 2, 1, [CRASH]).restart
    assert decide("OnFailure", 2, 2, [CRASH]).restart
    final = decide("OnFailure", 2, 3, [CRASH])
    assert not final.restart
    assert "all 2 restarts" in final.reason


def test_exit_code_policy_splits_permanent_from_retryable() -> None:
    """ExitCode: 1-127 are permanent, 128-255 (signals) and platform failures retryable."""
    assert not decide("ExitCode", 3, 1, [CRASH]).restart
    assert decide("ExitCode", 3, 1, [KILLED]).restart
    assert decide("ExitCode", 3, 1, [LOST]).restart
    assert not decide("ExitCode", 3, 1, [KILLED, CRASH]).restart


def test_memory_errors_are_never_retried() -> None:
    """A learner over its memory limit would be again: no policy restarts it."""
    assert not decide("OnFailure", 3, 1, [OOM]).restart
    assert not decide("ExitCode", 3, 1, [OOM]).restart
