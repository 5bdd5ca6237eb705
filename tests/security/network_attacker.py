"""What a malicious job tries on the network from inside its learner; shipped as a job's code by
the network attack tests. Each attempt prints `ATTACK <name>: blocked (...)` or
`ATTACK <name>: SUCCEEDED (...)`, and the script always exits 0.

    python network_attacker.py HEX     HEX: the JSON of {"ports": {name: port},
                                        "addresses": [the host's addresses], "store_port": N}
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta


def report(name: str, ok: bool, detail: str) -> None:
    print(f"ATTACK {name}: {'SUCCEEDED' if ok else 'blocked'} ({detail[:300]})", flush=True)


def own_addresses() -> set[str]:
    """Every address this learner can name: loopback, its host name's, the host's."""
    found = {"127.0.0.1", "::1", "0.0.0.0", "localhost"}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    except OSError:
        pass
    return found


def connect_everywhere(ports: dict[str, int], addresses: set[str]) -> None:
    """Another job's ports (its TCPStore, its MLflow endpoint) and the platform's API, on
    every address: one connection anywhere is a success."""
    for name, port in sorted(ports.items()):
        reached = []
        for address in sorted(addresses):
            try:
                with socket.create_connection((address, port), timeout=1.5):
                    reached.append(address)
            except OSError:
                continue
        report(f"connect-{name}", bool(reached), f"port {port} reached on {reached}")


def tcpstore_probe(port: int, addresses: set[str]) -> None:
    """torch's TCPStore has no authentication: a client that connects reads and writes keys."""
    from torch.distributed import TCPStore

    for address in sorted(addresses - {"0.0.0.0"}):
        try:
            store = TCPStore(
                address, port, 2, False, timeout=timedelta(seconds=2), wait_for_workers=False
            )
            value = store.get("secret")
            store.set("planted", "by-mallory")
        except Exception as exc:
            last = f"{type(exc).__name__}"
            continue
        report("tcpstore", True, f"read {value!r} at {address}:{port}")
        return
    report("tcpstore", False, f"no store reached ({last})")


def listening_sockets(ports: dict[str, int]) -> None:
    """`/proc/net/tcp*` of the learner's view: does it list another job's listening ports?"""
    wanted = {f"{port:04X}" for port in ports.values()}
    seen = []
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/net/{name}") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local = row.split()[1]
            if local.rsplit(":", 1)[1] in wanted:
                seen.append(local)
    report("proc-net", bool(seen), f"other jobs' sockets listed: {seen}")


def main() -> None:
    args = json.loads(bytes.fromhex(sys.argv[1]))
    ports = {k: int(v) for k, v in args["ports"].items()}
    addresses = own_addresses() | set(args["addresses"])
    connect_everywhere(ports, addresses)
    tcpstore_probe(int(args["store_port"]), addresses)
    listening_sockets({k: v for k, v in ports.items() if k != "api"})
    print(
        "interfaces",
        sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else "none shown",
        flush=True,
    )


if __name__ == "__main__":
    main()
