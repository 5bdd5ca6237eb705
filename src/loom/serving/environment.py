"""The environment of gateways and replicas: an allow-list, never the server's variables.

The platform's environment holds its settings (`LOOM_*`), cloud credentials (`AWS_*`, …) and
tokens; a replica runs a user's model, so nothing reaches it that it does not need to run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
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
    }
)
ALLOWED_PREFIXES = ("LC_",)


def serving_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowed variables of `source` (default: this process's environment)."""
    found = os.environ if source is None else source
    return {
        key: value
        for key, value in found.items()
        if key in ALLOWED or key.startswith(ALLOWED_PREFIXES)
    }
