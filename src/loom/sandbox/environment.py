"""Environments built from an allow-list: what untrusted code (a learner, a serving replica)
and the processes that start it keep of the platform's environment. Never the platform's own
settings (`LOOM_*`), cloud credentials or tokens: only what a program needs to run, plus the
names an admin passes on explicitly."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# The locale and terminal: how text is read and written, nothing else.
LOCALE = ("LANG", "LANGUAGE", "TZ", "TERM")
LOCALE_PREFIXES = ("LC_",)
# What starts a program on this machine.
SYSTEM = ("PATH", "HOME")


def allowed(names: Iterable[str] = (), source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The locale, and the variables named, from `source` (default: this process's)."""
    found = os.environ if source is None else source
    wanted = set(LOCALE) | set(names)
    return {
        key: value
        for key, value in found.items()
        if key in wanted or key.startswith(LOCALE_PREFIXES)
    }


def check_passed_names(names: Iterable[str]) -> None:
    """Names an admin passes on to untrusted code must not be the platform's own settings."""
    for name in names:
        if name.upper().startswith("LOOM_"):
            raise ValueError(
                f"{name!r} is one of the platform's own settings and is never passed to jobs"
            )
