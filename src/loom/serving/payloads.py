"""A deployment's payload log: a sample of its requests and responses (bodies only: never a
header, so never the caller's token), in JSON-line segments under `payloads/` in the
deployment's folder, each record naming the model version that answered.

The gateway writes (`PayloadLog`); the platform reads (`read_payloads`). Segments roll every
few minutes or megabytes; a segment older than the retention goes, and so do the oldest while
the deployment's segments hold more than their budget: a busy deployment cannot fill the disk.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

FOLDER = "payloads"
OUTLIERS = "outliers.jsonl"  # requests the detector flagged, in the same folder
MAX_BODY = 64 * 1024
SEGMENT_S = 300.0
SEGMENT_BYTES = 4 * 2**20


class PayloadLog:
    def __init__(
        self, folder: Path, rate: float, retention_s: float, max_bytes: int, seed: int | None = None
    ) -> None:
        self.root = folder / FOLDER
        self.root.mkdir(mode=0o700, exist_ok=True)
        self.rate = rate
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        self.logged = 0
        self._random = random.Random(seed)
        self._out: IO[bytes] | None = None
        self._opened_at = 0.0
        self._outliers: IO[bytes] = (self.root / OUTLIERS).open("ab")

    def sampled(self) -> bool:
        """Whether this request is one of the share to log."""
        return self.rate > 0 and self._random.random() < self.rate

    def write(self, record: dict[str, Any]) -> None:
        """One request and its answer; bodies cut at `MAX_BODY` bytes."""
        out = self._segment()
        out.write(_line(record))
        self.logged += 1

    def outlier(self, record: dict[str, Any]) -> None:
        self._outliers.write(_line(record))

    def flush(self, now: float | None = None) -> None:
        """Write out, roll the segment when it is old or large, drop what is past its time or
        over the budget (called on the gateway's tick, not per request)."""
        now = time.time() if now is None else now
        self._outliers.flush()
        if self._out is not None:
            self._out.flush()
            if now - self._opened_at > SEGMENT_S or self._out.tell() > SEGMENT_BYTES:
                self._out.close()
                self._out = None
        self._prune(now)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
        self._outliers.close()

    def _segment(self) -> IO[bytes]:
        if self._out is None:
            self._opened_at = time.time()
            path = self.root / f"{self._opened_at:017.6f}.jsonl"
            self._out = path.open("ab")
        return self._out

    def _prune(self, now: float) -> None:
        segments = _segments(self.root)
        current = Path(self._out.name).name if self._out is not None else None
        total = sum(_size(p) for p in segments) + _size(self.root / OUTLIERS)
        for path in segments:  # oldest first; the one being written stays
            if path.name == current:
                continue
            too_old = now - _started(path) > self.retention_s + SEGMENT_S
            if too_old or total > self.max_bytes:
                total -= _size(path)
                path.unlink(missing_ok=True)
        if total > self.max_bytes and _size(self.root / OUTLIERS) > self.max_bytes // 4:
            self._outliers.close()  # the flagged requests' budget: a quarter, kept newest
            _keep_tail(self.root / OUTLIERS, self.max_bytes // 8)
            self._outliers = (self.root / OUTLIERS).open("ab")


def read_payloads(
    folder: Path,
    version: int | None = None,
    since: float | None = None,
    limit: int = 100,
    outliers: bool = False,
) -> list[dict[str, Any]]:
    """The newest `limit` records (of `version`, after `since`), newest first; the flagged
    outliers instead when `outliers`."""
    root = folder / FOLDER
    files = [root / OUTLIERS] if outliers else list(reversed(_segments(root)))
    found: list[dict[str, Any]] = []
    for path in files:
        if since is not None and not outliers and _ended_before(path, since):
            break
        for record in reversed(list(_records(path))):
            if version is not None and record.get("version") != str(version):
                continue
            if since is not None and float(record.get("time", 0)) <= since:
                continue
            found.append(record)
            if len(found) >= limit:
                return found
    return found


def _line(record: dict[str, Any]) -> bytes:
    for key in ("request", "response"):
        body = record.get(key)
        if isinstance(body, bytes | bytearray):
            record[key] = bytes(body[:MAX_BODY]).decode("utf-8", "replace")
    record.setdefault("time", time.time())
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _segments(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.name[0].isdigit() and p.suffix == ".jsonl")
    except OSError:
        return []


def _records(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open("rb") as handle:
            for line in handle:
                try:
                    found = json.loads(line)
                except ValueError:  # a line being written
                    continue
                if isinstance(found, dict):
                    yield found
    except OSError:
        return


def _started(path: Path) -> float:
    try:
        return float(path.stem)
    except ValueError:
        return 0.0


def _ended_before(path: Path, since: float) -> bool:
    try:
        return os.stat(path).st_mtime < since
    except OSError:
        return True


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _keep_tail(path: Path, keep: int) -> None:
    """The file's last `keep` bytes, from a line's start."""
    with path.open("rb") as handle:
        handle.seek(max(0, _size(path) - keep))
        tail = handle.read()
    start = tail.find(b"\n") + 1 if _size(path) > keep else 0
    partial = path.with_suffix(".partial")
    partial.write_bytes(tail[start:])
    os.replace(partial, path)
