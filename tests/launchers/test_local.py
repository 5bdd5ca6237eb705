"""The local launcher's spawner: started ahead of the first learner, stopped with the launcher."""

from __future__ import annotations

from loom.launchers.local import LocalLauncher
from tests.conftest import eventually


def test_warm_starts_the_spawner_before_any_launch() -> None:
    """`warm` (the lifecycle calls it when it starts leading) has the spawner running with no
    learner asked for yet; closing the launcher stops it."""
    launcher = LocalLauncher(cpus=1, memory="1GiB", gpus=0)
    spawner = launcher._spawner
    try:
        launcher.warm()
        eventually(lambda: spawner._process is not None and spawner._process.poll() is None)
        process = spawner._process
    finally:
        launcher.close()
    assert process is not None and process.wait(timeout=10) is not None
