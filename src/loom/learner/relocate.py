"""A learner's spec moved onto another machine's disk (no shared disk with the platform).

The platform writes a spec with its own folders (`LOOM_HOME/jobs/<id>/…`, its environments
folder). A launcher that runs the learner elsewhere (a Ray node, or a scratch folder here) moves
every such path under that machine's scratch root, and asks the wrapper to move the code,
checkpoints and results through the API instead of through those folders.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TRANSFER_API = "api"


def relocate(spec: dict[str, Any], scratch: Path) -> dict[str, Any]:
    """The spec with each path under one of its `roots` moved to `scratch/<root's name>/…`."""
    roots: dict[str, str] = spec.get("roots") or {}

    def moved(value: Any) -> Any:
        if isinstance(value, str):
            for name, root in roots.items():
                if value == root or value.startswith(root.rstrip("/") + "/"):
                    return str(scratch / name) + value[len(root.rstrip("/")) :]
            return value
        if isinstance(value, list):
            return [moved(item) for item in value]
        if isinstance(value, dict):
            return {key: moved(item) for key, item in value.items()}
        return value

    out: dict[str, Any] = {k: moved(v) for k, v in spec.items() if k != "roots"}
    out["transfer"] = TRANSFER_API
    out["home"] = None  # no `server.json` there: the wrapper uses the URLs in its spec
    out["python"] = sys.executable  # this machine's interpreter, with Loom installed
    return out
