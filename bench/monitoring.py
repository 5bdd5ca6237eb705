"""Deployment monitoring: what it costs serving, and how well its detector judges drift, in one
run on this machine (no peer system: monitoring off is the other side, measured in the same run).

A. Serving. One deployment as the platform runs one (the gateway, one replica behind it on a
   unix socket, a token checked on every request) per mode — monitoring off; drift and outliers
   on; drift, outliers and a 10% payload log — all started first, then each taking the same
   `wrk` load in turn (1-sample V2 requests of reference-like data), round after round. Per
   mode: req/s, p50/p99, the gateway's and replica's CPU per request, the detector's CPU per
   request it was sent, and the requests it missed (the gateway drops, and counts, what a
   lagging detector cannot take: serving never waits for it). Aim: monitoring on ≤ 10% slower.
B. The detector alone (`python -m loom.serving.detector`, as the gateway runs it, in the
   environment the platform's builder makes): the false-positive rate over many windows of
   traffic drawn like the reference (with a 95% Wilson interval); the share of such samples
   flagged as outliers; and the detection delay of a shift of one feature by k standard
   deviations starting at a random point of a window (samples from the shift's first request
   to the window that says so), over many trials.

The detector's environment is the one the platform builds (`LOOM_MONITORING_PACKAGES` by the
environment builder, under LOOM_ENVIRONMENTS_DIR, default `.venvs/environments` here), from
the package sources the LOOM_ENVIRONMENTS_* variables name, as the platform's would; or
`--detector-python` (the admin's override).

    python bench/monitoring.py [--duration 10] [--rounds 3] [--connections 16] [--windows 200]
                               [--window 500] [--p-value 0.05] [--trials 30] [--no-pin]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import PEERS, table

import serving as base

ROOT = Path(__file__).resolve().parent.parent
MODEL = PEERS / "monitoring-model"
FEATURES = ["a", "b", "c", "d"]
SHIFTED = 2  # the feature a shift moves ("c")
PER_REQUEST = 10  # samples per request sent to the detector in part B
MODES = {
    "monitoring off": None,
    "drift + outliers": {"drift": True, "outliers": True},
    "drift + outliers + payloads 10%": {
        "drift": True,
        "outliers": True,
        "payloads": {"rate": 0.1, "retention_days": 1},
    },
}
AIM = 0.90  # monitored req/s over unmonitored


# -- the model and its environment -------------------------------------------------------------
def tabular_model() -> Path:
    """A linear classifier of four features (ONNX) with 1,000 reference rows, N(0, 1)."""
    if (MODEL / "reference.npz").exists():
        return MODEL
    import torch

    from loom import tracking

    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    tracking.save_model(net, torch.zeros(1, 4), directory=MODEL, input_names=("x",),
                        output_names=("y",))  # fmt: skip
    reference = np.random.default_rng(1).normal(size=(1000, 4)).astype(np.float32)
    tracking.save_reference(reference, feature_names=FEATURES, max_rows=1000, directory=MODEL)
    return MODEL


def detector_setup(override: str) -> tuple[str, dict[str, Any] | None]:
    """The detector's interpreter, and the environment section a gateway is given (built here
    once, as the platform's builder does; the gateway then reuses it)."""
    if override:
        return override, None
    from loom.api.platform import detector_environment
    from loom.environments import builder
    from loom.settings import Settings

    os.environ.setdefault("LOOM_ENVIRONMENTS_DIR", str(ROOT / ".venvs" / "environments"))
    section = detector_environment(Settings()).environment
    assert section is not None
    print(f"detector environment: {section['describe']} ...", file=sys.stderr, flush=True)
    ready = builder.ensure(builder.Request.from_spec(section), lambda _: None, lambda _: None)
    ready.release()
    return str(ready.python), section


# -- A. serving with monitoring on and off -----------------------------------------------------
@dataclass
class Mode:
    label: str
    monitoring: dict[str, Any] | None
    server: base.Server | None = None
    url: str = ""
    folder: Path = Path()
    loads: list[base.Load] = field(default_factory=list)
    serving_us: list[float] = field(default_factory=list)  # gateway + replica CPU per request
    detector_us: list[float] = field(default_factory=list)  # per request it was sent
    sent: int = 0
    dropped: int = 0
    skipped: int = 0  # not sent: the detector's CPU held to its budget on busy cores
    logged: int = 0
    data_path: str = ""  # haproxy, or the gateway alone


