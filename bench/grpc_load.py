"""A gRPC load generator for the V2 ModelInfer call, as `wrk` is for HTTP: CONNECTIONS calls in
flight at all times for SECONDS, over one channel each, cycling through prepared requests.

The requests are serialized once, before the clock starts, and sent as bytes (no message
object per call), so the generator's own cost per call stays small; run it pinned to its own
core. Prints one JSON line: requests, errors, requests/s, p50 and p99 in ms, and the calls of its
0.3 s warm-up (before the clock; a caller timing the server's CPU counts them too).

    python bench/grpc_load.py HOST:PORT REQUESTS_FILE CONNECTIONS SECONDS [TOKEN]

REQUESTS_FILE holds serialized ModelInferRequests, each preceded by its 4-byte length.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import grpc

METHOD = "/inference.GRPCInferenceService/ModelInfer"


def read_requests(path: Path) -> list[bytes]:
    raw, found, at = path.read_bytes(), [], 0
    while at < len(raw):
        size = int.from_bytes(raw[at : at + 4], "little")
        found.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    return found


async def connection(
    address: str, requests: list[bytes], until: float, token: str, seed: int
) -> tuple[list[float], int]:
    """One channel with one call in flight at a time, until the time is up."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    latencies: list[float] = []
    errors = 0
    options = [("grpc.max_receive_message_length", 64 * 2**20)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        call = channel.unary_unary(METHOD)  # bytes in, bytes out
        index = seed
        while time.perf_counter() < until:
            index = (index + 1) % len(requests)
            started = time.perf_counter()
            try:
                await call(requests[index], metadata=metadata, timeout=10)
                latencies.append(time.perf_counter() - started)
            except grpc.aio.AioRpcError:
                errors += 1
    return latencies, errors


async def run(
    address: str, requests: list[bytes], connections: int, seconds: float, token: str
) -> dict[str, float]:
    # a short warm-up: channels connected, the server's first calls behind us
    warm = await asyncio.gather(
        *(
            connection(address, requests, time.perf_counter() + 0.3, token, i)
            for i in range(connections)
        )
    )
    started = time.perf_counter()
    until = started + seconds
    results = await asyncio.gather(
        *(connection(address, requests, until, token, i * 7) for i in range(connections))
    )
    elapsed = time.perf_counter() - started
    latencies = sorted(x for found, _ in results for x in found)
    errors = sum(e for _, e in results)
    count = len(latencies)

    def percentile(p: float) -> float:
        return latencies[min(count - 1, int(count * p))] * 1000 if count else float("nan")

    return {
        "requests": count,
        "errors": errors,
        "rps": count / elapsed,
        "p50_ms": percentile(0.50),
        "p99_ms": percentile(0.99),
        "warmup_requests": sum(len(found) + e for found, e in warm),
    }


def main() -> None:
    address, file, connections, seconds = sys.argv[1:5]
    token = sys.argv[5] if len(sys.argv) > 5 else ""
    requests = read_requests(Path(file))
    found = asyncio.run(run(address, requests, int(connections), float(seconds), token))
    print(json.dumps(found))


if __name__ == "__main__":
    main()
