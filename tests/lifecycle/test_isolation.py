"""A sandbox holds only where nothing outside it takes a job's orders (`isolation`)."""

from __future__ import annotations

from pathlib import Path

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


def test_on_kubernetes_learners_are_pods_and_replicas_need_a_sandbox_here() -> None:
    from loom.lifecycle.isolation import decide
    from loom.sandbox.probe import Support

    kube = Settings(launcher="kubernetes")
    cannot = decide(kube, Support(False, "not running as root", "no cgroups"))
    assert cannot.confined and not cannot.single_user  # learners: each its own pod
    assert cannot.replicas_unconfined == "not running as root"  # deployments are refused
    assert "learners are Kubernetes pods" in cannot.description
    can = decide(kube, Support(True, "bubblewrap", "cgroup v2", "/usr/bin/bwrap"))
    assert can.replicas_unconfined is None and can.bwrap == "/usr/bin/bwrap"
    local = decide(Settings(), Support(False, "not running as root", "no cgroups"))
    assert local.single_user and local.replicas_unconfined is None


def test_deployments_are_refused_where_replicas_cannot_be_confined(tmp_path: Path) -> None:
    from loom.domain.errors import Conflict
    from loom.serving.deployments import Deployments
    from loom.serving.scaling import Scaling
    from loom.store.db import Database, migrate

    db = Database(f"sqlite:///{tmp_path / 'loom.db'}")
    migrate(db.engine)
    refusing = Deployments(db, None, tmp_path, unconfined="not running as root")  # type: ignore[arg-type]
    with pytest.raises(Conflict, match=r"cannot sandbox serving replicas \(not running as root\)"):
        refusing.create("owner", "digits", "digits", "1", Scaling(), None)
