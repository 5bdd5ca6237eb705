"""A throw-away PostgreSQL server for the tests and benchmarks: Debian's binaries, `initdb` in a
temporary folder, a free port on loopback, run as the unprivileged `postgres` user when we are root
(PostgreSQL refuses to run as root), stopped and deleted afterwards.

    with TempPostgres() as pg:
        url = pg.create_database("loom_test")   # postgresql+psycopg://…
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

import psycopg


def _bin_dir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        on_path = shutil.which("initdb")
        if on_path is None:
            raise RuntimeError("PostgreSQL's server binaries are not installed (apt: postgresql)")
        return Path(on_path).parent
    return found[-1].parent  # the newest major version


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TempPostgres:
    """`durable=False` (tests) turns off fsync; benchmarks keep PostgreSQL's durable defaults."""

    def __init__(self, *, durable: bool = False) -> None:
        # Its own folder under the system's temporary one: the `postgres` user cannot enter a
        # root-only folder such as pytest's.
        self.folder = Path(tempfile.mkdtemp(prefix="loom-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.durable = durable
        self.bin = _bin_dir()
        self._as_postgres = os.geteuid() == 0

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}")

    def start(self) -> TempPostgres:
        if self._as_postgres:
            record = pwd.getpwnam("postgres")
            os.chown(self.folder, record.pw_uid, record.pw_gid)
            self.folder.chmod(0o700)
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "loom", "-E", "UTF8"]
        self._run(*initdb, "--auth=trust", "--no-sync", "--no-instructions")
        options = [
            f"-p {self.port}",
            f"-k {self.folder}",
            "-c listen_addresses=127.0.0.1",
            "-c max_connections=400",
            "-c shared_buffers=128MB",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        log = str(self.folder / "server.log")
        pg_ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", log, "-w"]
        self._run(*pg_ctl, "-o", " ".join(options), "start")
        return self

    def admin_url(self, database: str = "postgres") -> str:
        return f"postgresql://loom@127.0.0.1:{self.port}/{database}"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of one of this server's databases."""
        return f"postgresql+psycopg://loom@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        name = name or f"loom_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            pg_ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "immediate"]
            self._run(*pg_ctl, "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
