"""Shared fixtures: a real Loom server on loopback, with its state in a temporary LOOM_HOME."""

from __future__ import annotations

import fnmatch
import functools
import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loom.client import ClientError, LoomClient
from tests import forked
from tests.tiers import DATABASE_TESTS

ROOT = Path(__file__).resolve().parent.parent

# `make test` runs the API, store, lifecycle and TDS tests a second time with LOOM_TEST_DB=postgres:
# each platform then keeps its state in its own database on one throw-away PostgreSQL server.
ON_POSTGRES = os.environ.get("LOOM_TEST_DB", "sqlite") == "postgres"
sqlite_only = pytest.mark.skipif(ON_POSTGRES, reason="reads SQLite's own files")
# Slow tests of what the database plays no part in run in the SQLite pass only.
database_free = pytest.mark.skipif(ON_POSTGRES, reason="the database plays no part")
_postgres: list[Any] = []
_databases: dict[str, str] = {}


def postgres_server() -> Any:
    """The session's throw-away PostgreSQL server (`tools.pgtemp.TempPostgres`), started once."""
    if not _postgres:
        from tools.pgtemp import TempPostgres

        _postgres.append(TempPostgres().start())
    return _postgres[0]


def database_url(home: Path) -> str:
    """The database of the platform whose home is `home`: SQLite inside it, or on the PostgreSQL
    run a database of its own (the same one each time, so a restarted platform finds its state)."""
    if not ON_POSTGRES:
        return f"sqlite:///{home / 'loom.db'}"
    key = str(home.resolve())
    if key not in _databases:
        _databases[key] = postgres_server().create_database()
    return _databases[key]


# The longest modules (30 s to 4 minutes each, on one worker: their platform or cluster is
# shared), longest first, measured in a clean-clone run (a worker's busy seconds on SQLite): each
# starts as soon as a worker is free, so that the tier does not end waiting on one of them; the
# many short modules fill in behind. (The tiers' runner keeps this order: xdist's loadscope would
# otherwise sort modules by how many tests they hold.)
LONGEST_FIRST = (
    "tests/launchers/test_ray.py",  # 250 s
    "tests/api/test_openapi_fuzz.py",  # 210 s (105 s on PostgreSQL)
    "tests/api/test_tensorflow.py",
    "tests/pipelines/test_runs.py",
    "tests/api/test_distributed.py",
    "tests/examples/test_demo.py",
    "tests/dialects/mlflow/test_differential.py",
    "tests/hpo/test_experiments.py",
    "tests/serving/test_deployments.py",
    "tests/cli/test_cli.py",
    "tests/security/test_attacks.py",
    "tests/api/test_jobs.py",
    "tests/monitoring/test_detector.py",
    "tests/serving/test_code_formats.py",
    "tests/api/test_crash.py",
    "tests/serving/test_keys.py",
    "tests/security/test_network.py",
    "tests/examples/test_digits_hpo.py",
    "tests/monitoring/",
    "tests/serving/test_tensorflow.py",  # 35 s
)


