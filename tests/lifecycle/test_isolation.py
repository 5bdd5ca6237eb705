"""A sandbox holds only where nothing outside it takes a job's orders (`isolation`)."""

from __future__ import annotations

import pytest

from loom.domain.errors import PlatformError
from loom.lifecycle.isolation import Isolation, with_launcher
from loom.settings import Settings

CONFINED = Isolation(True, "bubblewrap", bwrap="/usr/bin/bwrap")
OPEN = "the Ray cluster at h:6379 runs anyone's tasks"


class Cluster:
    def __init__(self, open_to_jobs: str | None) -> None:
        self.open_to_jobs = open_to_jobs


def test_an_engine_open_to_jobs_makes_the_platform_single_user() -> None:
    found = with_launcher(CONFINED, Settings(isolation="auto"), Cluster(OPEN))
    assert found.single_user and not found.confined
    assert found.description.startswith(OPEN) and "outside its sandbox" in found.description
    assert found.bwrap == "/usr/bin/bwrap"  # learners are still put in their sandbox


def test_a_closed_engine_or_another_launcher_changes_nothing() -> None:
    assert with_launcher(CONFINED, Settings(), Cluster(None)) is CONFINED
    assert with_launcher(CONFINED, Settings(), object()) is CONFINED


def test_a_platform_told_to_sandbox_refuses_to_start() -> None:
    with pytest.raises(PlatformError, match="LOOM_ISOLATION=sandbox, but the Ray cluster"):
        with_launcher(CONFINED, Settings(isolation="sandbox"), Cluster(OPEN))
