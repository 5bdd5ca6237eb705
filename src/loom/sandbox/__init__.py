"""Confinement for untrusted code: learners and serving replicas.

`bwrap` builds the command that runs code in its own mount view, pid namespace and uid;
`cgroups` holds its processes under kernel limits and tears them down as a whole; `files` reads
what it left behind without following its links; `probe` says whether this machine can do it.
"""

from __future__ import annotations

import hashlib

UID_SPAN = 1 << 24


def uid_for(name: str, base: int) -> int:
    """A stable unprivileged uid for one job or deployment, in `[base, base + 2**24)`."""
    digest = hashlib.sha256(name.encode()).digest()
    return base + int.from_bytes(digest[:4], "big") % UID_SPAN
