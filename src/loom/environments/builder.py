"""Job environments on one machine: built with `uv` once per digest, under a lock, then shared
read-only by every job that asks for the same thing.

An environment is a virtual environment of the platform's own Python whose site folder comes
first and the platform's packages after it (a `.pth` line): a job gets the packages it asked for,
at the versions it asked for, and still imports Loom's tracking SDK and whatever else the
platform holds. `loom-env.json` is written last: a folder without it is an unfinished build.

Locks (`flock` on `<digest>.lock`, never removed): a builder holds it exclusively; a learner
holds it shared for as long as it runs, so the collector never removes an environment in use.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import site
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import IO, Any

from loom.environments import cache, sharing

MARKER = "loom-env.json"
BUILD_LOG = "build.log"
LAST_USED = cache.LAST_USED
MAX_MESSAGE = 3000
# What the installer keeps of the wrapper's environment: how to reach an index, nothing else.
INSTALLER_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "UV_CACHE_DIR",
)

Say = Callable[[str], None]


class BuildFailed(Exception):
    """The installer refused the job's packages; `message` is what it said."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Request:
    """One job's environment, as its learner spec describes it."""

    digest: str
    root: Path
    packages: list[str]
    describe: str = ""
    no_deps: list[str] = field(default_factory=list)  # installed after, without dependencies
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    index_strategy: str = "first-index"
    source_builds: bool = False
    max_bytes: int = 20 * 2**30
    max_age_s: float = 30 * 86400.0
    timeout_s: float = 1800.0
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Request:
        return cls(
            digest=str(spec["digest"]),
            root=Path(spec["root"]),
            packages=[str(p) for p in spec["packages"]],
            describe=str(spec.get("describe", "")),
            no_deps=[str(p) for p in spec.get("no_deps", [])],
            index_url=spec.get("index_url"),
            extra_index_urls=list(spec.get("extra_index_urls", [])),
            find_links=list(spec.get("find_links", [])),
            index_strategy=str(spec.get("index_strategy", "first-index")),
            source_builds=bool(spec.get("source_builds", False)),
            max_bytes=int(spec.get("max_bytes", 20 * 2**30)),
            max_age_s=float(spec.get("max_age_s", 30 * 86400.0)),
            timeout_s=float(spec.get("timeout_s", 1800.0)),
        )

    @property
    def folder(self) -> Path:
        return self.root / self.digest


@dataclass
class Ready:
    """An environment a learner may run in, and the lock that keeps it while it does."""

    folder: Path
    python: Path
    built: bool  # by this learner, just now
    seconds: float
    lock: IO[bytes] | None = None

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def ensure(request: Request, log: Say, progress: Say) -> Ready:
    """The environment, ready: reused when it is built, else built here (or awaited, when
    another learner is building it). `log` gets the build's lines, `progress` short news."""
    began = time.monotonic()
    request.root.mkdir(parents=True, exist_ok=True)
    request.root.chmod(0o755)
    wait = _Waiting(request, log, progress)
    built = False
    while True:
        lock = _open_lock(request)
        wait.acquire(lock, fcntl.LOCK_SH)
        marker = _marker(request)
        if marker is not None and _usable(marker):
            _touch(request.folder)
            if not built:
                log(
                    f"environment {request.digest} reused: {request.describe} (built "
                    f"{_when(marker.get('built_at'))} in {marker.get('build_s', 0):.1f} s)"
                )
            return Ready(request.folder, _python(request.folder), built, _since(began), lock)
        lock.close()  # not built (or over another Loom's packages): build it, or await its builder
        built = _build_locked(request, wait, log, progress)


