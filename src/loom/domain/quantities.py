"""Kubernetes' resource quantities and Go's durations, as foreign specs write them (KFP's IR,
Argo's Workflows), read into Loom's own terms. Pure; a value that is not one is a
`ValueError` saying what was expected."""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTPE]i?|k|m)?\s*$")
_MEMORY_UNITS = {
    **{"": "b", "k": "KB", "K": "KB", "M": "MB", "G": "GB", "T": "TB"},
    **{"Ki": "KiB", "Mi": "MiB", "Gi": "GiB", "Ti": "TiB"},
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def memory(value: object) -> str:
    """A memory quantity (`512M`, `1Gi`, `1073741824`) in Loom's units (`512MB`, `1GiB`)."""
    match = _QUANTITY.match(str(value)) if isinstance(value, str | int | float) else None
    if match is None or isinstance(value, bool) or match.group(2) not in _MEMORY_UNITS:
        raise ValueError(f"a memory quantity such as 512Mi or 2G is expected, got {value!r}")
    return f"{match.group(1)}{_MEMORY_UNITS[match.group(2) or '']}"


def cpus(value: object) -> float:
    """A CPU quantity (`500m`, `2`, `0.5`) as a number of CPUs."""
    match = _QUANTITY.match(str(value)) if isinstance(value, str | int | float) else None
    if match is None or isinstance(value, bool) or match.group(2) not in (None, "m"):
        raise ValueError(f"a CPU quantity such as 500m or 2 is expected, got {value!r}")
    number = float(match.group(1)) / (1000 if match.group(2) == "m" else 1)
    if number <= 0:
        raise ValueError(f"more than 0 CPUs is expected, got {value!r}")
    return number


def duration(value: object) -> float:
    """Seconds in a Go duration (`1m30s`, `10s`, `2h`) or a protobuf one (`3600s`); a bare
    number is seconds."""
    if (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value)
    ):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        parts = _DURATION_PART.findall(text)
        if "".join(n + u for n, u in parts) != text:
            raise ValueError(f"a duration such as 30s, 5m or 1h30m is expected, got {value!r}")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    else:
        raise ValueError(f"a duration such as 30s, 5m or 1h30m is expected, got {value!r}")
    if seconds < 0:
        raise ValueError(f"a duration is not negative, got {value!r}")
    return seconds
