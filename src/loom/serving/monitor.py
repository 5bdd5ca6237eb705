"""A gateway's monitoring: the payload log, and the drift and outlier detector beside it.

Per request the gateway does two cheap things here: a coin toss for the payload log, and a
copy of the request's body for the detector, written into its pipe with the others gathered
in the same 20 ms (dropped, and counted, when the detector lags: serving never waits for
monitoring). The detector (`detector.py`) runs in an environment
of its own that holds Alibi Detect, built once per content hash like a job's, confined like a
replica; what it reports is kept in `monitor/windows.jsonl` (the platform takes it into its
database), in the payload log's outliers, in `status.json` and in the gateway's metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from loom.serving.confined import confine
from loom.serving.http1 import Message
from loom.serving.monitor_budget import Budget
from loom.serving.monitoring import REFERENCE_FILE, Monitoring
from loom.serving.payloads import MAX_BODY, PayloadLog
from loom.serving.replica_envs import EnvironmentFailed, ReplicaEnvironments
from loom.serving.spec import DeploymentSpec

FOLDER = "monitor"
WINDOWS = "windows.jsonl"
MAX_PIPE = 4 * 2**20  # bytes waiting for the detector; past it requests are not sent
GATHER_S = 0.1  # frames gathered this long, then written at once: one write and one wake of
# the detector per 100 ms rather than per request (it judges what it reads in one batch: the
# larger the batch, the less each request costs it)
MAX_PENDING = 2048  # recent requests kept to log one the detector flags
OUTLIER_BODY = 4096
RESTART_S = (1.0, 60.0)
# The detector runs at a lower CPU priority than serving: on a busy machine the gateway and the
# replicas take the cores first, the detector what is left (and, lagging, it is sent fewer of
# the requests, counted as missed): monitoring never slows what it watches.
DETECTOR_NICE = 10
MAX_MESSAGE = 600
INFER = (b"/infer", b":predict")


class Monitor:
    def __init__(self, folder: Path, spec: DeploymentSpec, settings: Monitoring) -> None:
        self.folder = folder
        self.spec = spec
        self.settings = settings
        self.root = folder / FOLDER
        self.root.mkdir(mode=0o700, exist_ok=True)
        self.payloads = (
            PayloadLog(
                folder,
                settings.payload_rate,
                settings.payload_retention_days * 86400,
                int(settings.payload_max_mb * 2**20),
            )
            if settings.payload_rate > 0
            else None
        )
        self.state = "off" if not settings.detects else "starting"
        self.message = ""
        self.process: asyncio.subprocess.Process | None = None
        self.sent = 0
        self.dropped = 0
        self.skipped = 0  # not sent: the detector's share of the traffic was below 1
        self.budget = Budget(spec.monitor_cpu_budget)
        self.share = 1.0
        self._coin = random.Random()
        self.outliers = 0
        self.windows = 0
        self.last: dict[str, dict[str, Any]] = {}  # version → its last window
        self.detected: dict[str, Any] = {}  # what the detector said it watches
        self.pending: OrderedDict[str, bytes] = OrderedDict()
        self._gathered = bytearray()  # frames not yet written to the detector's pipe
        self._gathering: asyncio.TimerHandle | None = None
        self._next = 0
        self._boot = f"{int(time.time()):x}"
        self._windows_out = (self.root / WINDOWS).open("a", encoding="utf-8")
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        # the detector's environment: built (or reused) like a replica's, its log beside it
        self.environments = ReplicaEnvironments(self.root, self._building)

    def _building(self, news: str) -> None:
        """The environment build's progress, in the monitor's status (from its thread)."""
        self.message = news[:MAX_MESSAGE]

    @classmethod
    def of(cls, folder: Path, spec: DeploymentSpec) -> Monitor | None:
        settings = Monitoring.of(spec.monitoring)
        if settings is None or not settings.active:
            return None
        return cls(folder, spec, settings)

    # -- per request -------------------------------------------------------------------------
    def observe(
        self, request: Message, response: Message, status: int, version: str | None, ms: float
    ) -> None:
        """A request the gateway answered itself: a sample logged, each answered one sent to
        the detector."""
        if version is None or not request.target.encode().endswith(INFER):
            return
        self.record(request.target, request.body, response.body, status, version, ms)

    def record(
        self,
        path: str,
        body: bytes,
        answer: bytes | None,
        status: int,
        version: str,
        ms: float,
        sampled: bool | None = None,
    ) -> None:
        """One inference request and its answer (None: not kept), wherever it was answered;
        `sampled` is the proxy's coin toss for the payload log (None: tossed here)."""
        self._next += 1
        request_id = f"{self._boot}-{self._next}"
        now = time.time()
        if self.payloads is not None and (self.payloads.sampled() if sampled is None else sampled):
            self.payloads.write(
                {
                    "id": request_id,
                    "time": now,
                    "version": version,
                    "path": path,
                    "status": status,
                    "ms": round(ms, 3),
                    "request": body,
                    "response": answer,
                }
            )
        if status == 200 and self.state == "watching":
            if self.share >= 1 or self._coin.random() < self.share:
                self._send(request_id, version, now, body)
            else:
                self.skipped += 1

    @property
    def payload_rate(self) -> float:
        """The share of requests whose bodies go to the payload log."""
        return self.payloads.rate if self.payloads is not None else 0.0

    def _send(self, request_id: str, version: str, now: float, body: bytes) -> None:
        process = self.process
        if process is None or process.stdin is None or process.stdin.is_closing():
            return
        waiting = process.stdin.transport.get_write_buffer_size() + len(self._gathered)
        if waiting > MAX_PIPE:
            self.dropped += 1
            return
        header = {"id": request_id, "version": version, "time": now, "n": len(body)}
        self._gathered += json.dumps(header).encode() + b"\n" + body
        self.sent += 1
        self.pending[request_id] = body[:OUTLIER_BODY]
        if len(self.pending) > MAX_PENDING:
            self.pending.popitem(last=False)
        if self._gathering is None:
            self._gathering = asyncio.get_running_loop().call_later(GATHER_S, self._write)

    def _write(self) -> None:
        """The gathered frames, into the detector's pipe (whole frames only, so a detector
        started again after a failure reads them as well as the one they were meant for)."""
        self._gathering = None
        frames, self._gathered = bytes(self._gathered), bytearray()
        process = self.process
        stdin = process.stdin if process is not None else None
        if frames and stdin is not None and not stdin.is_closing():
            stdin.write(frames)

    # -- the detector process ----------------------------------------------------------------
    def start(self) -> None:
        if self.settings.detects:
            self._task = asyncio.get_running_loop().create_task(self._keep_running())

    async def _keep_running(self) -> None:
        delay = RESTART_S[0]
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._run_once()
            except EnvironmentFailed as exc:
                self._failing(f"the detector's environment: {exc}")
            except Exception as exc:  # the detector's trouble never stops serving
                self._failing(f"{type(exc).__name__}: {exc}")
            if self._stopping:
                return
            if self.state != "failing":
                self._failing(f"the detector exited: {self._log_tail()}")
            delay = RESTART_S[0] if time.monotonic() - began > 60 else min(delay * 2, RESTART_S[1])
            await asyncio.sleep(delay)

    def _failing(self, message: str) -> None:
        self.state, self.message = "failing", message[:MAX_MESSAGE]

    async def _run_once(self) -> None:
        python, environment = await self._python()
        references = self._references()
        if not references:
            self._failing(
                f"no reference data: the version's files have no {REFERENCE_FILE} "
                "(save one with tracking.save_reference in the training script)"
            )
            await asyncio.sleep(30)
            return
        config = {
            "references": {v: str(p) for v, p in references.items()},
            "drift": self.settings.drift,
            "outliers": self.settings.outliers,
            "window": self.settings.window,
            "p_value": self.settings.p_value,
            "outlier_fpr": self.settings.outlier_fpr,
        }
        command = [python, "-m", "loom.serving.detector", json.dumps(config)]
        start = confine(
            self._sandbox(python, environment, list(references.values())),
            self.folder,
            f"monitor-{self.folder.name}",
            command,
            Path(self.spec.model_dir),
            environment=environment,
        )
        self.state, self.message = "starting", "the detector is starting"
        with (self.root / "detector.log").open("ab") as err:
            self.process = await asyncio.create_subprocess_exec(
                *start.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=self.folder,
                env={**start.env, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"},
                start_new_session=True,
                preexec_fn=partial(_yielding, start.before_exec),
                limit=2**20,
            )
        assert self.process.stdout is not None
        if not await self._until_ready(self.process.stdout):
            await self._end_process()
            return
        while line := await self.process.stdout.readline():
            self._heard(line)
        await self.process.wait()

    async def _until_ready(self, stdout: asyncio.StreamReader) -> bool:
        """Whether the detector said it is ready within the start deadline. One that exits
        first, or is still not ready by then (a hung start, or a machine too loaded to import
        Alibi Detect in time), is `failing` with why, rather than `starting` for ever."""
        limit = self.spec.monitor_start_timeout_s
        deadline = time.monotonic() + limit
        while self.state != "watching":
            try:
                line = await asyncio.wait_for(stdout.readline(), deadline - time.monotonic())
            except TimeoutError:
                doing = self.message or "no word from it"
                self._failing(f"the detector was not ready within {limit:g} s ({doing}); "
                              f"stopped, to be started again. {self._log_tail()}")  # fmt: skip
                return False
            if not line:
                code = await self._end_process()
                if self.state != "failing":
                    self._failing(f"the detector exited ({code}): {self._log_tail()}")
                return False
            self._heard(line)
        return True

    async def _end_process(self) -> int | None:
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 5)
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        return process.returncode

    async def _python(self) -> tuple[str, Path | None]:
        """The detector's interpreter, and its environment when the gateway built it: the
        platform's environment builder makes it once per content hash (shared, held while
        the detector runs), unless the admin named an interpreter (LOOM_MONITORING_PYTHON)."""
        if self.spec.monitor_python:
            return self.spec.monitor_python, None
        if not self.spec.monitor_environment:
            raise RuntimeError("the platform gave no environment for the detector")
        self.state, self.message = "building its environment", ""
        folder = await self.environments.prepare(self.spec.monitor_environment)
        return str(folder / "bin" / "python"), folder

    def _references(self) -> dict[str, Path]:
        found = {}
        for version, model_dir in (
            (self.spec.model_version, self.spec.model_dir),
            (self.spec.canary_version, self.spec.canary_model_dir),
        ):
            if version and model_dir and (Path(model_dir) / REFERENCE_FILE).is_file():
                found[version] = Path(model_dir) / REFERENCE_FILE
        return found

    def _sandbox(
        self, python: str, environment: Path | None, references: list[Path]
    ) -> dict[str, Any] | None:
        """The replicas' sandbox, with the references' folders also readable (and the venv an
        admin named: the venv, not the interpreter its link names); a built environment is
        added by `confine`, as a replica's is."""
        section = self.spec.sandbox
        if section is None:
            return None
        extra = {str(p.parent) for p in references}
        if environment is None:
            extra.add(str(Path(python).parent.parent))
        return {**section, "read_only": sorted({*section["read_only"], *extra})}

    def _heard(self, line: bytes) -> None:
        try:
            said = json.loads(line)
        except ValueError:
            return
        kind = said.get("type")
        if kind == "loading":
            self.message = "importing Alibi Detect and fitting on the reference data"
        elif kind == "problem" and said.get("fatal"):
            self._failing(f"the detector cannot start: {said.get('message', '')}")
        elif kind == "ready":
            self.state, self.message, self.detected = "watching", "", said.get("versions", {})
        elif kind == "window":
            self.windows += 1
            self.last[str(said["version"])] = said
            self._windows_out.write(json.dumps(said, separators=(",", ":")) + "\n")
            self._windows_out.flush()
        elif kind == "outlier":
            self.outliers += 1  # a flagged request is kept, sampled for the log or not
            body = self.pending.get(str(said.get("id")), b"")
            self._outlier_log().outlier({**said, "request": body[:MAX_BODY]})
        elif kind == "problem":
            self.message = str(said.get("message", ""))[:300]

    def _outlier_log(self) -> PayloadLog:
        if self.payloads is None:  # the outliers' file only, within the same budget
            self.payloads = PayloadLog(
                self.folder,
                0.0,
                self.settings.payload_retention_days * 86400,
                int(self.settings.payload_max_mb * 2**20),
            )
        return self.payloads

    def _log_tail(self) -> str:
        try:
            lines = (self.root / "detector.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(line for line in lines[-3:] if line.strip())[-500:]

    # -- the gateway's tick, status and metrics ----------------------------------------------
    def tick(self) -> None:
        if self.payloads is not None:
            self.payloads.flush()
        if self.state == "watching" and self.process is not None:
            self.share = self.budget.update(time.monotonic(), self.process.pid)

    async def stop(self) -> None:
        self._stopping = True
        if self._gathering is not None:
            self._gathering.cancel()
        await self._end_process()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.environments.release()
        if self.payloads is not None:
            self.payloads.close()
        self._windows_out.close()

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "message": self.message,
            "watching": self.detected,
            "sent": self.sent,
            "dropped": self.dropped,
            "skipped": self.skipped,
            "share": round(self.share, 4),
            "outliers": self.outliers,
            "windows": self.windows,
            "payloads_logged": self.payloads.logged if self.payloads is not None else 0,
            "last": {
                v: {k: w.get(k) for k in ("drift", "score", "p_value", "features", "until")}
                for v, w in self.last.items()
            },
        }

    def families(self, name: str) -> list[Metric]:
        drift = GaugeMetricFamily(
            "loom_deployment_drift",
            "1 if the last window of requests drifted from the version's reference",
            labels=["deployment", "version"],
        )
        score = GaugeMetricFamily(
            "loom_deployment_drift_score",
            "The last window's largest Kolmogorov-Smirnov distance over features",
            labels=["deployment", "version"],
        )
        p_value = GaugeMetricFamily(
            "loom_deployment_drift_p_value",
            "The last window's smallest p-value over features",
            labels=["deployment", "version"],
        )
        for version, window in sorted(self.last.items()):
            drift.add_metric([name, version], 1.0 if window.get("drift") else 0.0)
            score.add_metric([name, version], float(window.get("score", 0.0)))
            p_value.add_metric([name, version], float(window.get("p_value", 1.0)))
        logged = self.payloads.logged if self.payloads is not None else 0
        counters = [
            ("loom_deployment_outliers", "Requests flagged as outliers", self.outliers),
            ("loom_deployment_drift_windows", "Windows tested for drift", self.windows),
            ("loom_deployment_monitor_dropped", "Requests the detector missed", self.dropped),
            (
                "loom_deployment_monitor_skipped",
                "Requests not sent to the detector, its CPU held to a budget on busy cores",
                self.skipped,
            ),
            ("loom_deployment_payloads_logged", "Requests whose payloads were logged", logged),
        ]
        out: list[Metric] = [drift, score, p_value]
        for metric, documentation, value in counters:
            family = CounterMetricFamily(metric, documentation, labels=["deployment"])
            family.add_metric([name], value)
            out.append(family)
        return out


def _yielding(before_exec: Callable[[], None] | None) -> None:
    """In the detector's process before its exec: the sandbox's own step, then a lower priority
    (inherited by what the sandbox runs)."""
    if before_exec is not None:
        before_exec()
    os.nice(DETECTOR_NICE)
