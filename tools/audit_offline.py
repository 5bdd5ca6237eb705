"""`pip-audit` where neither PyPI's JSON API nor osv.dev can be reached (as on our build machines).

It answers OSV's `POST /v1/query` on loopback from a checkout of PyPA's advisory database (OSV
records as YAML, one folder per package) and runs pip-audit against it, so the audit uses real
advisories, only as fresh as that checkout (`git log -1` in it says how fresh):

    python tools/audit_offline.py ADVISORY_DB_DIR [pip-audit options]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections import defaultdict
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


def load(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Every PyPI advisory under `root`, by canonical package name."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(root.rglob("*.yaml")):
        record = yaml.safe_load(path.read_text())
        if not isinstance(record, dict) or record.get("withdrawn"):
            continue
        for affected in record.get("affected", []):
            package = affected.get("package", {})
            if package.get("ecosystem") == "PyPI":
                found[canonicalize_name(package["name"])].append(record)
    return found


def _in_ranges(version: Version, ranges: list[dict[str, Any]]) -> bool:
    for spec in ranges:
        if spec.get("type") != "ECOSYSTEM":
            continue
        inside = False
        for event in spec.get("events", []):
            kind, bound = next(iter(event.items()))
            try:
                edge = Version(str(bound)) if bound != "0" else Version("0")
            except InvalidVersion:
                continue
            past_end = version >= edge if kind == "fixed" else version > edge
            if kind == "introduced":
                inside = inside or version >= edge
            elif kind in ("fixed", "last_affected") and past_end:
                inside = False
        if inside:
            return True
    return False


def affects(record: dict[str, Any], name: str, version: str) -> bool:
    for affected in record.get("affected", []):
        if canonicalize_name(affected.get("package", {}).get("name", "")) != name:
            continue
        if version in [str(v) for v in affected.get("versions", [])]:
            return True
        try:
            if _in_ranges(Version(version), affected.get("ranges", [])):
                return True
        except InvalidVersion:
            continue
    return False


def _rfc3339(value: object) -> str:
    """YAML reads unquoted times as datetimes; OSV's clients want RFC 3339 in UTC."""
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
        return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return f"{value.isoformat()}T00:00:00Z"
    return str(value)


def server(advisories: dict[str, list[dict[str, Any]]]) -> ThreadingHTTPServer:
    class Query(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            name = canonicalize_name(query["package"]["name"])
            version = str(query["version"])
            vulns = [r for r in advisories.get(name, []) if affects(r, name, version)]
            body = json.dumps({"vulns": vulns} if vulns else {}, default=_rfc3339).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            return

    return ThreadingHTTPServer(("127.0.0.1", 0), Query)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a checkout of github.com/pypa/advisory-database")
    parser.add_argument("pip_audit_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    advisories = load(args.root / "vulns" if (args.root / "vulns").is_dir() else args.root)
    print(f"{sum(map(len, advisories.values()))} advisories for {len(advisories)} packages")
    osv = server(advisories)
    threading.Thread(target=osv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{osv.server_address[1]}/v1/query"
    command = [sys.executable, "-m", "pip_audit", "--vulnerability-service", "osv"]
    done = subprocess.run([*command, "--osv-url", url, *args.pip_audit_args], check=False)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
