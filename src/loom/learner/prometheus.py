"""Katib's PrometheusMetric collector: the learner's own metrics endpoint (`PORT/PATH` on its
host) scraped while it runs; each scrape whose watched values changed is a point, its step the
scrape's number. Standard library only: the wrapper runs beside any training code."""

from __future__ import annotations

import http.client
import math
import re
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Point = dict[str, Any]

TIMEOUT_S = 1.0
MAX_BYTES = 4 * 2**20
# One sample of Prometheus' text format: a name, optional labels, a value (timestamp ignored).
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse(text: str, names: set[str]) -> dict[str, float]:
    """The watched metrics' values in an exposition: the last sample of each name."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group(1) not in names:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            found[match.group(1)] = value
    return found


class PrometheusCollector:
    def __init__(self, endpoint: str, names: list[str], host: str = "127.0.0.1") -> None:
        port, _, path = endpoint.partition("/")
        self.host, self.port, self.path = host, int(port), f"/{path}"
        self.url = f"http://{host}:{self.port}{self.path}"
        self.names = set(names)
        self.last: dict[str, float] = {}
        self.scrapes = 0
        # How a connection to the endpoint is made: in the learner's network, which is not the
        # wrapper's when the job has a network of its own (the wrapper sets it then).
        self.connect: Callable[[], socket.socket] = lambda: socket.create_connection(
            (self.host, self.port), timeout=TIMEOUT_S
        )

    def poll(self, final: bool = False) -> list[Point]:
        """A point when the endpoint answers with changed values; nothing when it does not
        answer (not up yet, or gone: the last values are kept as they were)."""
        if final:
            return []
        try:
            text = self._scrape()
        except (OSError, ValueError, http.client.HTTPException):
            return []
        values = parse(text, self.names)
        if not values or values == self.last:
            return []
        self.last = values
        self.scrapes += 1
        return [{"group": "default", "step": self.scrapes, "etimes": {}, "values": values}]

    def _scrape(self) -> str:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT_S)
        connection.sock = self.connect()
        try:
            connection.request("GET", self.path)
            answer = connection.getresponse()
            if answer.status != 200:
                raise ValueError(f"HTTP {answer.status}")
            return answer.read(MAX_BYTES).decode("utf-8", "replace")
        finally:
            connection.close()