def deployment(
    label: str, monitoring: dict[str, Any] | None, pin: base.Pinning, detector: tuple[str, Any]
) -> Mode:
    """A deployment of the tabular model, with `monitoring` (None: off)."""
    from loom.domain.accounts import hash_token
    from loom.serving.access import ACCESS, render
    from loom.serving.spec import DeploymentSpec
    from loom.store.private import write_private

    mode = Mode(label, monitoring)

    def launch(port: int, folder: Path) -> list[str]:
        mode.folder = folder
        DeploymentSpec(
            name=base.NAME,
            model_dir=str(MODEL),
            model_version="1",
            port=port,
            monitoring={"window": 500, **monitoring} if monitoring else None,
            proxy="haproxy" if shutil.which("haproxy") else "",  # as the platform runs it
            monitor_python=detector[0] if detector[1] is None else "",
            monitor_environment=detector[1],
        ).write(folder)
        write_private(folder / ACCESS, render(False, {hash_token(base.TOKEN): "token"}))
        return [*pin.prefix(pin.server), sys.executable, "-m", "loom.serving.gateway", str(folder)]

    mode.server = base.process_server(label, False, "loom", launch)
    return mode


def served(mode: Mode) -> base.Server:
    assert mode.server is not None
    return mode.server


def status(folder: Path) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads((folder / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return found.get("monitoring") or {}


def wait_watching(mode: Mode, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while (said := status(mode.folder)).get("state") != "watching":
        served(mode).check()
        if said.get("state") == "failing" or time.monotonic() > deadline:
            raise RuntimeError(f"{mode.label}: the detector is not watching: {said}")
        time.sleep(0.5)


def processes(mode: Mode) -> tuple[list[psutil.Process], psutil.Process | None]:
    """The gateway and its replica, and the detector, of a running deployment."""
    pid = int((mode.folder / "gateway.pid").read_text())
    gateway = psutil.Process(pid)
    serving, detector = [gateway], None
    for child in gateway.children(recursive=True):
        with suppress(psutil.NoSuchProcess):
            if "loom.serving.detector" in " ".join(child.cmdline()):
                detector = child
            else:
                serving.append(child)
    return serving, detector


def settled(mode: Mode, detector: psutil.Process | None) -> dict[str, Any]:
    """The monitor's status once the detector has taken in what it was sent (its CPU still)."""
    last = -1.0
    for _ in range(120):
        time.sleep(1.1)  # the gateway writes its status each second
        now = base.cpu_seconds([detector]) if detector is not None else 0.0
        if abs(now - last) < 0.02:
            break
        last = now
    return status(mode.folder)


def one_load(
    mode: Mode, wrk: str, pin: base.Pinning, script: Path, args: argparse.Namespace
) -> None:
    serving, detector = processes(mode)
    before = status(mode.folder)
    cpu_before = base.cpu_seconds(serving), base.cpu_seconds([detector]) if detector else 0.0
    load = base.run_wrk(wrk, pin, mode.url, script, args.connections, args.duration)
    cpu_serving = base.cpu_seconds(serving) - cpu_before[0]
    after = settled(mode, detector)
    cpu_detector = (base.cpu_seconds([detector]) if detector else 0.0) - cpu_before[1]
    mode.loads.append(load)
    mode.serving_us.append(cpu_serving / max(load.requests, 1) * 1e6)
    sent = int(after.get("sent", 0)) - int(before.get("sent", 0))
    mode.sent += sent
    mode.dropped += int(after.get("dropped", 0)) - int(before.get("dropped", 0))
    mode.skipped += int(after.get("skipped", 0)) - int(before.get("skipped", 0))
    mode.logged += int(after.get("payloads_logged", 0)) - int(before.get("payloads_logged", 0))
    if detector is not None and sent:
        mode.detector_us.append(cpu_detector / sent * 1e6)


def serving_part(args: argparse.Namespace, pin: base.Pinning, detector: tuple[str, Any]) -> str:
    wrk = base.ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="loom-bench-monitoring-"))
    rows = np.random.default_rng(2).normal(size=(1000, 4)).astype(np.float32)
    bodies = [base.v2_request("x", rows[i : i + 1]) for i in range(len(rows))]
    script = base.lua_script(work, 1, bodies)
    modes = [deployment(label, on, pin, detector) for label, on in MODES.items()]
    try:
        for mode in modes:
            mode.url = served(mode).start()
        for mode in modes:
            base.first_infer(mode.url, bodies[0], served(mode).check, timeout=300)
            if mode.monitoring:
                wait_watching(mode)
            said = json.loads((mode.folder / "status.json").read_text())
            mode.data_path = str(said.get("data_path") or "")
        for mode in modes:  # warm: connections, the replica's first batches, the detector
            base.run_wrk(wrk, pin, mode.url, script, args.connections, 2)
            settled(mode, processes(mode)[1])
        for _ in range(args.rounds):
            for mode in modes:
                one_load(mode, wrk, pin, script, args)
    finally:
        for mode in modes:
            served(mode).stop()
    return serving_report(modes, args)


def _share(count: int, mode: Mode) -> str:
    return f"{count / max(mode.sent + mode.dropped + mode.skipped, 1):.1%}"


def serving_report(modes: list[Mode], args: argparse.Namespace) -> str:
    off = statistics.median(load.rps for load in modes[0].loads)
    header = ["mode", "data path", "req/s (median)", "vs off", "p50 ms", "p99 ms", "errors",
              "gateway+replica CPU µs/req", "detector CPU µs/req", "sent to detector",
              "missed (lagging)", "not sent (budget)", "payloads logged"]  # fmt: skip
    rows = []
    for mode in modes:
        rps = statistics.median(load.rps for load in mode.loads)
        rows.append([
            mode.label,
            mode.data_path,
            f"{rps:,.0f}",
            f"{rps / off:.1%}",
            f"{statistics.median(load.p50_ms for load in mode.loads):.2f}",
            f"{statistics.median(load.p99_ms for load in mode.loads):.2f}",
            str(sum(load.errors for load in mode.loads)),
            f"{statistics.median(mode.serving_us):.0f}",
            f"{statistics.median(mode.detector_us):.0f}" if mode.detector_us else "—",
            f"{mode.sent:,}" if mode.monitoring else "—",
            _share(mode.dropped, mode) if mode.monitoring else "—",
            _share(mode.skipped, mode) if mode.monitoring else "—",
            f"{mode.logged:,}" if mode.monitoring else "—",
        ])  # fmt: skip
    title = (
        f"A. Serving, 1-sample V2 requests, wrk -c{args.connections}, {args.duration:g} s a "
        f"row, {args.rounds} rounds alternating (medians); window 500"
    )
    worst = min(statistics.median(load.rps for load in mode.loads) / off for mode in modes[1:])
    met = "met" if worst >= AIM else "NOT met"
    verdict = f"aim: monitoring on ≥ {AIM:.0%} of off's req/s: {met} (worst {worst:.1%})"
    return table(title, header, rows) + "\n" + verdict


# -- B. the detector's judgement -----------------------------------------------------------------
class DetectorProcess:
    """The detector as the gateway runs it, fed frames and read line by line."""

    def __init__(self, python: str, config: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [python, "-m", "loom.serving.detector", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"},
        )
        self.sent = 0
        self.flagged_samples = 0
        self.until("ready")

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    def send(self, rows: np.ndarray[Any, Any]) -> None:
        body = json.dumps({"instances": rows.tolist()}).encode()
        self.sent += 1
        header = {"id": str(self.sent), "version": "1", "time": float(self.sent), "n": len(body)}
        self.stdin.write(json.dumps(header).encode() + b"\n" + body)
        self.stdin.flush()

    def until(self, kind: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        while line := self.process.stdout.readline():
            said: dict[str, Any] = json.loads(line)
            if said["type"] == "outlier":
                self.flagged_samples += len(said["samples"])
            elif said["type"] == "problem" and said.get("fatal"):
                raise RuntimeError(said["message"])
            if said["type"] == kind:
                return said
        raise RuntimeError("the detector exited")

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(30)


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def false_positives(detector: DetectorProcess, rng: np.random.Generator, windows: int,
                    window: int) -> tuple[int, float, float]:  # fmt: skip
    """Drifted windows among `windows` of reference-like traffic, the outlier-flagged share of
    its samples, and the seconds it took."""
    drifted, began, flagged = 0, time.monotonic(), detector.flagged_samples
    for _ in range(windows):
        for _ in range(window // PER_REQUEST):
            detector.send(rng.normal(size=(PER_REQUEST, 4)).astype(np.float32))
        drifted += bool(detector.until("window")["drift"])
    share = (detector.flagged_samples - flagged) / (windows * window)
    return drifted, share, time.monotonic() - began


def delays(detector: DetectorProcess, rng: np.random.Generator, shift: float, trials: int,
           window: int, most: int = 10) -> list[int | None]:  # fmt: skip
    """Per trial, the samples from the shift's first request to the window that found drift
    in the shifted feature (None: not within `most` windows); the shift starts at a random
    point of a window."""
    found: list[int | None] = []
    for _ in range(trials):
        before = PER_REQUEST * int(rng.integers(0, window // PER_REQUEST))
        for _ in range(before // PER_REQUEST):
            detector.send(rng.normal(size=(PER_REQUEST, 4)).astype(np.float32))
        shifted, filled, hit = 0, before, None
        for _ in range(most * window // PER_REQUEST):
            rows = rng.normal(size=(PER_REQUEST, 4)).astype(np.float32)
            rows[:, SHIFTED] += shift
            detector.send(rows)
            shifted += PER_REQUEST
            filled += PER_REQUEST
            if filled == window:
                filled = 0
                said = detector.until("window")
                if said["drift"] and FEATURES[SHIFTED] in said["features"]:
                    hit = shifted
                    break
        while filled:  # finish the window, so that the next trial starts on a boundary
            detector.send(rng.normal(size=(PER_REQUEST, 4)).astype(np.float32))
            filled = (filled + PER_REQUEST) % window
            if not filled:
                detector.until("window")
        found.append(hit)
    return found


def detector_part(args: argparse.Namespace, python: str) -> str:
    config = {"references": {"1": str(MODEL / "reference.npz")}, "window": args.window,
              "p_value": args.p_value, "drift": True, "outliers": True}  # fmt: skip
    detector = DetectorProcess(python, config)
    rng = np.random.default_rng(3)
    try:
        drifted, outlier_share, seconds = false_positives(detector, rng, args.windows, args.window)
        shifts = {k: delays(detector, rng, k, args.trials, args.window) for k in args.shifts}
    finally:
        detector.close()
    low, high = wilson(drifted, args.windows)
    fp = (
        f"B. The detector alone: window {args.window}, p {args.p_value:g} (Bonferroni over "
        f"{len(FEATURES)} features), reference 1,000 rows N(0, 1)\n"
        f"false positives: {drifted} of {args.windows} windows of reference-like traffic drifted "
        f"= {drifted / args.windows:.1%} (95% CI {low:.1%}–{high:.1%}; the test's level is "
        f"≤ {args.p_value:.0%}); {seconds:.1f} s for {args.windows * args.window:,} samples\n"
        f"outliers flagged on reference-like samples: {outlier_share:.3%} (asked: 0.1%)"
    )
    rows = []
    for shift, found in shifts.items():
        hits = [d for d in found if d is not None]
        rows.append([
            f"{shift:g} σ",
            f"{len(hits)}/{len(found)}",
            f"{sum(1 for d in hits if d <= args.window) / len(found):.0%}",
            f"{statistics.median(hits):,.0f}" if hits else "—",
            f"{statistics.mean(hits) / args.window:.2f}" if hits else "—",
            f"{max(hits):,}" if hits else "—",
        ])  # fmt: skip
    header = ["shift of feature c", "detected (≤ 10 windows)", "within one window",
              "median delay (samples)", "mean delay (windows)", "worst (samples)"]  # fmt: skip
    title = f"detection delay, {args.trials} trials a shift, each starting at a random point"
    return fp + "\n\n" + table(title, header, rows)


# -- the run ---------------------------------------------------------------------------------
def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=10, help="wrk seconds a row")
    parser.add_argument("--rounds", type=int, default=3, help="loads per mode, alternating")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--windows", type=int, default=200, help="for the false-positive rate")
    parser.add_argument("--window", type=int, default=500, help="samples per drift test")
    parser.add_argument("--p-value", type=float, default=0.05)
    parser.add_argument("--trials", type=int, default=30, help="per shift, for the delay")
    parser.add_argument("--shifts", default="0.25,0.5,1", help="in standard deviations")
    parser.add_argument("--detector-python", default="", help="the admin's override")
    parser.add_argument("--no-pin", action="store_true")
    parser.add_argument("--only", choices=("serving", "detector"), help="one part only")
    args = parser.parse_args(argv)
    args.shifts = [float(s) for s in args.shifts.split(",")]
    return args


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    pin = (
        base.Pinning(None, None)
        if args.no_pin or (os.cpu_count() or 1) < 2
        else base.Pinning("0", "1")
    )
    tabular_model()
    python, section = detector_setup(args.detector_python)
    load_start = os.getloadavg()
    parts: list[Callable[[], str]] = []
    if args.only in (None, "serving"):
        parts.append(lambda: serving_part(args, pin, (python, section)))
    if args.only in (None, "detector"):
        parts.append(lambda: detector_part(args, python))
    reports = [part() for part in parts]
    pinning = (
        f"gateways (their replicas and detectors too) on CPU {pin.server}, wrk on CPU {pin.load}"
        if pin.server
        else "no pinning"
    )
    print(
        f"{os.cpu_count()} CPUs; {pinning}; load average "
        f"{' '.join(f'{x:.1f}' for x in load_start)} at the start, "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (other work on the "
        "machine slows both sides alike; CPU µs/req, each process's own time, is steadier)\n"
    )
    print("\n\n".join(reports))


if __name__ == "__main__":
    main()
