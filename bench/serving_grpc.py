"""The V2 protocol over gRPC, for bench/serving.py: the requests (serialized once, images sent as
`raw_input_contents` as Triton's client sends them), a first checked call to a server's gRPC
endpoint, and a load from bench/grpc_load.py (a pinned grpc.aio load generator, as `wrk` is for
REST). bench/serving.py starts each server once and measures it over REST and then over gRPC.

Run alone, it is bench/serving.py with `--protocols grpc` (its options, its gRPC table and
summary only: Loom's model server, a Loom deployment and MLServer with parallel_workers=0):

    python bench/serving_grpc.py [--duration 5] [--concurrency 1,16,64] [--skip-mlserver]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpc_load import METHOD, read_requests

from loom.serving.v2_proto import messages

if TYPE_CHECKING:
    from serving import Pinning

HERE = Path(__file__).resolve().parent
COUNT = 64  # different requests in a file, sent in turn


def requests_file(
    folder: Path, model: str, name: str, images: np.ndarray[Any, Any], size: int
) -> Path:
    """COUNT different ModelInferRequests for `model` of `size` consecutive test images each
    (wrapping around; the first holds images[:size]), serialized, each length-prefixed."""
    kinds = messages()
    out = bytearray()
    for i in range(COUNT):
        pick = np.take(images, range(i * size, (i + 1) * size), axis=0, mode="wrap")
        request = kinds["ModelInferRequest"](model_name=model)
        request.inputs.add(name=name, datatype="FP32", shape=list(pick.shape))
        request.raw_input_contents.append(np.ascontiguousarray(pick, dtype="<f4").tobytes())
        data = request.SerializeToString()
        out += len(data).to_bytes(4, "little") + data
    path = folder / f"requests-{size}.bin"
    path.write_bytes(bytes(out))
    return path


def first_request(file: Path) -> bytes:
    """The first request of a requests file (its images are the test set's first)."""
    return read_requests(file)[0]


def output(response: Any) -> np.ndarray[Any, Any]:
    """A ModelInferResponse's first output, raw or typed."""
    tensor = response.outputs[0]
    if response.raw_output_contents:
        data = np.frombuffer(response.raw_output_contents[0], dtype="<f4")
    else:
        data = np.asarray(tensor.contents.fp32_contents, dtype=np.float32)
    return data.reshape(list(tensor.shape))


def metadata(token: str) -> tuple[tuple[str, str], ...] | None:
    return (("authorization", f"Bearer {token}"),) if token else None


def first_infer(
    address: str, request: bytes, token: str, check: Callable[[], None], timeout: float = 60
) -> np.ndarray[Any, Any]:
    """The first output of a server's answer to `request` over gRPC; failures mean "not yet"
    (a gRPC port may open after the REST one) until the timeout."""
    parse = messages()["ModelInferResponse"].FromString
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        call: Any = channel.unary_unary(METHOD, response_deserializer=parse)  # bytes in
        while True:
            check()
            try:
                return output(call(request, metadata=metadata(token), timeout=5))
            except grpc.RpcError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"gRPC {address} did not answer in {timeout:.0f}s; {last}")
            time.sleep(0.05)


def load(
    pin: Pinning, address: str, file: Path, connections: int, seconds: float, token: str
) -> dict[str, float]:
    """One bench/grpc_load.py run on the load's CPU: requests, errors, rps, p50_ms, p99_ms and
    warmup_requests (the calls of its own short warm-up, before the clock)."""
    command = [*pin.prefix(pin.load), sys.executable, str(HERE / "grpc_load.py"), address,
               str(file), str(connections), str(seconds), token]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    import serving

    serving.main(["--protocols", "grpc", *sys.argv[1:]])


if __name__ == "__main__":
    main()
