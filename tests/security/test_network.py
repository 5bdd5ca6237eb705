"""Network attacks by an ordinary user's job: each fails, and the job still completes. A job
runs on a network of its own, so another job's ports (its TCPStore, its MLflow endpoint) and the
platform's are nowhere it can reach, and a port it binds is taken only in its own namespace.
Needs the sandbox (root, bubblewrap, network namespaces)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from loom.client import LoomClient
from tests.conftest import Server, eventually, make_zip, manifest, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
ATTACKER = (Path(__file__).parent / "network_attacker.py").read_text()
VICTIM = """
import json, os, time
from datetime import timedelta
from torch.distributed import TCPStore
port = int(os.environ["MASTER_PORT"])
store = TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=60))
store.set("secret", "alice-only")
mlflow = os.environ["MLFLOW_TRACKING_URI"].rsplit(":", 1)[1]
print("READY " + json.dumps({"store": port, "mlflow": int(mlflow)}), flush=True)
time.sleep(150)
"""
# Binds the API's port wherever it can and waits for a client to send it a token.
SQUATTER = """
import socket, sys, time
port = int(sys.argv[1])
listeners = []
for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    try:
        sock = socket.socket(family)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
        sock.settimeout(0.2)
        listeners.append(sock)
    except OSError as exc:
        print("could not bind", host, exc, flush=True)
print("BOUND", len(listeners), flush=True)
end = time.time() + 150
while time.time() < end:
    for sock in listeners:
        try:
            conn, peer = sock.accept()
        except OSError:
            continue
        print("CONNECTION from", peer, flush=True)
        conn.settimeout(2)
        try:
            data = conn.recv(65536).decode("latin-1")
        except OSError:
            data = ""
        for line in data.splitlines():
            if line.lower().startswith("authorization"):
                print("CAPTURED", line, flush=True)
        conn.close()
"""


def sandboxed(server: Server) -> bool:
    with server.client() as client:
        found = client.capacity()["isolation"]
    return bool(found["confined"] and found.get("network"))


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("network") / "home").start()
    if not sandboxed(srv):
        srv.stop()
        pytest.skip("this machine cannot give jobs networks of their own (root, bubblewrap)")
    yield srv
    srv.stop()


def user(server: Server, name: str) -> LoomClient:
    with server.client() as admin:
        token = admin.add_user(name)["token"]
    return server.client(token)


def lines(client: LoomClient, job_id: str) -> list[str]:
    return [str(entry["line"]) for entry in client.logs(job_id, pagesize=10_000)]


def attacks_of(client: LoomClient, job_id: str) -> dict[str, str]:
    found = {}
    for line in lines(client, job_id):
        match = re.match(r"ATTACK (\S+): (\S+) \((.*)\)", line)
        if match:
            found[match[1]] = f"{match[2]} {match[3]}"
    return found


def host_addresses() -> list[str]:
    """Every address of this machine's interfaces (not link-local ones, which need a scope)."""
    found = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            text = address.address.split("%")[0]
            if address.family.name in ("AF_INET", "AF_INET6") and not text.startswith("fe80"):
                found.append(text)
    return sorted(set(found))


def test_a_job_reaches_no_other_jobs_port_on_any_address(platform: Server) -> None:
    """Mallory's job tries Alice's TCPStore and MLflow endpoint and the platform's API on every
    address it or the host has, probes the store with torch's own client and reads
    /proc/net/tcp: nothing is reached or listed; Alice's learners still meet on her store."""
    alice, mallory = user(platform, "alice"), user(platform, "mallory")
    with alice, mallory:
        victim = alice.submit(
            manifest("python victim.py", name="victim"), make_zip({"victim.py": VICTIM})
        )
        eventually(lambda: any(x.startswith("READY") for x in lines(alice, victim)), 90)
        ready = next(x for x in lines(alice, victim) if x.startswith("READY"))
        ports = json.loads(ready.split(" ", 1)[1])
        args = {
            "ports": {"store": ports["store"], "mlflow": ports["mlflow"], "api": platform.port},
            "addresses": host_addresses(),
            "store_port": ports["store"],
        }
        command = f"python network_attacker.py {json.dumps(args).encode().hex()}"
        attacker = mallory.submit(
            manifest(command, name="attacker"), make_zip({"network_attacker.py": ATTACKER})
        )
        job = wait_for_state(mallory, attacker, FINAL, timeout=120)
        results = attacks_of(mallory, attacker)
        assert job["state"] == "COMPLETED", (job, lines(mallory, attacker))
        assert set(results) == {
            "connect-store",
            "connect-mlflow",
            "connect-api",
            "tcpstore",
            "proc-net",
        }, results
        succeeded = {k: v for k, v in results.items() if not v.startswith("blocked")}
        assert not succeeded, succeeded
        alice.delete(victim)


def test_a_job_squatting_the_api_port_across_a_restart_gets_no_token(tmp_path: Path) -> None:
    """A job binds the API's port (in its own network) and waits through a platform restart:
    the platform comes back on its port, and the admin's CLI, by the platform's unix socket or
    by its URL with its identity checked, sends the squatter nothing."""
    platform = Server(tmp_path / "home").start()
    try:
        if not sandboxed(platform):
            pytest.skip("this machine cannot give jobs networks of their own")
        mallory = user(platform, "mallory")
        command = f"python squat.py {platform.port}"
        squatter = mallory.submit(manifest(command, cpus=0.1), make_zip({"squat.py": SQUATTER}))
        eventually(lambda: any(x.startswith("BOUND") for x in lines(mallory, squatter)), 90)
        port = platform.port
        platform.stop()
        platform.start()  # on the same port: nothing outside the job holds it
        assert json.loads((platform.home / "server.json").read_text())["url"].endswith(f":{port}")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
        env["LOOM_HOME"] = str(platform.home)
        for extra in ({}, {"LOOM_URL": platform.url}):  # the unix socket; the URL, key checked
            listed = subprocess.run(
                [sys.executable, "-m", "loom", "list"],
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert listed.returncode == 0, listed.stderr
        mallory.halt(squatter)
        wait_for_state(mallory, squatter, FINAL, timeout=60)
        said = lines(mallory, squatter)
        assert not [x for x in said if x.startswith(("CAPTURED", "CONNECTION"))], said
        mallory.close()
    finally:
        platform.stop()
