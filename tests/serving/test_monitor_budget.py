"""The detector's share of the traffic, from the cores' idle time and its own CPU (a /proc of
the test's own making, moved on between looks)."""

from __future__ import annotations

from pathlib import Path

from loom.serving.monitor_budget import MIN_SHARE, Budget, tree_cpu

CLOCK = 100  # ticks a second, as the kernel's USER_HZ here


class FakeProc:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.busy = self.idle = 0  # ticks on cpu0
        self.detector = {10: 0, 11: 0}  # bwrap (10) and the detector under it (11)
        self.write()

    def advance(self, seconds: float, idle: float, detector: float) -> None:
        """`seconds` of cpu0, `idle` of it idle, `detector` of it the detector's."""
        self.busy += round((seconds - idle) * CLOCK)
        self.idle += round(idle * CLOCK)
        self.detector[11] += round(detector * CLOCK)
        self.write()

    def write(self) -> None:
        (self.root / "stat").write_text(
            "cpu  1 2 3 4 5 6 7 8 0 0\n"
            f"cpu0 {self.busy} 0 0 {self.idle} 0 0 0 0 0 0\n"
            "cpu1 999 0 0 0 0 0 0 0 0 0\n"  # another core, not the gateway's: never read
            "intr 1 2 3\n"
        )
        for pid, ticks in self.detector.items():
            task = self.root / str(pid) / "task" / str(pid)
            task.mkdir(parents=True, exist_ok=True)
            (self.root / str(pid) / "stat").write_text(
                f"{pid} (py thon) S 1 " + "0 " * 9 + f"{ticks} 0 0 0 20 10\n"
            )
            (task / "children").write_text("11 " if pid == 10 else "")


def budget(tmp_path: Path, share: float = 0.03) -> tuple[Budget, FakeProc]:
    found = Budget(share, cpus={0}, proc=tmp_path)
    found._clock = CLOCK
    return found, FakeProc(tmp_path)


def test_the_whole_traffic_while_the_cores_have_time_to_spare(tmp_path: Path) -> None:
    found, proc = budget(tmp_path)
    assert found.update(0.0, 10) == 1.0
    proc.advance(1.0, idle=0.3, detector=0.5)  # a hungry detector, but cores to spare
    assert found.update(1.0, 10) == 1.0


def test_busy_cores_hold_the_detector_to_its_budget_then_give_it_back(tmp_path: Path) -> None:
    """The detector took a fifth of the busy core (a quarter of the rest's CPU): its share
    falls so that it would use 3% of the rest; with time to spare again, the share doubles a
    look until it is whole."""
    found, proc = budget(tmp_path)
    found.update(0.0, 10)
    proc.advance(1.0, idle=0.0, detector=0.2)
    assert abs(found.update(1.0, 10) - 0.03 / 0.25) < 1e-6
    assert found.update(1.2, 10) == found.share  # not looked at again within half a second
    proc.advance(1.0, idle=0.0, detector=0.2)
    assert found.update(2.0, 10) >= MIN_SHARE
    low = found.share
    for step in range(3, 12):
        proc.advance(1.0, idle=0.5, detector=0.01)
        found.update(float(step), 10)
    assert low < found.share == 1.0


def test_a_detector_within_its_budget_keeps_its_share(tmp_path: Path) -> None:
    found, proc = budget(tmp_path)
    found.update(0.0, 10)
    proc.advance(1.0, idle=0.01, detector=0.02)
    assert found.update(1.0, 10) == 1.0


def test_no_budget_sends_everything(tmp_path: Path) -> None:
    found, proc = budget(tmp_path, share=0.0)
    found.update(0.0, 10)
    proc.advance(1.0, idle=0.0, detector=0.9)
    assert found.update(1.0, 10) == 1.0


def test_the_detectors_cpu_is_its_whole_tree(tmp_path: Path) -> None:
    """The sandbox's process and the detector under it; a process gone counts nothing."""
    proc = FakeProc(tmp_path)
    proc.advance(1.0, idle=0.0, detector=1.5)
    (tmp_path / "10" / "stat").write_text("10 (bwrap) S 1 " + "0 " * 9 + "50 25 0 0 20 0\n")
    assert tree_cpu(tmp_path, 10, CLOCK) == 0.75 + 1.5
    assert tree_cpu(tmp_path, 12345, CLOCK) == 0.0