def _rank(item: pytest.Item) -> int:
    found = (i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix))
    return next(found, len(LONGEST_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.nodeid
        if any(
            fnmatch.fnmatch(where, f"{pattern}*") if "*" in pattern else where.startswith(pattern)
            for pattern in DATABASE_TESTS
        ) and not item.get_closest_marker("postgres"):
            item.add_marker(pytest.mark.db)
    items.sort(key=_rank)  # stable: the others keep their order


_current_test: list[pytest.Item] = []
_homes: set[Path] = set()  # of every platform this process started


@pytest.fixture(autouse=True)
def _known_as_the_current_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """`make check` runs the tests not marked integration, and promises no servers: a platform
    started by a test that is not marked so fails it, naming the marker to add."""
    _current_test.append(request.node)
    yield
    _current_test.pop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Whatever a test's teardown left (a learner still reporting to a platform that stopped as
    # its job ended waits up to its retry deadline, 10 minutes): nothing outlives the run.
    for home in _homes:
        stop_learners(home)
        stop_deployments(home)
    for server in _postgres:
        server.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def manifest(command: str, **extra: Any) -> str:
    """A small manifest in FfDL's format around a command."""
    lines = [
        f"name: {extra.pop('name', 'test-job')}",
        "version: '1.0'",
        f"cpus: {extra.pop('cpus', 0.5)}",
        f"memory: {extra.pop('memory', '256MiB')}",
        f"learners: {extra.pop('learners', 1)}",
        "framework:",
        "  name: python",
        f"  command: {command!r}",
    ]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


@functools.cache
def package_sources() -> dict[str, str]:
    """Job environments install from where this machine's pip does (a local mirror, wheels on
    disk), as an admin would configure it; PyPI otherwise."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    settings = {}
    for line in found.splitlines():
        key, _, value = line.partition("=")
        words = ",".join(value.strip().strip("'\"").split())
        if key.endswith(".extra-index-url") and words:
            settings["LOOM_ENVIRONMENTS_EXTRA_INDEX_URLS"] = words
            # pip takes the best version from any of its indexes; uv, the first that has it
            settings["LOOM_ENVIRONMENTS_INDEX_STRATEGY"] = "unsafe-best-match"
        if key.endswith(".find-links") and words:
            settings["LOOM_ENVIRONMENTS_FIND_LINKS"] = words
    return settings


class Server:
    """`python -m loom.api` as a child process; can be killed with -9 and started again."""

    def __init__(
        self, home: Path, module: str = "loom.api", *, fork: bool = True, **env: str
    ) -> None:
        self.home = home
        self.module = module  # another entry, e.g. a platform on an emulated cluster
        # Forked from this process after its imports (tests/forked.py), or exec'd.
        self.fork = fork and forked.ENABLED
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Host folders a test makes beside the home may be data stores.
        shared = {"LOOM_HOST_MOUNT_ROOTS": str(home.parent), **package_sources()}
        if ON_POSTGRES:
            shared["LOOM_DATABASE_URL"] = database_url(home)
        self.env = {**os.environ, "LOOM_HOME": str(home), **shared, **env}
        self.env.pop("LOOM_TOKEN", None)
        self.env.pop("LOOM_URL", None)
        self.process: subprocess.Popen[bytes] | forked.Forked | None = None
        self.log = home.parent / f"{home.name}-server.log"

    def start(self) -> Server:
        if _current_test and not _current_test[-1].get_closest_marker("integration"):
            pytest.fail(f"{_current_test[-1].nodeid} starts a platform: mark it integration")
        self.home.mkdir(parents=True, exist_ok=True)
        _homes.add(self.home)
        first = self.process is None
        with self.log.open("ab") as out:
            args = ["--port", str(self.port)]
            if self.fork:
                self.process = forked.Forked(self.module, args, self.env, out)
            else:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", self.module, *args],
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
        deadline = time.monotonic() + 90  # a loaded machine (tests in parallel) starts slowly
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = self.log.read_text()
                if first and "address already in use" in said.lower():
                    # Another test, in another worker, took the free port first: another one.
                    self.process = None
                    self.port = free_port()
                    self.url = f"http://127.0.0.1:{self.port}"
                    return self.start()
                raise RuntimeError(f"server exited: {said}")
            # A bare connection first: an HTTP client per try costs more than the wait itself.
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                with LoomClient(self.url, None, timeout=10) as probe:
                    probe.health()
                return self
            except (OSError, ClientError):
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    @property
    def database_url(self) -> str:
        return str(self.env.get("LOOM_DATABASE_URL") or database_url(self.home))

    @property
    def admin_token(self) -> str:
        return (self.home / "token").read_text().strip()

    def client(self, token: str | None = None) -> LoomClient:
        return LoomClient(self.url, token or self.admin_token)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A real platform on loopback with real learner processes."""
    srv = Server(tmp_path / "home").start()
    yield srv
    srv.stop()
    stop_deployments(srv.home)
    stop_learners(srv.home)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real platform for a module's tests that need no fresh one of their own: each signs
    in as a user of its own (`tenant`), so they cannot see each other's jobs."""
    srv = Server(tmp_path_factory.mktemp("shared") / "home").start()
    yield srv
    srv.stop()
    stop_deployments(srv.home)
    stop_learners(srv.home)


@pytest.fixture
def tenant(shared_server: Server, request: pytest.FixtureRequest) -> Iterator[LoomClient]:
    """A client of the module's shared platform, signed in as a new user named after the test."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)[:40] + f"-{next(_tenants)}"
    with shared_server.client() as admin:
        token = admin.add_user(name)["token"]
    with shared_server.client(token) as client:
        yield client


_tenants = itertools.count(1)


@dataclass(frozen=True)
class Seat:
    """A user of its own on the module's shared platform: what a test that needs no platform of
    its own uses of a `Server` (its URL, its home, a client), signed in as that user."""

    platform: Server
    name: str
    token: str

    @property
    def url(self) -> str:
        return self.platform.url

    @property
    def home(self) -> Path:
        return self.platform.home

    @property
    def database_url(self) -> str:
        return self.platform.database_url

    @property
    def log(self) -> Path:
        return self.platform.log

    def client(self, token: str | None = None) -> LoomClient:
        return LoomClient(self.url, token or self.token)


@pytest.fixture
def seat(shared_server: Server, request: pytest.FixtureRequest) -> Seat:
    """A new user, named after the test, on the module's shared platform."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)[:40] + f"-{next(_tenants)}"
    with shared_server.client() as admin:
        token = admin.add_user(name)["token"]
    return Seat(shared_server, name, token)


def stop_learners(home: Path) -> None:
    """Learners outlive the platform, and one whose platform is gone holds its outcome until
    the platform is back: a test's teardown tells those it left to stop (SIGTERM: they end
    within their grace period), rather than leave them waiting after the run."""
    for pid_file in home.glob("jobs/*/learners/*/attempt-*/pid.json"):
        try:
            pid = int(json.loads(pid_file.read_text())["pid"])
            if b"loom.learner" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, KeyError, TypeError):
            continue


def stop_deployments(home: Path) -> None:
    """Deployments outlive the platform, as learners do: a test stops what it left running."""
    for pid_file in home.glob("deployments/*/gateway.pid"):
        try:  # the file may be gone: a running platform restarts a gateway that ended
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError):
            continue
        for _ in range(100):
            if not running(pid):
                break
            time.sleep(0.1)


