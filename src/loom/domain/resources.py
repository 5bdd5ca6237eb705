"""Resources a learner asks for and a machine offers, and the arithmetic on them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")

# FfDL wrote `1Gb` and meant gigabytes; lower-case `b` is accepted as bytes, never bits.
_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "kib": 2**10,
    "mb": 10**6,
    "mib": 2**20,
    "gb": 10**9,
    "gib": 2**30,
    "tb": 10**12,
    "tib": 2**40,
}
_MEBI = 2**20


class ResourceError(ValueError):
    """A resource quantity that cannot be read; the message says why."""


def parse_memory(value: object) -> int:
    """Bytes for a memory quantity such as `1Gb`, `512MiB` or `2 GB`.

    FfDL fell back to 512 MB, silently, on anything it could not read (a missing unit included);
    here that is an error that says what was wrong.
    """
    match = _MEMORY.match(value) if isinstance(value, str) else None
    if match is None:
        raise ResourceError(f"expected a memory quantity such as 1Gb or 512MiB, got {value!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit:
        raise ResourceError(f"memory {value!r} has no unit; write e.g. {value}MiB or {value}GB")
    if unit not in _UNITS:
        known = ", ".join(["MB", "MiB", "GB", "GiB", "Gb", "TB", "TiB", "KB", "KiB"])
        raise ResourceError(f"unknown memory unit {unit!r} in {value!r}; use one of {known}")
    size = int(number * _UNITS[unit])
    if size <= 0:
        raise ResourceError(f"memory must be more than 0, got {value!r}")
    return size


def format_memory(size: int) -> str:
    """A short human form: `1.0 GiB`, `512 MiB`."""
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / _MEBI:.0f} MiB"


@dataclass(frozen=True)
class Resources:
    """CPUs (fractional), memory in bytes and whole GPUs."""

    cpus: float = 0.0
    memory: int = 0
    gpus: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpus + other.cpus, self.memory + other.memory, self.gpus + other.gpus)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpus - other.cpus, self.memory - other.memory, self.gpus - other.gpus)

    def times(self, n: int) -> Resources:
        return Resources(self.cpus * n, self.memory * n, self.gpus * n)

    def fits_in(self, free: Resources) -> bool:
        return (
            self.cpus <= free.cpus + 1e-9 and self.memory <= free.memory and self.gpus <= free.gpus
        )

    def missing(self, free: Resources) -> list[str]:
        """The resources short of `free`, as manifest fields: `gpus`, `cpus`, `memory`."""
        short = {
            "gpus": self.gpus > free.gpus,
            "cpus": self.cpus > free.cpus + 1e-9,
            "memory": self.memory > free.memory,
        }
        return [name for name, lacking in short.items() if lacking]

    def shortfall(self, free: Resources, have: str = "free") -> str:
        """What is missing, as a sentence fragment: `needs 2 GPUs, 1 free` (`have`: what the
        second number is, e.g. "in total"); empty if it fits."""
        said = {
            "gpus": f"needs {self.gpus} GPUs, {max(free.gpus, 0)} {have}",
            "cpus": f"needs {self.cpus:g} CPUs, {max(free.cpus, 0):g} {have}",
            "memory": f"needs {format_memory(self.memory)} memory, "
            f"{format_memory(max(free.memory, 0))} {have}",
        }
        return "; ".join(said[name] for name in self.missing(free))
