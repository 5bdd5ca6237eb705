"""Job signals: a follower is woken by what is stored about its job, never by a poll."""

from __future__ import annotations

import asyncio
import threading

from loom.tds.signals import JobSignals


def test_a_change_stored_while_the_follower_looks_is_not_missed() -> None:
    """A notification between `listen` and `wait` (the follower was reading what is stored)
    wakes the wait at once, though its timeout is an hour."""

    async def follow() -> bool:
        signals = JobSignals()
        with signals.listen("job-1") as listener:
            notifier = threading.Thread(target=signals.notify, args=("job-1",))
            notifier.start()
            notifier.join()  # told while "looking", before the wait below
            return await asyncio.wait_for(listener.wait(3600.0), timeout=30.0)

    assert asyncio.run(follow()) is True


def test_another_jobs_change_does_not_wake_a_follower() -> None:
    """Only the followed job's notifications count; a closed listener is forgotten."""

    async def follow() -> tuple[bool, bool]:
        signals = JobSignals()
        with signals.listen("job-1") as listener:
            signals.notify("job-2")
            woken = await listener.wait(0.05)
        signals.notify("job-1")  # nobody listens: nothing to wake, nothing kept
        return woken, bool(signals._waiters)

    assert asyncio.run(follow()) == (False, False)
