"""What a builder needs to know about one environment, as it travels in a learner's or a
deployment's spec: the plan's packages and digest, and where packages come from (the admin's
settings). The platform writes it; the machine that runs the code builds from it."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from loom.domain import environments


@functools.cache
def provided() -> dict[str, str]:
    """The platform's own packages (canonical name → version), as learners and replicas see
    them beneath their environment's own."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


@dataclass(frozen=True)
class Sources:
    """Where environments are built and their packages come from."""

    root: Path
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    index_strategy: str = "first-index"
    source_builds: bool = False
    max_bytes: int = 20 * 2**30
    max_age_s: float = 30 * 86400.0
    timeout_s: float = 1800.0

    def section(self, plan: environments.Plan | None) -> dict[str, Any] | None:
        """What a wrapper (or a gateway) needs to build or reuse the plan's environment; no
        secret in here (an index URL with a password in it is the admin's to avoid)."""
        if plan is None:
            return None
        sources = [
            self.index_url or "",
            *self.extra_index_urls,
            *self.find_links,
            "source" if self.source_builds else "wheels",
        ]
        if self.index_strategy != "first-index":  # unchanged digests for the default
            sources.append(self.index_strategy)
        return {
            "digest": plan.digest(sources),
            "root": str(self.root),
            "packages": list(plan.packages),
            "describe": plan.describe(),
            "index_url": self.index_url,
            "extra_index_urls": list(self.extra_index_urls),
            "find_links": list(self.find_links),
            "index_strategy": self.index_strategy,
            "source_builds": self.source_builds,
            "max_bytes": self.max_bytes,
            "max_age_s": self.max_age_s,
            "timeout_s": self.timeout_s,
        }
