"""Runs one learner: workspace, data, environment, the user's command, results and status.

The spec (a JSON file written by the launcher) holds no secret; the job-scoped token arrives on
standard input and never reaches the learner's environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from loom.environments import builder
from loom.learner import mlflow_api, transfer
from loom.learner.collectors import file_collectors, line_collectors
from loom.learner.confine import BIN, Confinement, disk_usage, process_group
from loom.learner.prometheus import TIMEOUT_S, PrometheusCollector
from loom.learner.shipper import Api, Shipper, write_json_atomic
from loom.sandbox import environment, files, netns

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

# FfDL's error codes, as plain strings: the wrapper stays free of the domain's imports.
LEARNER_FAILED = "C201"
MEMORY_EXCEEDED = "C202"
STORAGE_EXCEEDED = "C203"
LOAD_MODEL = "S301"
LOAD_DATA = "S302"
STORE_RESULTS = "S303"
ENVIRONMENT_FAILED = "C103"
INTERNAL = "S101"
AFTER_HALT_S = 5.0  # once halted, how long the wrapper goes on trying to tell the platform
HOST_LOST = signal.SIGUSR2  # the engine's actor that held this learner is gone (`spawner`)

LOCAL_STORE_TYPES = {"local", "mount_volume", "host_mount"}
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class StepFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Learner:
    def __init__(
        self, spec: dict[str, Any], token: str, secrets: dict[str, dict[str, str]]
    ) -> None:
        self.spec = spec
        self.secrets = secrets
        self.dirs = {k: Path(v) for k, v in spec["dirs"].items()}
        self.status_file = Path(spec["status_file"])
        home = spec.get("home")
        server_file = Path(home) / "server.json" if home else None
        api = Api(spec["api_url"], token, server_file, spec.get("api_ca"), spec.get("api_urls"))
        self.api = api
        base = f"/v1/learner/jobs/{spec['job_id']}/learners/{spec['learner_id']}"
        metrics = spec.get("metrics")
        self.shipper = Shipper(
            api,
            base,
            Path(spec["spool_file"]),
            spec["attempt"],
            spec["learner_id"],
            line_collectors(metrics),
            spec.get("budgets"),
        )
        self.transfer = transfer.for_spec(spec, api, lambda line: self.shipper.put("loom", line))
        self.file_collectors = file_collectors(metrics, {k: str(v) for k, v in self.dirs.items()})
        self._polling = threading.Event()
        self.memory_limit = int(spec.get("memory_limit") or 0)
        self.memory_exceeded: int | None = None
        self.retry_s = float(spec.get("retry_s", 600))
        self.child: subprocess.Popen[bytes] | None = None
        self.halting = False
        self.private = self.status_file.parent  # the wrapper's own folder
        sandbox = spec.get("sandbox")
        self.confined = Confinement(sandbox, self.private) if sandbox else None
        self.storage_limit = int(spec.get("storage_limit") or 0)
        self.storage_exceeded: int | None = None
        self.python = str(spec.get("python") or sys.executable)
        self.env_bin: str | None = None
        self._environment: builder.Ready | None = None
        self.mlflow: mlflow_api.Endpoint | None = None
        self._building: threading.Event | None = None

    # -- status -----------------------------------------------------------------------------
    def set_state(self, state: str, *, tell: bool = True, **extra: Any) -> dict[str, Any]:
        """Record where the learner is (status file first, it is what survives) and tell the
        platform: progress in the background (unless `tell` is false), the outcome by the
        caller."""
        status = {"state": state, "time": time.time(), "pid": os.getpid(), **extra}
        if self.child is not None:
            status["child_pgid"] = self.child.pid
        if self.confined is not None and self.confined.group is not None:
            status["cgroup"] = self.confined.spec["cgroup"]
        status["last_seq"] = self.shipper.seq
        status["last_mseq"] = self.shipper.mseq
        write_json_atomic(self.status_file, status)
        if tell and not _final(state):
            self.shipper.status(status)
        return status

    # -- steps ------------------------------------------------------------------------------
    def download(self) -> None:
        import shutil
        import zipfile

        stores = self.spec.get("data_stores", [])
        for store in stores:
            self._check_store(store)
        from_store = any(store.get("data_dir") for store in stores if store["type"] == "local")
        for name, path in self.dirs.items():
            if not (name == "DATA_DIR" and from_store):
                path.mkdir(parents=True, exist_ok=True)
        # An earlier attempt's code folder may hold links its learner planted: unpack afresh.
        shutil.rmtree(self.dirs["MODEL_DIR"], ignore_errors=True)
        self.dirs["MODEL_DIR"].mkdir(parents=True)
        try:
            if self.transfer is not None:  # no shared disk: the code, checkpoints by the API
                self.transfer.fetch(self.dirs["MODEL_DIR"])
            else:
                with zipfile.ZipFile(self.spec["code_zip"]) as archive:
                    archive.extractall(self.dirs["MODEL_DIR"])
        except transfer.TransferFailed as exc:
            raise StepFailed(LOAD_MODEL, exc.message) from exc
        except (OSError, zipfile.BadZipFile) as exc:
            raise StepFailed(LOAD_MODEL, f"could not unpack the model definition: {exc}") from exc
        for store in stores:
            if store["type"] == "s3" and store.get("bucket"):
                self._fetch(store)

    def _fetch(self, store: dict[str, Any]) -> None:
        from loom.learner import datastores

        def progress(message: str) -> None:
            self.shipper.status({"state": "DOWNLOADING", "time": time.time(), "message": message})

        try:
            datastores.download(
                store,
                self.secrets.get(store["id"], {}),
                Path(store["download_dir"]),
                progress,
                deadline_s=min(self.retry_s, 60.0),
            )
        except datastores.StoreError as exc:
            raise StepFailed(LOAD_DATA, exc.message) from exc

    def prepare(self) -> None:
        """The job's environment on this machine: reused, or built (its lines in the job's
        log, its progress in the job's status), then held until the learner ends."""
        section = self.spec.get("environment")
        if not section:
            return
        request = builder.Request.from_spec(section)
        self._building = request.cancel  # a halt stops the build
        if self.halting:
            return
        said = [0.0]

        def progress(message: str) -> None:
            now = time.monotonic()
            if now - said[0] >= 0.5:
                said[0] = now
                self.shipper.status(
                    {"state": "DOWNLOADING", "time": time.time(), "message": message}
                )

        try:
            ready = builder.ensure(request, lambda line: self.shipper.put("env", line), progress)
        except builder.BuildFailed as exc:
            if self.halting:
                return  # stopped by the halt: run() reports HALTED
            raise StepFailed(
                ENVIRONMENT_FAILED,
                f"the job's environment ({request.describe}) could not be built; "
                f"the installer said:\n{exc.message}",
            ) from exc
        except OSError as exc:
            raise StepFailed(
                ENVIRONMENT_FAILED, f"the job's environment could not be prepared: {exc}"
            ) from exc
        self._environment = ready
        self.python, self.env_bin = str(ready.python), str(ready.bin)
        with contextlib.suppress(OSError):
            builder.collect(request, lambda line: self.shipper.put("env", line))

    def _check_store(self, store: dict[str, Any]) -> None:
        if store["type"] == "s3":
            return
        if store["type"] not in LOCAL_STORE_TYPES:
            raise StepFailed(
                LOAD_DATA,
                f"data store {store['id']!r} of type {store['type']!r} is not supported by this "
                f"platform yet; use a local or mount_volume store",
            )
        data = store.get("data_dir")
        if data and not Path(data).is_dir():
            raise StepFailed(
                LOAD_DATA, f"data store {store['id']!r}: training data folder {data} does not exist"
            )

    def environment(self) -> dict[str, str]:
        """Built from an allow-list, never the wrapper's own environment: the locale, the
        variables an admin passes on (`LOOM_LEARNER_ENV`), FfDL's and the framework's, and the
        manifest's `environment.env`."""
        shims = self.private / "bin"
        _python_shims(shims, self.python)
        env = environment.allowed(self.spec.get("pass_env", []))
        bin_dir = BIN if self.confined is not None else str(shims)
        if self.env_bin is not None:  # the environment's own programs (console scripts)
            bin_dir += f":{self.env_bin}"
            env["VIRTUAL_ENV"] = str(Path(self.env_bin).parent)
        home = "/tmp" if self.confined is not None else os.environ.get("HOME", "/tmp")
        env.update(PATH=f"{bin_dir}:{SYSTEM_PATH}", HOME=home, USER="loom", LOGNAME="loom")
        threads = max(int(float(self.spec.get("cpus") or 0)), 1)
        env["OMP_NUM_THREADS"] = str(threads)  # a learner's share of the cores, not all of them
        env.update({k: str(v) for k, v in self.dirs.items()})
        env.update(self.spec.get("env", {}))
        env["PYTHONPATH"] = str(self.dirs["MODEL_DIR"])
        env["PYTHONUNBUFFERED"] = "1"
        if self.confined is not None:
            env.update(self.confined.network_env())
        if self.mlflow is not None:  # MLflow's client logs here (unless the job says otherwise)
            env.update(self.mlflow.env())
        env.update(self.spec.get("user_env", {}))
        return env

    def _fetched(self) -> list[Path]:
        """Data folders the wrapper filled itself (not a host folder of a local store)."""
        stores = self.spec.get("data_stores", [])
        local = any(s.get("data_dir") for s in stores if s["type"] == "local")
        fetched = [] if local else [self.dirs["DATA_DIR"]]
        # and the checkpoints the job starts with (unpacked from the platform, or a PBT
        # parent's, copied in before its first attempt): the learner's to change
        fetched.append(self.dirs["CHECKPOINT_DIR"])
        return fetched + [Path(s["download_dir"]) for s in stores if s.get("download_dir")]

    def _command(self, copied: list[int]) -> tuple[list[str], Callable[[], None] | None]:
        """The argv that runs the user's command, and what the child does before exec; the
        descriptors the sandbox copies files from are added to `copied`."""
        command, cwd = self.spec["command"], str(self.dirs["MODEL_DIR"])
        if self.confined is None:
            return ["/bin/bash", "-c", command], _before_exec(self.storage_limit, None)
        try:
            self.confined.prepare(self.dirs["MODEL_DIR"], self._fetched())
        except netns.NetnsUnavailable as exc:  # never started outside it instead
            raise StepFailed(INTERNAL, f"the learner could not be started: {exc}") from exc
        argv = self.confined.argv(command, cwd, self.private / "bin", copied)
        return argv, _before_exec(self.storage_limit, self.confined.enter)

    def process(self) -> int:
        self.mlflow = self._mlflow_endpoint()
        self._scrape_in_the_jobs_network()
        env = self.environment()
        copied: list[int] = []
        try:
            argv, before_exec = self._command(copied)
            self.child = subprocess.Popen(
                argv,
                cwd=self.dirs["MODEL_DIR"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=before_exec,  # noqa: PLW1509 (a few plain syscalls: joins a cgroup)
                pass_fds=copied,  # bwrap's to read; it closes them before the command runs
            )
        finally:
            for fd in copied:  # the child has its own
                os.close(fd)
        if self.halting:  # the halt arrived while the command was starting
            self._signal(signal.SIGTERM)
        readers = [
            threading.Thread(target=self._read, args=(self.child.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._read, args=(self.child.stderr, "stderr"), daemon=True),
        ]
        for reader in readers:
            reader.start()
        poller = threading.Thread(target=self._poll_files, daemon=True)
        poller.start()
        if self.transfer is not None:
            self.transfer.start_sync()
        self.set_state("PROCESSING")
        code = self.child.wait()
        self._polling.set()
        poller.join(timeout=10.0)
        self._check_storage()  # what it wrote since the last look counts too
        if code == -signal.SIGXFSZ and self.storage_limit and self.storage_exceeded is None:
            self.storage_exceeded = self.storage_limit  # a file reached the limit on its own
        # The learner is over, and so is whatever it left running (it would hold on to its
        # output, its GPUs and its memory): its process group, and its whole cgroup.
        _signal_group(self.child.pid, signal.SIGKILL)
        if self.confined is not None:
            if code != 0 and self.confined.oom_killed() and self.memory_exceeded is None:
                self.memory_exceeded = -1  # stopped by the kernel, at its limit
            self.confined.teardown()
        for reader in readers:
            reader.join(timeout=5.0)
        if self.transfer is not None:
            self.transfer.finish_sync()
        if self.mlflow is not None:
            self.mlflow.close()
        return code

    def _scrape_in_the_jobs_network(self) -> None:
        """A metrics endpoint the learner serves (Katib's PrometheusMetric) is on its own
        network: the collector's connections are made there."""
        network = self.confined.network if self.confined is not None else None
        if network is None:
            return
        for collector in self.file_collectors:
            if isinstance(collector, PrometheusCollector):
                address = (collector.host, collector.port)
                collector.connect = lambda at=address: netns.inside(  # type: ignore[misc]
                    network, lambda: socket.create_connection(at, timeout=TIMEOUT_S)
                )

    def _mlflow_endpoint(self) -> mlflow_api.Endpoint | None:
        network = self.confined.network if self.confined is not None else None
        connection = self.api.connection
        try:
            if network is not None:  # listening on the job's own loopback, where it runs
                return netns.inside(network, lambda: mlflow_api.Endpoint(connection)).start()
            return mlflow_api.Endpoint(connection).start()
        except OSError:  # no loopback port: the job runs, without MLflow's API
            return None

    def _signal(self, sig: int) -> None:
        """A signal to the learner's processes (in a sandbox, all of them but bwrap's monitor,
        whose death would kill them at once)."""
        if self.child is None:
            return
        if self.confined is not None and sig != signal.SIGKILL:
            self.confined.signal(sig, self.child.pid)
        else:
            _signal_group(self.child.pid, sig)

    def _poll_files(self) -> None:
        """While the learner runs: its memory four times a second, its metric files twice;
        the files once more after it ended."""
        tick = 0
        while not self._polling.wait(0.25):
            tick += 1
            self._check_memory()
            if tick % 2 == 0:
                self._collect(final=False)
            if tick % 4 == 0:
                self._check_storage()
            if self.api.refused and not self.halting:  # nobody may hear of this attempt again
                self.halt(0.0)
        self._collect(final=True)

    def _check_storage(self) -> None:
        """A learner whose folders pass the manifest's `storage` is stopped, with a reason."""
        if not self.storage_limit or self.child is None or self.storage_exceeded is not None:
            return
        writable = [p for name, p in self.dirs.items() if name != "DATA_DIR"]
        used = sum(disk_usage(p) for p in writable)
        if used > self.storage_limit:
            self.storage_exceeded = used
            self._signal(signal.SIGKILL)

    def _check_memory(self) -> None:
        """A learner over its manifest `memory` is stopped here, with a reason, before the
        kernel's OOM killer would stop it (or the machine) without one."""
        if not self.memory_limit or self.child is None or self.memory_exceeded is not None:
            return
        if self.confined is not None and self.confined.limits_memory:
            return  # the kernel enforces it; an OOM kill is read from the cgroup afterwards
        used = group_rss(self.child.pid)
        if used > self.memory_limit:
            used = group_rss(self.child.pid, proportional=True)  # shared pages counted once
        if used > self.memory_limit:
            self.memory_exceeded = used
            _signal_group(self.child.pid, signal.SIGKILL)

    def _collect(self, final: bool) -> None:
        for collector in self.file_collectors:
            try:
                self.shipper.put_points(collector.poll(final))
            except Exception:  # a collector's trouble never fails the learner
                continue

    def _read(self, pipe: IO[bytes] | None, stream: str) -> None:
        assert pipe is not None
        for raw in pipe:
            self.shipper.put(stream, raw.decode("utf-8", "replace").rstrip("\r\n"))
        pipe.close()

    def store(self) -> None:
        """The learner's log into RESULT_DIR, and RESULT_DIR to the stores, never following a
        link the learner left there."""
        results = self.dirs["RESULT_DIR"]
        name = f"learner-{self.spec['learner_id']}/training-log.txt"
        try:
            files.write_file(results, name, _render_log(Path(self.spec["spool_file"])))
            for store in self.spec.get("data_stores", []):
                target = store.get("results_dir")
                if target:
                    files.copy_tree(results, Path(target))
            if self.transfer is not None:
                self.transfer.store(results)
        except OSError as exc:
            raise StepFailed(STORE_RESULTS, f"could not store the results: {exc}") from exc
        except transfer.TransferFailed as exc:
            raise StepFailed(STORE_RESULTS, exc.message) from exc
        for store in self.spec.get("data_stores", []):
            if store["type"] == "s3" and store.get("results_bucket"):
                self._upload(store, results)

    def _fetches_elsewhere(self) -> bool:
        """Whether getting ready takes more than unpacking the code zip: an environment to
        build or reuse, the code through the API, data from a bucket."""
        stores = self.spec.get("data_stores", [])
        buckets = (s["type"] == "s3" and s.get("bucket") for s in stores)
        return bool(self.spec.get("environment")) or self.transfer is not None or any(buckets)

    def _stores_elsewhere(self) -> bool:
        """Whether `store` sends the results anywhere but RESULT_DIR: through the API, to a
        data store's folder or to a bucket."""
        stores = self.spec.get("data_stores", [])
        targets = (s.get("results_dir") or s.get("results_bucket") for s in stores)
        return self.transfer is not None or any(targets)

    def _upload(self, store: dict[str, Any], results: Path) -> None:
        """Results go to `<results bucket>/<job id>/`; an unreachable store is retried for as
        long as the learner keeps resending anything (LOOM_LEARNER_RETRY_S)."""
        from loom.learner import datastores

        try:
            count = datastores.upload(
                store,
                self.secrets.get(store["id"], {}),
                results,
                self.spec["job_id"],
                deadline_s=self.retry_s,
            )
        except datastores.StoreError as exc:
            raise StepFailed(STORE_RESULTS, exc.message) from exc
        self.shipper.status(
            {"state": "STORING", "time": time.time(), "message": f"stored {count} files"}
        )

    # -- halt -------------------------------------------------------------------------------
    def halt(self, grace: float) -> None:
        """SIGTERM to the learner's process group, then SIGKILL after the grace period. The
        wrapper itself then ends soon, even when the platform it reports to is gone or refuses
        it: its retries stop `AFTER_HALT_S` past the grace (the spool keeps what was not sent)."""
        self.halting = True
        self.api.cutoff.cut(grace + AFTER_HALT_S)
        if self._building is not None:
            self._building.set()
        if self.child is None or self.child.poll() is not None:
            return
        self._signal(signal.SIGTERM)

        def _kill_later() -> None:
            time.sleep(grace)
            self._signal(signal.SIGKILL)

        threading.Thread(target=_kill_later, daemon=True).start()

    def vanish(self) -> None:
        """The node's actor is gone, and the platform counts this learner lost: it stops at
        once and says nothing more, as it would have with its node."""
        if self.child is not None:
            _signal_group(self.child.pid, signal.SIGKILL)
        if self.confined is not None:
            self.confined.teardown()
        os._exit(1)

    # -- the whole run ----------------------------------------------------------------------
    def run(self) -> int:
        self.shipper.start()
        try:
            # Said to the platform only when there is more to do than unpack the code (the
            # status file says it either way, for the platform's poll to find if it lasts).
            self.set_state("DOWNLOADING", tell=self._fetches_elsewhere())
            self.prepare()
            if self.halting:
                return self._finish("HALTED", message="halted by request")
            self.download()
            if self.halting:
                return self._finish("HALTED", message="halted by request")
            code = self.process()
            if self.halting:
                return self._finish("HALTED", message="halted by request")
            if self.storage_exceeded is not None:
                return self._finish(
                    "FAILED",
                    exit_code=code,
                    error_code=STORAGE_EXCEEDED,
                    message=(
                        f"learner {self.spec['learner_id']} wrote {_mib(self.storage_exceeded)} "
                        f"(sparse files at their full size), more than its storage limit of "
                        f"{_mib(self.storage_limit)} (manifest `storage`), and was stopped"
                    ),
                )
            if self.memory_exceeded is not None:
                return self._finish(
                    "FAILED",
                    exit_code=code,
                    error_code=MEMORY_EXCEEDED,
                    message=self._memory_message(),
                )
            # Said to the platform only when the results go somewhere (it can take a while):
            # else the outcome follows at once, and a report of its own would only delay it.
            self.set_state("STORING", tell=self._stores_elsewhere(), exit_code=code)
            self.shipper.sync()
            self.store()
        except StepFailed as exc:
            return self._finish("FAILED", error_code=exc.code, message=exc.message)
        if code != 0:
            return self._finish(
                "FAILED", exit_code=code, error_code=LEARNER_FAILED, message=self._crash(code)
            )
        return self._finish("COMPLETED", exit_code=0)

    def _memory_message(self) -> str:
        learner, limit = self.spec["learner_id"], _mib(self.memory_limit)
        if self.memory_exceeded == -1:
            return (
                f"learner {learner} reached its memory limit of {limit} (manifest `memory`) "
                f"and was stopped by the kernel"
            )
        used = _mib(self.memory_exceeded or 0)
        return (
            f"learner {learner} used {used}, more than its memory limit of {limit} (manifest "
            f"`memory`), and was stopped"
        )

    def _crash(self, code: int) -> str:
        how = f"exit code {code}"
        if code < 0:
            how = f"exit code {128 - code}, killed by {signal.Signals(-code).name}"
        tail = "\n".join(list(self.shipper.tail))
        return (
            f"learner {self.spec['learner_id']} terminated with an error ({how}); "
            f"last lines:\n{tail}"
        )

    def _finish(self, state: str, **extra: Any) -> int:
        """The outcome: in the status file at once, then every line sent, then the report, all
        within one deadline (the platform backfills from the spool if it passes)."""
        if "exit_code" in extra and extra["exit_code"] is not None and extra["exit_code"] < 0:
            extra["exit_code"] = 128 - extra["exit_code"]
        self.shipper.sync()
        status = self.set_state(state, **extra)
        deadline = time.monotonic() + self.retry_s
        if self.shipper.close(deadline_s=self.retry_s):
            self.shipper.report(status, deadline_s=max(deadline - time.monotonic(), 1.0))
        return 0 if state == "COMPLETED" else 1


def _before_exec(storage_limit: int, enter: Callable[[], None] | None) -> Callable[[], None] | None:
    """What the learner's child does before exec: no file it writes may pass the job's
    `storage` (the kernel stops it with SIGXFSZ), then it enters its sandbox's cgroup and
    network."""
    if not storage_limit and enter is None:
        return None

    def run() -> None:
        if storage_limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (storage_limit, storage_limit))
        if enter is not None:
            enter()

    return run


def _final(state: str) -> bool:
    return state in ("COMPLETED", "FAILED", "HALTED")


_PAGE = os.sysconf("SC_PAGE_SIZE")


def group_rss(pgid: int, *, proportional: bool = False) -> int:
    """Resident memory, in bytes, of every process in a process group (Linux's /proc).

    Plain RSS counts pages shared after a fork once per process; `proportional` reads each
    process's PSS instead (dearer for the kernel, so only to confirm a limit is passed)."""
    total = 0
    for pid, fields in process_group(pgid):
        if len(fields) <= 21:
            continue
        pss = _pss(pid) if proportional else None
        total += pss if pss is not None else int(fields[21]) * _PAGE
    return total


def _pss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _python_shims(folder: Path, python: str) -> None:
    """`python` and `python3` in the learner's PATH run the interpreter Loom runs under."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # shown to the learner; whatever the platform's umask
    for name in ("python", "python3"):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        shim.chmod(0o755)


def _render_log(spool: Path) -> bytes:
    out = []
    with spool.open(encoding="utf-8") as source:
        for raw in source:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if "text" in entry:
                out.append(entry["text"] + "\n")
    return "".join(out).encode()


def run_spec(spec_file: str, token: str, secrets: dict[str, dict[str, str]] | None = None) -> int:
    """Run the learner a spec file describes; SIGTERM or SIGINT halts it."""
    spec = json.loads(Path(spec_file).read_text())
    learner = Learner(spec, token, secrets or {})
    grace = float(spec.get("halt_grace_s", 10))
    signal.signal(signal.SIGTERM, lambda *_: learner.halt(grace))
    signal.signal(signal.SIGINT, lambda *_: learner.halt(grace))
    signal.signal(HOST_LOST, lambda *_: learner.vanish())
    return learner.run()


def main(argv: list[str]) -> int:
    """Standard input: the token, then (optionally) the data stores' secrets as JSON."""
    token = sys.stdin.readline().strip()
    secrets = json.loads(sys.stdin.readline() or "{}")
    return run_spec(argv[0], token, secrets)
