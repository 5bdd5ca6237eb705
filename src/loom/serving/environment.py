"""The environment of gateways and replicas: an allow-list, never the server's variables.

The platform's environment holds its settings (`LOOM_*`), cloud credentials (`AWS_*`, …) and
tokens; a replica runs a user's model, so nothing reaches it that it does not need to run.
"""

from __future__ import annotations

from collections.abc import Mapping

from loom.sandbox.environment import SYSTEM, allowed

SERVING = (
    *SYSTEM,
    "TMPDIR",
    # where the interpreter finds loom when it runs from a source tree
    "PYTHONPATH",
    # the runtimes' thread pools and devices
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
)


def serving_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of `source` (default: this process's environment)."""
    return allowed(SERVING, source)