def eventually(check: Callable[[], object], timeout: float = 10) -> float:
    """Seconds until `check()` holds; fails after `timeout`. It looks again after 10 ms, then
    less and less often, to five times a second: a check that asks the platform costs it CPU
    the tests beside it wait for."""
    began = time.monotonic()
    for pause in backoff():
        if check():
            return time.monotonic() - began
        assert time.monotonic() - began < timeout, "never happened"
        time.sleep(pause)
    raise AssertionError("unreachable")


def backoff(first: float = 0.01, most: float = 0.2) -> Iterator[float]:
    """Pauses between looks at something that will change: doubling from `first` to `most`."""
    pause = first
    while True:
        yield pause
        pause = min(most, pause * 2)


def processes_with(pattern: bytes) -> list[int]:
    """Pids of this machine's processes whose command line holds `pattern` (a learner's own
    pids are those of its sandbox's namespace, so tests find them by what they run)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and pattern in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_state(
    client: LoomClient, job_id: str, states: set[str], timeout: float = 60, interval: float = 0.5
) -> dict[str, Any]:
    """The job's record once it is in one of `states`: `LoomClient.wait`, which listens to the
    job's state changes as the platform pushes them (no polling; `interval` only while the
    stream cannot be had); fails once the job has ended elsewhere or `timeout` passed."""
    try:
        job = client.wait({"id": job_id}, states=states, timeout=timeout, poll_s=interval)
    except ClientError as exc:
        if exc.status:
            raise
        job = client.job(job_id)
    expected = f"expected one of {states}"
    assert job["state"] in states, f"job {job_id} is {job['state']}, {expected}: {job}"
    return job


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """moto's S3 server on loopback, with credentials enforced."""
    from tests.s3 import start_s3

    server = start_s3(tmp_path_factory.mktemp("s3") / "moto.log")
    yield server
    server.stop()


COPY = "import os, shutil\nshutil.copytree('model', os.environ['RESULT_DIR'] + '/model')\n"


@pytest.fixture(scope="session")
def model_zip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("digits") / "model"
    from tests.serving.test_rest import digits_models

    digits_models(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.iterdir():
            archive.write(path, f"model/{path.name}")
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()


def register(client: LoomClient, model_zip: bytes, name: str = "digits") -> None:
    """Register the digits model (a job that copies it to RESULT_DIR/model)."""
    job_id = client.submit(manifest("python copy.py", name=name), model_zip)
    finished = wait_for_state(client, job_id, {"COMPLETED", "FAILED", "HALTED"}, interval=0.01)
    assert finished["state"] == "COMPLETED", finished
    # COMPLETED comes only once the version is there: no waiting for it
    version = client.model_version(name, "latest")
    assert f"registered model version {version['version']}" in finished["status_message"]
    assert version["provenance"]["job_id"] == job_id
    assert client.job(job_id)["model"] == {"name": name, "version": version["version"]}


def held_out_digits() -> tuple[Any, Any]:
    """The last 64 of scikit-learn's digits (8×8, scaled to 0–1) and their labels."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.images[-64:] / 16.0).astype(np.float32), digits.target[-64:]


def v2_request(images: Any, name: str = "image") -> dict[str, Any]:
    """A V2 infer request of one FP32 tensor, in the images' own shape."""
    return {
        "inputs": [
            {
                "name": name,
                "shape": list(images.shape),
                "datatype": "FP32",
                "data": images.ravel().tolist(),
            }
        ]
    }
