"""The failure policy as data: given how an attempt failed, restart the gang or fail the job.

Kubeflow's policies: `Never`; `OnFailure` (any failure, up to `max_restarts`); `ExitCode`
(exit codes 1–127 are the program's own verdict and permanent; 128–255, signals, are
retryable, as are the platform's own failures).
"""

from __future__ import annotations

from dataclasses import dataclass

from loom.domain.errors import ErrorCode

PERMANENT_ERRORS = frozenset(
    {ErrorCode.MEMORY_EXCEEDED, ErrorCode.LOAD_MODEL, ErrorCode.LOAD_DATA, ErrorCode.INVALID_ZIP}
)


@dataclass(frozen=True)
class Failure:
    """How one learner of the attempt ended."""

    learner: int
    exit_code: int | None
    error_code: str | None


@dataclass(frozen=True)
class FailureDecision:
    restart: bool
    reason: str


def _retryable(failure: Failure) -> bool:
    if failure.error_code in PERMANENT_ERRORS:
        return False
    if failure.exit_code is None or failure.error_code != ErrorCode.LEARNER_FAILED:
        return True  # the platform's failure (a lost learner, a failed launch), not the code's
    return 128 <= failure.exit_code <= 255


def decide(
    policy: str, max_restarts: int, attempt: int, failures: list[Failure]
) -> FailureDecision:
    """Restart the whole gang from its checkpoint, or fail the job; `attempt` is 1-based."""
    restarts_done = attempt - 1
    first = failures[0] if failures else Failure(0, None, None)
    how = f"exit code {first.exit_code}" if first.exit_code is not None else first.error_code
    if policy == "Never":
        return FailureDecision(False, f"restart policy Never; learner {first.learner} failed")
    if restarts_done >= max_restarts:
        return FailureDecision(
            False,
            f"learner {first.learner} failed ({how}) and all {max_restarts} restarts are used",
        )
    if policy == "ExitCode":
        permanent = [f for f in failures if not _retryable(f)]
        if permanent:
            p = permanent[0]
            return FailureDecision(
                False,
                f"learner {p.learner} failed with a permanent error "
                f"({p.error_code}, exit code {p.exit_code}); policy ExitCode does not retry it",
            )
    elif any(f.error_code in PERMANENT_ERRORS for f in failures):
        return FailureDecision(False, f"learner {first.learner} failed with {first.error_code}")
    return FailureDecision(
        True, f"restart {restarts_done + 1} of {max_restarts} after learner {first.learner} ({how})"
    )
