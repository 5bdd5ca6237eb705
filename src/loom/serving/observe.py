"""What a model server and a deployment gateway keep about themselves: latency histograms (written
out by `exposition`), and the optional request/response log (JSON lines)."""

from __future__ import annotations

import bisect
import json
import time
from pathlib import Path
from typing import IO, Any

LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


class RequestLog:
    """Each request and its answer, one JSON line each, bodies cut at `max_body` bytes; the file
    is rotated (one previous file kept) past `max_bytes`."""

    def __init__(self, path: Path, max_body: int = 64 * 1024, max_bytes: int = 100 * 2**20) -> None:
        self.path = path
        self.max_body = max_body
        self.max_bytes = max_bytes
        self._out: IO[str] = path.open("a", encoding="utf-8")

    def write(self, **record: Any) -> None:
        for key in ("request", "response"):
            body = record.get(key)
            if isinstance(body, bytes):
                record[key] = body[: self.max_body].decode("utf-8", "replace")
        record.setdefault("time", time.time())
        self._out.write(json.dumps(record, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        self._out.flush()
        if self._out.tell() > self.max_bytes:
            self._out.close()
            self.path.replace(self.path.with_name(self.path.name + ".1"))
            self._out = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        self._out.close()
