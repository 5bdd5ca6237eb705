"""How much of a deployment's traffic its detector is sent: all of it while the cores the
gateway runs on have time to spare, and on busy cores a share that keeps the detector's CPU
within a budget of what everything else on them uses.

The detector runs at a low priority, but on a busy core that does not make it free: each
request it judges costs some tens of microseconds, against a hundred or so that serving a small
model costs, and it ran in the gaps of serving's pipeline and slowed it (a third fewer requests
per second on one core, measured by bench/monitoring.py). So, twice a second, the gateway looks
at those cores' idle time (`/proc/stat`) and the detector's own CPU (its process tree). On busy
cores (less than `BUSY_IDLE` idle), a detector above its budget (`LOOM_MONITORING_CPU_BUDGET`, a
share of what the rest uses there) brings its share of the requests down in proportion; cores
with time to spare double the share, up to all. A request not sent is counted (`skipped`);
drift windows then fill with a random sample of the traffic.
"""

from __future__ import annotations

import os
from pathlib import Path

BUSY_IDLE = 0.05  # cores with less idle time than this are busy
MIN_SHARE = 0.01  # the detector is always sent some of the traffic
EVERY_S = 0.5
PROC = Path("/proc")


class Budget:
    def __init__(self, budget: float, cpus: set[int] | None = None, proc: Path = PROC) -> None:
        self.budget = budget  # 0: none, every request is sent
        self.cpus = cpus if cpus is not None else os.sched_getaffinity(0)
        self.proc = proc
        self.share = 1.0
        self._last: tuple[float, float, float, float] | None = None  # time, busy, idle, detector
        self._clock = float(os.sysconf("SC_CLK_TCK"))

    def update(self, now: float, detector: int | None) -> float:
        """The share to send, looked at again once `EVERY_S` has passed since the last look."""
        if self.budget <= 0 or (self._last is not None and now - self._last[0] < EVERY_S):
            return self.share
        busy, idle = self._cores()
        used = tree_cpu(self.proc, detector, self._clock) if detector is not None else 0.0
        last, self._last = self._last, (now, busy, idle, used)
        if last is None:
            return self.share
        busy_s, idle_s, used_s = busy - last[1], idle - last[2], max(0.0, used - last[3])
        total = busy_s + idle_s
        if total <= 0:
            return self.share
        if idle_s / total >= BUSY_IDLE:
            self.share = min(1.0, self.share * 2)
        else:
            rest = max(busy_s - used_s, 1e-9)
            ratio = used_s / rest
            if ratio > self.budget:
                self.share = max(MIN_SHARE, self.share * self.budget / ratio)
        return self.share

    def _cores(self) -> tuple[float, float]:
        """Busy and idle seconds so far, summed over this process's cores."""
        busy = idle = 0
        try:
            lines = (self.proc / "stat").read_text().splitlines()
        except OSError:
            return 0.0, 0.0
        for line in lines:
            name, _, rest = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in self.cpus:
                continue
            ticks = [int(t) for t in rest.split()]
            spare = ticks[3] + ticks[4]  # idle, iowait
            busy += sum(ticks[:8]) - spare  # user … steal (guest time is within user)
            idle += spare
        return busy / self._clock, idle / self._clock


def tree_cpu(proc: Path, pid: int, clock: float) -> float:
    """CPU seconds (user + system) of a process and all its descendants now running."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            fields = (proc / str(current) / "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / clock
            for task in (proc / str(current) / "task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total
