"""What a job's network namespace costs, beside iproute2 doing the same, in one run.

Per job: make the namespace with its loopback up, start a learner's process inside it, remove
it. Measured for
  - Loom (`loom.sandbox.netns`: unshare in a thread, an ioctl for the loopback, a bind mount;
    the learner enters it with setns before exec),
  - iproute2 (`ip netns add`, `ip -n … link set lo up`, the learner by `ip netns exec`,
    `ip netns del`): what an admin's script would do,
  - no namespace (the learner started on the host's network): the floor.
And per learner of a gang: entering a namespace that exists (setns before exec) against the
same start without it.

    python bench/netns.py [--runs 50]        (as root)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import table

from loom.sandbox import netns

LEARNER = ["/bin/true"]


def timed(action: Callable[[int], None], runs: int) -> list[float]:
    out = []
    for i in range(runs):
        began = time.perf_counter()
        action(i)
        out.append(time.perf_counter() - began)
    return out


def loom_job(i: int) -> None:
    path = netns.create(f"loom-bench-{os.getpid()}-{i}")
    fd = netns.open_namespace(path)
    try:
        subprocess.run(LEARNER, preexec_fn=lambda: netns.enter(fd), check=True)
    finally:
        os.close(fd)
        netns.remove(path.name)


def iproute2_job(i: int) -> None:
    name = f"ipbench-{os.getpid()}-{i}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", name, *LEARNER], check=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def host_job(_i: int) -> None:
    subprocess.run(LEARNER, preexec_fn=lambda: None, check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("network namespaces need root")
    systems = {
        "no namespace (host network)": host_job,
        "Loom (loom.sandbox.netns)": loom_job,
    }
    if shutil.which("ip"):
        systems["iproute2 (ip netns add/exec/del)"] = iproute2_job
    else:
        print("iproute2 is not installed here: its row is left out")
    results: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(args.runs):  # interleaved: the machine's other load weighs on each alike
        for name, job in systems.items():
            results[name] += timed(job, 1)
    floor = statistics.median(results["no namespace (host network)"])
    rows = [
        [name, str(len(found)), f"{statistics.median(found) * 1000:.2f}",
         f"+{(statistics.median(found) - floor) * 1000:.2f}"]
        for name, found in results.items()
    ]  # fmt: skip
    header = ["per job", "runs", "make, start a learner, remove (ms)", "over no namespace (ms)"]
    print(table("a job's network namespace (median)", header, rows))

    path = netns.create(f"loom-bench-{os.getpid()}-gang")
    fd = netns.open_namespace(path)
    try:
        inside: list[float] = []
        outside: list[float] = []
        for _ in range(args.runs):
            inside += timed(lambda _i: _enter_and_run(fd), 1)
            outside += timed(host_job, 1)
    finally:
        os.close(fd)
        netns.remove(path.name)
    extra = (statistics.median(inside) - statistics.median(outside)) * 1000
    print(f"\nper further learner of a gang (setns before exec): {extra:+.2f} ms (median)")


def _enter_and_run(fd: int) -> None:
    subprocess.run(LEARNER, preexec_fn=lambda: netns.enter(fd), check=True)


if __name__ == "__main__":
    main()