class _Waiting:
    """Takes a lock, saying once (in the log and the job's status) when it must wait for it."""

    def __init__(self, request: Request, log: Say, progress: Say) -> None:
        self.request, self.log, self.progress = request, log, progress
        self.said = False

    def acquire(self, lock: IO[bytes], mode: int, built: Callable[[], bool] | None = None) -> bool:
        """The lock; or False, without it, once `built()` says there is nothing left to build
        (a builder finished, and learners now hold the lock shared for as long as they run)."""
        try:
            fcntl.flock(lock, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if not self.said:
            self.said = True
            what = f"({self.request.describe})"
            self.progress(f"preparing environment {what}: another learner is building it")
            self.log(f"environment {self.request.digest}: waiting for another learner building it")
        while not self.request.cancel.wait(0.2):
            try:
                fcntl.flock(lock, mode | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if built is not None and built():
                    return False
        lock.close()
        raise BuildFailed("stopped while waiting for the environment")


def _build_locked(request: Request, wait: _Waiting, log: Say, progress: Say) -> bool:
    """Build it unless another learner did while this one waited; whether this one did."""

    def ready() -> bool:
        return _usable(_marker(request))

    with _open_lock(request) as lock:
        if not wait.acquire(lock, fcntl.LOCK_EX, built=ready) or ready():
            return False
        build(request, log, progress)
        return True


def build(request: Request, log: Say, progress: Say) -> None:
    """Build the environment in its folder (the caller holds its lock exclusively)."""
    folder = request.folder
    shutil.rmtree(folder, ignore_errors=True)  # what an interrupted build left
    began = time.monotonic()
    progress(f"preparing environment ({request.describe}): creating it")
    log(f"environment {request.digest}: building {request.describe}")
    transcript: list[str] = []

    def keep(line: str) -> None:
        transcript.append(line)
        log(line)
        progress(f"preparing environment ({request.describe}): {line.strip()[:120]}")

    try:
        _run(_venv_command(folder), request, keep)
        _layer(folder)
        if request.packages:
            _run(_install_command(request, request.packages), request, keep)
        if request.no_deps:
            _run(_install_command(request, request.no_deps, "--no-deps"), request, keep)
        shared = sharing.drop_copies(_site_packages(folder), _base_paths())
        if shared:
            names = ", ".join(Path(path).name.removesuffix(".dist-info") for path in shared)
            keep(f"{len(shared)} packages used from the platform (the same versions): {names}")
        _compile(folder, request, keep)
        _readable(folder)
    except BuildFailed:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    seconds = time.monotonic() - began
    _write_atomic(folder / BUILD_LOG, "\n".join(transcript) + "\n")
    marker = {
        "digest": request.digest,
        "packages": request.packages,
        "no_deps": request.no_deps,
        "describe": request.describe,
        "base": _base_paths(),
        "shared": shared,
        "built_at": time.time(),
        "build_s": round(seconds, 3),
        "bytes": cache.folder_bytes(folder),
    }
    _touch(folder)
    _write_atomic(folder / MARKER, json.dumps(marker, indent=1))
    log(f"environment {request.digest} built in {seconds:.1f} s")


def collect(request: Request, log: Say) -> None:
    """Remove environments no job used for long, then the least recently used ones while the
    machine holds more than allowed; never one in use or being built."""
    for removed in cache.prune(request.root, request.max_bytes, request.max_age_s, MARKER):
        log(f"environment {removed} removed (unused, or over the machine's allowance)")


# -- mechanism ---------------------------------------------------------------------------------
def uv_binary() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _venv_command(folder: Path) -> list[str]:
    return [uv_binary(), "venv", "--no-config", "--python", sys.executable, str(folder)]


def _install_command(request: Request, packages: list[str], *options: str) -> list[str]:
    command = [uv_binary(), "pip", "install", "--no-config", "--python"]
    command += [str(_python(request.folder)), "--color", "never", "--no-progress", *options]
    if not request.source_builds:
        command.append("--no-build")
    if request.index_url:
        command += ["--index-url", request.index_url]
    for url in request.extra_index_urls:
        command += ["--extra-index-url", url]
    for place in request.find_links:
        command += ["--find-links", place]
    if request.index_strategy != "first-index":
        command += ["--index-strategy", request.index_strategy]
    return [*command, "--", *packages]


# Packages' own test suites (pandas', SciPy's, scikit-learn's: a third or more of their files)
# are not compiled: jobs do not import them, and compiling them took half of a build's CPU.
# (Matched below site-packages only: the platform's home may lie in a folder named tests.)
NOT_COMPILED = r"/site-packages/(?:[^/]+/)*tests?/"


def _compile_command(folder: Path) -> list[str]:
    """Bytecode, compiled once here: the environment is read-only to jobs, which would compile
    every module they import, every time. By the platform's own Python with no `site` (`-S`):
    never the environment's, whose packages' `.pth` files would run their code as this user."""
    target = _site_packages(folder)
    command = [sys.executable, "-I", "-S", "-m", "compileall", "-q", "-j", "0"]
    return [*command, "-x", NOT_COMPILED, str(target)]


def _compile(folder: Path, request: Request, say: Say) -> None:
    """Bytecode for what will be imported. A file that does not compile on this Python (torch
    ships test files for newer ones) is left to fail where it is imported, if ever: the
    environment is still good, as pip's own install would leave it."""
    try:
        _run(_compile_command(folder), request, say)
    except BuildFailed as exc:
        if request.cancel.is_set() or "Error compiling" not in exc.message:
            raise
        say("some files do not compile on this Python (left as source)")


def _readable(folder: Path) -> None:
    """Every file readable (and every folder searchable) by the jobs' uids: uv links files from
    its cache, which keep the mode they were cached with, whatever the umask of this build."""
    for parent, dirs, files in os.walk(folder):
        for name in dirs:
            _add_mode(os.path.join(parent, name), 0o555)
        for name in files:
            _add_mode(os.path.join(parent, name), 0o444)


def _add_mode(path: str, wanted: int) -> None:
    stat = os.lstat(path)
    if not S_ISREG(stat.st_mode) and not S_ISDIR(stat.st_mode):
        return  # links are followed to what they name, which is walked itself
    mode = stat.st_mode & 0o7777
    if S_ISREG(stat.st_mode) and not mode & 0o100:
        wanted &= 0o444  # only what its owner may run becomes runnable
    if mode | wanted != mode:
        os.chmod(path, mode | wanted)


def _with_parent(command: list[str]) -> list[str]:
    """The installer killed if the learner's wrapper dies (util-linux's `setpriv`, where there
    is one), so that no orphan goes on writing into a folder the next builder rebuilds. Not a
    `preexec_fn`: forking a process with threads, only exec is safe in the child."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *command] if setpriv else command


def _run(command: list[str], request: Request, say: Say) -> None:
    env = {k: v for k, v in os.environ.items() if k in INSTALLER_ENV}
    # The machine's own trust store (a company proxy's CA included), not uv's bundled roots.
    env.update(UV_PYTHON_DOWNLOADS="never", NO_COLOR="1", UV_SYSTEM_CERTS="1")
    process = subprocess.Popen(
        _with_parent(command),
        cwd=request.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        umask=0o022,  # read by every job's uid, whatever the platform's umask
    )
    timer = threading.Timer(request.timeout_s, process.kill)
    timer.daemon = True
    timer.start()
    stopper = threading.Thread(target=_kill_when, args=(request.cancel, process), daemon=True)
    stopper.start()
    lines: list[str] = []
    assert process.stdout is not None
    for raw in process.stdout:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            lines.append(line)
            say(line)
    code = process.wait()
    timer.cancel()
    if request.cancel.is_set():
        raise BuildFailed("stopped while the environment was being built")
    if code != 0:
        said = "\n".join(lines)[-MAX_MESSAGE:] or f"exit code {code}"
        if code < 0:
            said += f"\n(stopped after {request.timeout_s:.0f} s)"
        raise BuildFailed(said)


def _kill_when(cancel: threading.Event, process: subprocess.Popen[bytes]) -> None:
    while process.poll() is None:
        if cancel.wait(0.2):
            process.kill()
            return


def _layer(folder: Path) -> None:
    """The platform's packages after the environment's own: a `.pth` line that adds each of
    the platform's site folders (their own `.pth` files included) and Loom's source folder."""
    target = _site_packages(folder)
    lines = [f"import site; site.addsitedir({path!r})" for path in _base_paths()]
    _write_atomic(target / "zz_loom_platform.pth", "\n".join(lines) + "\n")


def _base_paths() -> list[str]:
    """Where the platform's own packages are on this machine (this interpreter's)."""
    import loom

    paths = [p for p in site.getsitepackages() if Path(p).is_dir()]
    source = str(Path(loom.__file__).resolve().parent.parent)
    if source not in paths:
        paths.append(source)
    return paths


def _site_packages(folder: Path) -> Path:
    return next((folder / "lib").glob("python3*/site-packages"))


def _usable(marker: dict[str, Any] | None) -> bool:
    """Built, over this platform's packages, and those it relies on still there."""
    return (
        marker is not None
        and marker.get("base") == _base_paths()
        and sharing.still_shared(marker.get("shared"))
    )


def _python(folder: Path) -> Path:
    return folder / "bin" / "python"


def _open_lock(request: Request) -> IO[bytes]:
    path = request.root / f"{request.digest}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    return os.fdopen(fd, "r+b")


def _marker(request: Request) -> dict[str, Any] | None:
    try:
        data = json.loads((request.folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _touch(folder: Path) -> None:
    (folder / LAST_USED).touch()


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.chmod(0o644)
    partial.replace(path)


def _when(stamp: Any) -> str:
    if not isinstance(stamp, int | float):
        return "earlier"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _since(began: float) -> float:
    return time.monotonic() - began
